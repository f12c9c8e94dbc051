#!/usr/bin/env bash
# `train g2p` side by side with the PyTorch peer (../shared/peer/g2p_torch.py, the small preset) on
# CMUdict, alternating ours and theirs, at 1 and 2 threads:
#  - training tokens/s: one epoch on --fraction of the training pairs (both count non-pad source
#    characters + target tokens incl. <eos>, over the training steps only);
#  - greedy decoding words/s on the whole test split (12,433 words) with the same trained weights:
#    CHECKPOINT (a `train g2p` best.safetensors) decoded by `attograd eval g2p` (the encoder once,
#    the decoder's keys and values cached) and by the peer's decode_words (the prefix re-run each
#    step), loaded through tools/bench/g2p_decode_torch.py.
# With --precision bf16, ours trains and decodes with --precision bf16 and the peer trains twice per
# run, in f32 and under its CPU autocast (tools/bench/peer_autocast.py --train-only): training
# tokens/s against both. The peer decodes in f32 only: PyTorch 1.13's nn.Transformer takes its fast
# path in eval mode, and that path fails under autocast ("expected scalar type BFloat16 but found
# Float"), so its decoding (and its per-epoch validation) stays f32.
# Prints each run, then medians and ratios (> 1: attograd is faster).
#   tools/bench/g2p_compare.sh CHECKPOINT [--runs N] [--fraction F] [--precision f32|bf16]
#   (default 3 runs, 0.1 of the pairs, f32)
# Uses build/tools/attograd (tools/setup.sh builds it). Run it alone on a quiet machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tools/bench/bench_lib.sh"
usage="usage: g2p_compare.sh CHECKPOINT [--runs N] [--fraction F] [--precision f32|bf16]"
[ $# -ge 1 ] && [ -f "$1" ] || { echo "$usage" >&2; exit 2; }
checkpoint="$1"
shift
runs=3 fraction=0.1 precision=f32
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) whole_number g2p_compare "$1" "${2:-}"; runs="$2"; shift 2 ;;
    --fraction) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; fraction="$2"; shift 2 ;;
    --precision) precision="${2:-}"; shift $(($# < 2 ? 1 : 2)) ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
check_precision g2p_compare
attograd="$(attograd_program "$root" g2p_compare)"
peer="${ATTOGRAD_PEER:-$root/../shared/peer}/g2p_torch.py"
"$root/tools/fetch_data.sh"
data="$("$root/tools/fetch_data.sh" --where)/cmudict/index.js"
require_peer g2p_compare
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

machine_line
if [ "$precision" = bf16 ]; then
  echo "precision: ours bf16 (training and decoding); PyTorch trains in f32 and under CPU bf16 autocast, and" \
    "decodes in f32 only (PyTorch 1.13's nn.Transformer eval fast path fails under autocast)"
fi

peer_train() {  # $1: f32 or bf16, $2: threads; prints the peer's training tokens/s
  set_peer_python "$1" --train-only
  "${peer_python[@]}" "$peer" --data "$data" --preset small --threads "$2" --train-fraction "$fraction" \
    --epochs 1 --eval-limit 200 --split-out '' >"$work/peer.out"
  sed -n 's/^RESULT,g2p_train_tokens_per_s,\([0-9.]*\),.*/\1/p' "$work/peer.out"
}

for threads in 1 2; do
  for run in $(seq "$runs"); do
    cpus=$(cpu_round_trip "$attograd")
    "$attograd" --threads "$threads" train g2p --train-fraction "$fraction" --epochs 1 --eval-limit 200 \
      --precision "$precision" --out "$work/ours" --quiet >"$work/ours.out"
    rm -rf "$work/ours"
    ours=$(sed -n 's/^training: .* = \([0-9]*\) tokens\/s$/\1/p' "$work/ours.out")
    "$attograd" --threads "$threads" eval g2p --checkpoint "$checkpoint" --split test --precision "$precision" \
      >"$work/ours_decode.out"
    ours_decode=$(sed -n 's/.* = \([0-9]*\) words\/s$/\1/p' "$work/ours_decode.out")
    theirs=$(peer_train f32 "$threads")
    theirs_bf16=-
    if [ "$precision" = bf16 ]; then theirs_bf16=$(peer_train bf16 "$threads"); fi
    /usr/bin/python3 "$root/tools/bench/g2p_decode_torch.py" "$checkpoint" "$data" "$threads" >"$work/peer_decode.out"
    theirs_decode=$(sed -n 's/^words\/s \([0-9.]*\)$/\1/p' "$work/peer_decode.out")
    echo "threads $threads run $run: train tok/s ours ($precision) $ours peer $theirs peer-bf16 $theirs_bf16 |" \
      "greedy decode words/s ours ($precision) $ours_decode peer (f32) $theirs_decode |" \
      "$(grep -o 'PER [0-9.]*%  WER [0-9.]*%' "$work/ours_decode.out") vs peer" \
      "$(grep -o 'PER [0-9.]*% WER [0-9.]*%' "$work/peer_decode.out") | CPUs' round trip $cpus ns"
    echo "$threads $ours $theirs $ours_decode $theirs_decode $theirs_bf16" >>"$work/rows"
  done
  median_of() { column_median "$work/rows" "$threads" "$1"; }
  awk -v t="$threads" -v p="$precision" -v a="$(median_of 2)" -v b="$(median_of 3)" -v c="$(median_of 4)" \
    -v d="$(median_of 5)" \
    'BEGIN {printf "threads %s medians: training (ours %s) %.0f vs PyTorch f32 %.0f tok/s = %.2fx; greedy decoding (ours %s) %.0f vs PyTorch f32 %.0f words/s = %.1fx\n", t, p, a, b, a / b, p, c, d, c / d}'
  if [ "$precision" = bf16 ]; then autocast_training_line "$threads" "$(median_of 2)" "$(median_of 6)"; fi
done
machine_line
