#!/usr/bin/env bash
# `train g2p` side by side with the PyTorch peer (../shared/peer/g2p_torch.py, the small preset) on
# CMUdict, alternating ours and theirs, at 1 and 2 threads, f32:
#  - training tokens/s: one epoch on --fraction of the training pairs (both count non-pad source
#    characters + target tokens incl. <eos>, over the training steps only);
#  - greedy decoding words/s on the whole test split (12,433 words) with the same trained weights:
#    CHECKPOINT (a `train g2p` best.safetensors) decoded by `attograd eval g2p` (the encoder once,
#    the decoder's keys and values cached) and by the peer's decode_words (the prefix re-run each
#    step), loaded through tools/bench/g2p_decode_torch.py.
# Prints each run, then medians and ratios (> 1: attograd is faster).
#   tools/bench/g2p_compare.sh CHECKPOINT [--runs N] [--fraction F]   (default 3 runs, 0.1 of the pairs)
# Uses build/tools/attograd (tools/setup.sh builds it). Run it alone on a quiet machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tools/bench/bench_lib.sh"
[ $# -ge 1 ] && [ -f "$1" ] || { echo "usage: g2p_compare.sh CHECKPOINT [--runs N] [--fraction F]" >&2; exit 2; }
checkpoint="$1"
shift
runs=3 fraction=0.1
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --fraction) fraction="$2"; shift 2 ;;
    *) echo "usage: g2p_compare.sh CHECKPOINT [--runs N] [--fraction F]" >&2; exit 2 ;;
  esac
done
attograd="$(attograd_program "$root" g2p_compare)"
peer="${ATTOGRAD_PEER:-$root/../shared/peer}/g2p_torch.py"
"$root/tools/fetch_data.sh"
data="$("$root/tools/fetch_data.sh" --where)/cmudict/index.js"
require_openblas g2p_compare
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

machine_line
for threads in 1 2; do
  for run in $(seq "$runs"); do
    "$attograd" --threads "$threads" train g2p --train-fraction "$fraction" --epochs 1 --eval-limit 200 \
      --out "$work/ours" --quiet >"$work/ours.out"
    rm -rf "$work/ours"
    ours=$(sed -n 's/^training: .* = \([0-9]*\) tokens\/s$/\1/p' "$work/ours.out")
    "$attograd" --threads "$threads" eval g2p --checkpoint "$checkpoint" --split test >"$work/ours_decode.out"
    ours_decode=$(sed -n 's/.* = \([0-9]*\) words\/s$/\1/p' "$work/ours_decode.out")
    /usr/bin/python3 "$peer" --data "$data" --preset small --threads "$threads" --train-fraction "$fraction" \
      --epochs 1 --eval-limit 200 --split-out '' >"$work/peer.out"
    theirs=$(sed -n 's/^RESULT,g2p_train_tokens_per_s,\([0-9.]*\),.*/\1/p' "$work/peer.out")
    /usr/bin/python3 "$root/tools/bench/g2p_decode_torch.py" "$checkpoint" "$data" "$threads" >"$work/peer_decode.out"
    theirs_decode=$(sed -n 's/^words\/s \([0-9.]*\)$/\1/p' "$work/peer_decode.out")
    echo "threads $threads run $run: train tok/s ours $ours peer $theirs | greedy decode words/s ours $ours_decode" \
      "peer $theirs_decode | $(grep -o 'PER [0-9.]*%  WER [0-9.]*%' "$work/ours_decode.out") vs peer" \
      "$(grep -o 'PER [0-9.]*% WER [0-9.]*%' "$work/peer_decode.out")"
    echo "$threads $ours $theirs $ours_decode $theirs_decode" >>"$work/rows"
  done
  for column in 2 3 4 5; do awk -v t="$threads" -v c="$column" '$1 == t {print $c}' "$work/rows" | median >"$work/m$column"; done
  awk -v t="$threads" -v a="$(cat "$work/m2")" -v b="$(cat "$work/m3")" -v c="$(cat "$work/m4")" -v d="$(cat "$work/m5")" \
    'BEGIN {printf "threads %s medians: training %.0f vs %.0f tok/s = %.2fx; greedy decoding %.0f vs %.0f words/s = %.1fx\n", t, a, b, a / b, c, d, c / d}'
done
machine_line
