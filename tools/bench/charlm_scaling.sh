#!/usr/bin/env bash
# Data-parallel scaling of `train charlm` (defaults: nanoGPT's baby GPT) on this machine, 1 thread
# per rank, runs alternating:
#   - global batch sweep 12, 24, 48: attograd 1 rank vs `mpirun -np 2` over shared memory;
#   - at global batch 24: 2 ranks on two hosts made of network namespaces, over TCP only
#     (tools/netns_hosts.sh; needs root, skipped otherwise) vs 2 ranks over shared memory;
#   - at global batch 12: the PyTorch peer as DistributedDataParallel over gloo, 1 and 2 processes
#     (tools/bench/charlm_ddp.py).
# Training tokens/s is the global batch's tokens over rank 0's step time (median after 50 warm-up
# iterations), the same measure on both sides. Prints each run, then medians and the ratios.
# With --precision bf16, only global batch 12: attograd bf16 on 1 rank and 2 ranks over shared memory,
# against the peer's DDP (1 and 2 processes) in f32 and under its CPU autocast.
#   tools/bench/charlm_scaling.sh [--runs N] [--iters N] [--precision f32|bf16]   (3 runs of 300 iterations, f32)
# Uses build/tools/attograd (tools/setup.sh builds it). Run it alone on a quiet machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tools/netns_hosts.sh"
charlm_setup charlm_scaling "$@"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
work="$(mktemp -d)"
ns_a="" ns_b=""
trap 'netns_hosts_down; rm -rf "$work"' EXIT
tcp=yes
if [ "$(id -u)" -ne 0 ] || ! netns_hosts_up "$work" >"$work/netns.log"; then
  tcp=no
  echo "TCP between namespaces: skipped ($( [ "$(id -u)" -ne 0 ] && echo "not root" || cat "$work/netns.log"))"
fi
machine_line

ours() {  # ours LAUNCH BATCH: tokens/s; LAUNCH is 1 (one process), shm (mpirun -np 2) or tcp (two hosts)
  local launch=()
  case "$1" in
    shm) launch=(mpirun --oversubscribe -np 2) ;;
    tcp) launch=("${two_hosts[@]}") ;;
  esac
  rm -rf "$work/run"
  "${launch[@]}" "$attograd" --threads 1 train charlm --iters "$iters" --eval-interval "$iters" --batch-size "$2" \
    --precision "$precision" --out "$work/run" --quiet >"$work/ours.out" 2>&1
  sed -n 's/^training: \([0-9]*\) tokens.*/\1/p' "$work/ours.out"
}
peer_ddp() {  # peer_ddp RANKS [--bf16]: tokens/s
  /usr/bin/python3 "$root/tools/bench/charlm_ddp.py" --peer "$peer" --data "$data" --ranks "$1" --threads 1 \
    --iters "$iters" "${@:2}" >"$work/peer.out" 2>&1
  sed -n 's/^RESULT,charlm_ddp_train_tokens_per_s,\([0-9.]*\),.*/\1/p' "$work/peer.out"
}

if [ "$precision" = bf16 ]; then
  # Columns: ours bf16 1 and 2 ranks; peer DDP f32 1 and 2; peer DDP bf16 1 and 2 (global batch 12).
  for run in $(seq "$runs"); do
    row="$(ours 1 12) $(ours shm 12) $(peer_ddp 1) $(peer_ddp 2) $(peer_ddp 1 --bf16) $(peer_ddp 2 --bf16)"
    echo "run $run: tok/s at batch 12: ours bf16 1/2 ranks; peer DDP f32 1/2; peer DDP bf16 1/2: $row"
    echo "$row" >>"$work/rows"
  done
  for column in $(seq 6); do awk -v c="$column" '{print $c}' "$work/rows" | median >"$work/m$column"; done
  m() { cat "$work/m$1"; }
  awk -v o="$(m 1) $(m 2)" -v f="$(m 3) $(m 4)" -v b="$(m 5) $(m 6)" 'BEGIN {
    split(o, a); split(f, p); split(b, q)
    printf "medians (tok/s) at global batch 12, bf16:\n"
    printf "  attograd bf16 1 -> 2 ranks: %.0f -> %.0f (%.2fx)\n", a[1], a[2], a[2] / a[1]
    printf "  peer DDP f32 1 -> 2: %.0f -> %.0f; attograd 2 ranks / peer f32 2 processes: %.2fx\n", p[1], p[2], a[2] / p[2]
    printf "  peer DDP bf16 1 -> 2: %.0f -> %.0f; attograd 2 ranks / peer bf16 2 processes: %.2fx\n", q[1], q[2], a[2] / q[2]
  }'
  exit 0
fi

# Columns: 1 rank and 2 ranks at batch 12, 24, 48; TCP at 24 (0 if skipped); peer 1 and 2 at 12.
for run in $(seq "$runs"); do
  row=""
  for batch in 12 24 48; do row+="$(ours 1 "$batch") $(ours shm "$batch") "; done
  if [ "$tcp" = yes ]; then row+="$(ours tcp 24) "; else row+="0 "; fi
  row+="$(peer_ddp 1) $(peer_ddp 2)"
  echo "run $run: tok/s 1/2 ranks at batch 12, 24, 48; 2 ranks TCP at 24; peer DDP 1/2 at 12: $row"
  echo "$row" >>"$work/rows"
done
for column in $(seq 9); do awk -v c="$column" '{print $c}' "$work/rows" | median >"$work/m$column"; done
m() { cat "$work/m$1"; }
awk -v b12="$(m 1) $(m 2)" -v b24="$(m 3) $(m 4)" -v b48="$(m 5) $(m 6)" -v tcp="$(m 7)" -v p1="$(m 8)" \
  -v p2="$(m 9)" 'BEGIN {
  split(b12, a); split(b24, b); split(b48, c)
  printf "medians (tok/s), 1 rank -> 2 ranks over shared memory:\n"
  printf "  global batch 12: %.0f -> %.0f (%.2fx)\n", a[1], a[2], a[2] / a[1]
  printf "  global batch 24: %.0f -> %.0f (%.2fx)\n", b[1], b[2], b[2] / b[1]
  printf "  global batch 48: %.0f -> %.0f (%.2fx)\n", c[1], c[2], c[2] / c[1]
  if (tcp > 0) printf "2 ranks on two hosts over TCP at batch 24: %.0f tok/s, %.2fx shared memory\n", tcp, tcp / b[2]
  printf "peer DDP at batch 12: %.0f -> %.0f (%.2fx); attograd 2 ranks / peer 2 processes: %.2fx\n", p1, p2, p2 / p1, a[2] / p2
}'
