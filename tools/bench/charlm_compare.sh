#!/usr/bin/env bash
# `train charlm` side by side with the PyTorch peer (../shared/peer/charlm_torch.py, nanoGPT's
# baby GPT) on Moby-Dick, alternating ours and theirs, at 1 and 2 threads: training tokens/s
# (median step after 50 warm-up iterations, both sides measure it the same way), peak resident
# memory, and sampling characters/s (ours with the KV cache; the peer recomputes the window as
# nanoGPT's generate does). Prints each run, then medians and ratios (> 1: attograd is faster).
# With --precision bf16, ours trains with --precision bf16 and the peer runs twice per run, in f32
# and under its CPU autocast (tools/bench/peer_autocast.py): training tokens/s against both.
#   tools/bench/charlm_compare.sh [--runs N] [--iters N] [--precision f32|bf16]   (3 runs of 300 iterations, f32)
# Uses build/tools/attograd (tools/setup.sh builds it). Run it alone on a quiet machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tools/bench/bench_lib.sh"
charlm_setup charlm_compare "$@"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

machine_line

peer_train() {  # $1: f32 or bf16, $2: threads; prints the peer's training tokens/s
  set_peer_python "$1"
  /usr/bin/time -v "${peer_python[@]}" "$peer" --data "$data" --threads "$2" --iters "$iters" \
    --eval-interval 100000 --sample 300 >"$work/peer.out" 2>"$work/peer.time"
  sed -n 's/^RESULT,charlm_train_tokens_per_s,\([0-9.]*\),.*/\1/p' "$work/peer.out"
}

for threads in 1 2; do
  for run in $(seq "$runs"); do
    cpus=$(cpu_round_trip "$attograd")
    /usr/bin/time -v "$attograd" --threads "$threads" train charlm --iters "$iters" --eval-interval "$iters" \
      --precision "$precision" --out "$work/ours" --quiet >"$work/ours.out" 2>"$work/ours.time"
    "$attograd" --threads "$threads" sample --checkpoint "$work/ours/last.safetensors" --tokens 300 --seed 1337 \
      >/dev/null 2>"$work/sample.err"
    ours=$(sed -n 's/^training: \([0-9]*\) tokens.*/\1/p' "$work/ours.out")
    ours_sample=$(sed -n 's/.*: \([0-9]*\) characters\/s/\1/p' "$work/sample.err")
    theirs=$(peer_train f32 "$threads")
    theirs_sample=$(sed -n 's/^RESULT,charlm_sample_overall_tokens_per_s,\([0-9.]*\),.*/\1/p' "$work/peer.out")
    theirs_bf16=-
    if [ "$precision" = bf16 ]; then theirs_bf16=$(peer_train bf16 "$threads"); fi
    echo "threads $threads run $run: train tok/s ours ($precision) $ours peer $theirs peer-bf16 $theirs_bf16 |" \
      "peak RSS ours $(peak_mb "$work/ours.time") MB | sample chars/s ours $ours_sample peer $theirs_sample |" \
      "CPUs' round trip $cpus ns"
    echo "$threads $ours $theirs $ours_sample $theirs_sample $theirs_bf16" >>"$work/rows"
  done
  median_of() { column_median "$work/rows" "$threads" "$1"; }
  awk -v t="$threads" -v p="$precision" -v a="$(median_of 2)" -v b="$(median_of 3)" -v c="$(median_of 4)" \
    -v d="$(median_of 5)" \
    'BEGIN {printf "threads %s medians: training (ours %s) %.0f vs %.0f tok/s = %.2fx; sampling %.0f vs %.0f chars/s = %.1fx\n", t, p, a, b, a / b, c, d, c / d}'
  if [ "$precision" = bf16 ]; then autocast_training_line "$threads" "$(median_of 2)" "$(median_of 6)"; fi
done
