#!/usr/bin/env bash
# Data-parallel scaling of `train charlm` (defaults: nanoGPT's baby GPT, global batch 12) on this
# machine, runs alternating: attograd 1 rank x 1 thread, attograd `mpirun -np 2` x 1 thread, and the
# PyTorch peer as DistributedDataParallel over gloo, 1 and 2 processes x 1 thread
# (tools/bench/charlm_ddp.py). Training tokens/s is the global batch's tokens over rank 0's step
# time (median after 50 warm-up iterations), the same measure on both sides. Prints each run, then
# medians and the ratios: attograd 2 ranks / 1 rank, and attograd 2 ranks / peer DDP 2 processes.
#   tools/bench/charlm_scaling.sh [--runs N] [--iters N]     (default 3 runs of 300 iterations)
# Uses build/tools/attograd (tools/setup.sh builds it). Run it alone on a quiet machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
charlm_setup charlm_scaling "$@"
mpirun=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -ne 0 ] || mpirun+=(--allow-run-as-root)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
machine_line

ours() {  # ours RANKS: tokens/s
  local launch=()
  [ "$1" -eq 1 ] || launch=("${mpirun[@]}")
  rm -rf "$work/run"
  "${launch[@]}" "$attograd" --threads 1 train charlm --iters "$iters" --eval-interval "$iters" --out "$work/run" \
    --quiet >"$work/ours.out" 2>&1
  sed -n 's/^training: \([0-9]*\) tokens.*/\1/p' "$work/ours.out"
}
peer_ddp() {  # peer_ddp RANKS: tokens/s
  /usr/bin/python3 "$root/tools/bench/charlm_ddp.py" --peer "$peer" --data "$data" --ranks "$1" --threads 1 \
    --iters "$iters" >"$work/peer.out" 2>&1
  sed -n 's/^RESULT,charlm_ddp_train_tokens_per_s,\([0-9.]*\),.*/\1/p' "$work/peer.out"
}

for run in $(seq "$runs"); do
  row="$(ours 1) $(ours 2) $(peer_ddp 1) $(peer_ddp 2)"
  echo "run $run: train tok/s attograd 1x1 / 2x1, peer DDP 1x1 / 2x1: $row"
  echo "$row" >>"$work/rows"
done
for column in 1 2 3 4; do awk -v c="$column" '{print $c}' "$work/rows" | median >"$work/m$column"; done
awk -v a="$(cat "$work/m1")" -v b="$(cat "$work/m2")" -v c="$(cat "$work/m3")" -v d="$(cat "$work/m4")" 'BEGIN {
  printf "medians (tok/s): attograd 1 rank %.0f, 2 ranks %.0f; peer DDP 1 process %.0f, 2 processes %.0f\n", a, b, c, d
  printf "attograd 2 ranks / 1 rank: %.2fx (peer: %.2fx); attograd 2 ranks / peer DDP 2 processes: %.2fx\n", b / a, d / c, b / d
}'
