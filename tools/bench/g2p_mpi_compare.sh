#!/usr/bin/env bash
# `train g2p` data-parallel beside one process at the same global batch: the preset (f32, 1 thread
# per process, the default global batch of 256) as 1 process and as `mpirun -np 2` (2 ranks × 1
# thread, each rank half of every batch), alternating. A split step is the same step
# (tests/tools/split_step_test.sh), so the two curves may differ only by f32 reassociation. Prints
# the machine before and after, the two runs' per-epoch metrics.csv side by side (train loss of each
# and their relative difference, validation PER and WER of each), the largest relative difference
# of the train loss, and each side's training tokens/s (its own "training: ... tokens/s" line: the
# tokens of the whole batches over rank 0's step time) as the median of the runs, with the ratio.
# The tables are the last run's: a run repeats bit for bit.
#   tools/bench/g2p_mpi_compare.sh [--epochs N] [--preset small|base] [--runs R] [--train-fraction F]
#                                  [--eval-limit N] [--data FILE] [--attograd PATH]
#   (3 epochs of the small preset on all of CMUdict's training pairs and validation words, 1 run;
#   --train-fraction, --eval-limit and --data go to `train g2p` for a quick smoke run)
# Uses build/tools/attograd (tools/setup.sh builds it) unless --attograd. Run it alone on a quiet
# machine: the load is printed, not checked.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tools/bench/bench_lib.sh"
name=g2p_mpi_compare
usage="usage: $name.sh [--epochs N] [--preset small|base] [--runs R] [--train-fraction F] [--eval-limit N] \
[--data FILE] [--attograd PATH]"
fail() { echo "$name: $1" >&2; exit 2; }
epochs=3 preset=small runs=1 attograd="" passed=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
    --epochs) whole_number "$name" "$1" "${2:-}"; epochs="$2"; shift 2 ;;
    --runs) whole_number "$name" "$1" "${2:-}"; runs="$2"; shift 2 ;;
    --preset) preset="${2:-}"; shift 2 ;;
    --attograd) attograd="${2:-}"; shift 2 ;;
    --train-fraction | --eval-limit | --data) [ $# -ge 2 ] || fail "$1 needs a value"; passed+=("$1" "$2"); shift 2 ;;
    *) echo "$name: unknown argument '$1'" >&2; echo "$usage" >&2; exit 2 ;;
  esac
done
case "$preset" in small | base) ;; *) fail "--preset must be small or base, got '$preset'" ;; esac
command -v mpirun >/dev/null || fail "no mpirun (tools/setup.sh installs Open MPI)"
if [ -z "$attograd" ]; then attograd="$(attograd_program "$root" "$name")"; fi
[ -x "$attograd" ] || fail "--attograd $attograd is not an executable"
[[ " ${passed[*]} " == *" --data "* ]] || "$root/tools/fetch_data.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# train LAUNCH: one `train g2p` into $work/LAUNCH (1: one process; 2: mpirun -np 2); appends its
# tokens/s to $work/LAUNCH.rates and prints its line.
train() {
  local launch=() out="$work/$1"
  [ "$1" = 2 ] && launch=(mpirun --oversubscribe -np 2)
  rm -rf "$out"
  local line=""
  if "${launch[@]}" "$attograd" --threads 1 train g2p --preset "$preset" --precision f32 --epochs "$epochs" \
    "${passed[@]}" --out "$out" --quiet >"$out.log" 2>&1; then
    line="$(grep -m1 '^training: .* tokens/s$' "$out.log")" || true
  fi
  if [ -z "$line" ]; then
    echo "$name: the run on $1 rank(s) failed or printed no \"training: ... tokens/s\" line; its output ends:" >&2
    tail -n 15 "$out.log" >&2
    exit 1
  fi
  echo "$line" | sed 's/.* = \([0-9]*\) tokens\/s$/\1/' >>"$work/$1.rates"
  echo "  $1 rank(s) × 1 thread: $line"
}

machine_line
echo "uptime: $(uptime)"
echo "train g2p --preset $preset --precision f32 --epochs $epochs ${passed[*]}, --threads 1: 1 process vs" \
  "mpirun -np 2 at the same global batch; $runs run(s) each, alternating"
for run in $(seq "$runs"); do
  echo "run $run:"
  train 1
  train 2
done
grep -m1 '^train: ' "$work/1.log"

# The per-epoch metrics side by side, and the largest relative difference of the train loss.
paste -d, "$work/1/metrics.csv" "$work/2/metrics.csv" | awk -F, '
  NR == 1 {
    printf "%5s %13s %13s %9s %9s %9s %9s %9s\n", "epoch", "loss 1 rank", "loss 2 ranks", "rel diff",
           "PER% 1", "PER% 2", "WER% 1", "WER% 2"
    next
  }
  { d = $2 - $6; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); if (r > worst) worst = r
    printf "%5s %13.8f %13.8f %9.1e %9.3f %9.3f %9.3f %9.3f\n", $1, $2, $6, r, $3, $7, $4, $8 }
  END { printf "largest relative difference of the train loss: %.2e\n", worst }'
awk -v a="$(median <"$work/1.rates")" -v b="$(median <"$work/2.rates")" -v n="$runs" 'BEGIN {
  printf "training tokens/s (median of %d run%s): 1 rank × 1 thread %.0f, 2 ranks × 1 thread %.0f = %.2fx\n",
         n, (n > 1 ? "s" : ""), a, b, b / a }'
machine_line
echo "uptime: $(uptime)"
