#!/usr/bin/env bash
# `train charlm` side by side with the PyTorch peer (../shared/peer/charlm_torch.py, nanoGPT's
# baby GPT) on Moby-Dick, alternating ours and theirs, at 1 and 2 threads: training tokens/s
# (median step after 50 warm-up iterations, both sides measure it the same way), peak resident
# memory, and sampling characters/s (ours with the KV cache; the peer recomputes the window as
# nanoGPT's generate does). Prints each run, then medians and ratios (> 1: attograd is faster).
#   tools/bench/charlm_compare.sh [--runs N] [--iters N]     (default 3 runs of 300 iterations)
# Uses build/tools/attograd (tools/setup.sh builds it). Run it alone on a quiet machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tools/bench/bench_lib.sh"
charlm_setup charlm_compare "$@"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

machine_line

for threads in 1 2; do
  for run in $(seq "$runs"); do
    /usr/bin/time -v "$attograd" --threads "$threads" train charlm --iters "$iters" --eval-interval "$iters" \
      --out "$work/ours" --quiet >"$work/ours.out" 2>"$work/ours.time"
    "$attograd" --threads "$threads" sample --checkpoint "$work/ours/last.safetensors" --tokens 300 --seed 1337 \
      >/dev/null 2>"$work/sample.err"
    ours=$(sed -n 's/^training: \([0-9]*\) tokens.*/\1/p' "$work/ours.out")
    ours_sample=$(sed -n 's/.*: \([0-9]*\) characters\/s/\1/p' "$work/sample.err")
    /usr/bin/time -v /usr/bin/python3 "$peer" --data "$data" --threads "$threads" --iters "$iters" \
      --eval-interval 100000 --sample 300 >"$work/peer.out" 2>"$work/peer.time"
    theirs=$(sed -n 's/^RESULT,charlm_train_tokens_per_s,\([0-9.]*\),.*/\1/p' "$work/peer.out")
    theirs_sample=$(sed -n 's/^RESULT,charlm_sample_overall_tokens_per_s,\([0-9.]*\),.*/\1/p' "$work/peer.out")
    echo "threads $threads run $run: train tok/s ours $ours peer $theirs | peak RSS ours $(peak_mb "$work/ours.time") MB" \
      "peer $(peak_mb "$work/peer.time") MB | sample chars/s ours $ours_sample peer $theirs_sample"
    echo "$threads $ours $theirs $ours_sample $theirs_sample" >>"$work/rows"
  done
  awk -v t="$threads" '$1 == t {print $2}' "$work/rows" | median >"$work/a"
  awk -v t="$threads" '$1 == t {print $3}' "$work/rows" | median >"$work/b"
  awk -v t="$threads" '$1 == t {print $4}' "$work/rows" | median >"$work/c"
  awk -v t="$threads" '$1 == t {print $5}' "$work/rows" | median >"$work/d"
  awk -v t="$threads" -v a="$(cat "$work/a")" -v b="$(cat "$work/b")" -v c="$(cat "$work/c")" -v d="$(cat "$work/d")" \
    'BEGIN {printf "threads %s medians: training %.0f vs %.0f tok/s = %.2fx; sampling %.0f vs %.0f chars/s = %.1fx\n", t, a, b, a / b, c, d, c / d}'
done
