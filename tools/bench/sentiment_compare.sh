#!/usr/bin/env bash
# `train sentiment --dataset uci` side by side with the PyTorch peer (../shared/peer/
# sentiment_uci_torch.py, RESULTS.md §8) on the same hash split: one 20-epoch run each, alternating
# ours and theirs, at the same thread count. Times the whole process (start-up, data, training,
# the per-epoch validation; ours also writes its checkpoints and report, the peer also predicts the
# test split every epoch), and each side's own timer of its 20 epochs (ours: "trained in", the
# epochs with their checkpoints; the peer's: training and per-epoch predictions). Prints each run,
# then medians and the ratio (> 1: attograd is faster), and each side's test accuracy.
#   tools/bench/sentiment_compare.sh [--runs N] [--threads T] [--seed S]   (default 5 runs, 2 threads, seed 0)
# Uses build/tools/attograd (tools/setup.sh builds it). Run it alone on a quiet machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tools/bench/bench_lib.sh"
attograd="$(attograd_program "$root" sentiment_compare)"
peer="${ATTOGRAD_PEER:-$root/../shared/peer}/sentiment_uci_torch.py"
runs=5 threads=2 seed=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) whole_number sentiment_compare "$1" "${2:-}"; runs="$2"; shift 2 ;;
    --threads) whole_number sentiment_compare "$1" "${2:-}"; threads="$2"; shift 2 ;;
    --seed) [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "sentiment_compare: --seed must be a whole number, got '${2:-}'" >&2; exit 2; }
      seed="$2"; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--threads T] [--seed S]" >&2; exit 2 ;;
  esac
done
require_peer sentiment_compare
"$root/tools/fetch_data.sh"
data="$("$root/tools/fetch_data.sh" --where)/uci-sentiment"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

machine_line
echo "attograd $(git -C "$root" rev-parse --short HEAD), threads $threads, seed $seed"
for run in $(seq "$runs"); do
  /usr/bin/time -f "%e" -o "$work/ours.time" "$attograd" --threads "$threads" train sentiment --dataset uci \
    --seed "$seed" --out "$work/ours" --quiet >"$work/ours.out" 2>&1
  /usr/bin/time -f "%e" -o "$work/peer.time" /usr/bin/python3 "$peer" --data-dir "$data" --model attn \
    --seed "$seed" --threads "$threads" >"$work/peer.out" 2>&1
  ours=$(cat "$work/ours.time")
  theirs=$(cat "$work/peer.time")
  theirs_inside=$(sed -n 's/^RESULT,sentiment_uci_attn_wall_s[0-9]*,\([0-9.]*\),.*/\1/p' "$work/peer.out")
  ours_inside=$(sed -n 's/^trained in \([0-9.]*\) s.*/\1/p' "$work/ours.out")
  echo "run $run: wall ours $ours s, peer $theirs s; own timers (the 20 epochs: ours with its checkpoints," \
    "the peer with its per-epoch test predictions): ours $ours_inside s, peer $theirs_inside s"
  echo "$ours $theirs $theirs_inside $ours_inside" >>"$work/rows"
done
a=$(awk '{print $1}' "$work/rows" | median)
b=$(awk '{print $2}' "$work/rows" | median)
c=$(awk '{print $3}' "$work/rows" | median)
d=$(awk '{print $4}' "$work/rows" | median)
awk -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v t="$threads" -v n="$runs" 'BEGIN {
  printf "medians of %d runs at %s threads: whole process ours %.2f s, peer %.2f s = %.2fx; training by each one'"'"'s own timer ours %.2f s, peer %.2f s = %.2fx\n",
    n, t, a, b, b / a, d, c, c / d }'
echo "test accuracy, seed $seed: ours $(sed -n 's/^  overall ([0-9]*) *\([0-9.]*%\).*/\1/p' "$work/ours.out"), peer" \
  "$(sed -n 's/^RESULT,sentiment_uci_attn_test_acc_s[0-9]*,\([0-9.]*\),.*/\1%/p' "$work/peer.out")"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
