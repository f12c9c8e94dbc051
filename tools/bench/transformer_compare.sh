#!/usr/bin/env bash
# `attograd bench transformer` (nn::Transformer d_model 256, 8 heads, 2+2 layers, B 16, S = T = 64:
# a training step with Adam) side by side with the same step in PyTorch
# (../shared/peer/attn_bench_torch.py, which times its MHA cases first), alternating, at 1 and 2
# threads. Ours runs in --precision; with bf16 the peer runs both in f32 and under its CPU autocast
# (tools/bench/peer_autocast.py). Prints each run's median step, then medians over the runs and
# ratios (> 1: attograd is faster), and the step's GFLOP/s beside the rate of its products alone.
# Our step runs its batch in as many parts as threads (`bench transformer --parts`, ag::run_parts:
# each part's ops on a thread of its own); the step with every op split by thread (--parts 1) is
# timed beside it in each run.
#   tools/bench/transformer_compare.sh [--runs N] [--iters N] [--precision f32|bf16]   (3 runs, 20 steps, f32)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tools/bench/bench_lib.sh"
runs=3 iters=20 precision=f32
read_run_flags transformer_compare.sh "$@"
attograd="$(attograd_program "$root" transformer_compare.sh)"
peer="${ATTOGRAD_PEER:-$root/../shared/peer}/attn_bench_torch.py"
require_peer transformer_compare.sh
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

machine_line
peer_step() {  # $1: f32 or bf16, $2: threads; prints the peer's median step in ms
  set_peer_python "$1"
  "${peer_python[@]}" "$peer" --threads "$2" --iters "$iters" | sed -n "s/^RESULT,transformer_step_t$2,\([0-9.]*\),.*/\1/p"
}

# `product_rate THREADS`: the GFLOP/s of the step's products alone, from oneDNN's own timing of each
# matmul (ONEDNN_VERBOSE) in one more run of ours: 2·M·N·K over the dims "…xMxK:…xKxN:…xMxN". On more
# than one thread a product runs as concurrent one-thread shares (Note [products split by thread] in
# engine/kernels/matmul.h), printed as consecutive lines of the same dims: such a run of lines is one
# product, its time the longest share's. Each product counts at the median time of its kind (memory
# formats and dims), so the first calls (primitive creation, cold caches) do not slow the rate; the
# rate from the plain sum of the times, the products as they ran inside the steps, is printed beside
# it. The log goes to a file first: reading it during the run would take a core from a 2-thread run.
# The rate is measured in every run, right after that run's step (the host's speed drifts over
# minutes: a rate measured once, in a fast or a slow phase, would flatter or sink every run's share),
# and the share compares the median step with the median rate. Prints "RATE SUMMED_RATE".
product_rate() {
  ONEDNN_VERBOSE=1 "$attograd" --threads "$1" bench transformer --iters "$iters" --precision "$precision" >"$work/verbose"
  awk -F, -v threads="$1" '
    function emit() { if (shares) print kind, flop, longest }
    $1 == "onednn_verbose" && $2 == "exec" && $4 == "matmul" {
      split($(NF - 1), dims, ":"); n = split(dims[1], a, "x"); split(dims[3], d, "x")
      call_flop = 2 * a[n]; for (i in d) call_flop *= d[i]
      if (threads > 1 && $(NF - 1) == last_dims && shares < threads) {  # another share of the same product
        if ($NF > longest) longest = $NF
        flop += call_flop; shares++
        next
      }
      emit()
      flop = call_flop; longest = $NF; shares = 1; last_dims = $(NF - 1); kind = $7 ":" last_dims; gsub(/ /, "_", kind)
    } END { emit() }' "$work/verbose" |
    sort -k1,1 -k3,3g |
    awk '{ kind[NR] = $1; flop[NR] = $2; ms[NR] = $3; summed += $3 }
      END {
        for (i = 1; i <= NR; i = j) {  # each run of one kind, sorted by time: count × median
          for (j = i; j <= NR && kind[j] == kind[i]; j++) total += flop[j]
          typical += (j - i) * ms[i + int((j - i - 1) / 2)]
        }
        printf "%.1f %.1f", total / typical / 1e6, total / summed / 1e6
      }'
}

for threads in 1 2; do
  for run in $(seq "$runs"); do
    cpus=$(cpu_round_trip "$attograd")
    json=$("$attograd" --threads "$threads" bench transformer --iters "$iters" --precision "$precision" \
      --parts "$threads" --json)
    ours=$(sed -n 's/.*"step_ms": \([0-9.]*\),.*/\1/p' <<<"$json")
    every_op_split=-
    if [ "$threads" -gt 1 ]; then
      every_op_split=$("$attograd" --threads "$threads" bench transformer --iters "$iters" --precision "$precision" \
        --json | sed -n 's/.*"step_ms": \([0-9.]*\),.*/\1/p')
    fi
    step_gflop=$(sed -n 's/.*"step_gflops": \([0-9.]*\).*/\1/p' <<<"$json")  # the same every run
    read -r rate summed_rate <<<"$(product_rate "$threads")"
    theirs=$(peer_step f32 "$threads")
    theirs_bf16=-
    if [ "$precision" = bf16 ]; then theirs_bf16=$(peer_step bf16 "$threads"); fi
    echo "threads $threads run $run: step ms ours ($precision) $ours (every op split by thread: $every_op_split)," \
      "PyTorch f32 $theirs, PyTorch bf16 $theirs_bf16;" \
      "products alone $rate GFLOP/s ($summed_rate as summed inside the steps)," \
      "share $(awk -v f="$step_gflop" -v a="$ours" -v r="$rate" 'BEGIN {printf "%.0f%%", 100 * f / a * 1000 / r}');" \
      "CPUs' round trip $cpus ns"
    echo "$threads $ours $theirs $theirs_bf16 $rate $summed_rate $every_op_split" >>"$work/rows"
  done
  median_of() { column_median "$work/rows" "$threads" "$1"; }
  awk -v t="$threads" -v p="$precision" -v a="$(median_of 2)" -v b="$(median_of 3)" \
    'BEGIN {printf "threads %s medians: step ours (%s) %.2f ms vs PyTorch f32 %.2f ms = %.2fx\n", t, p, a, b, b / a}'
  if [ "$threads" -gt 1 ]; then
    awk -v t="$threads" -v a="$(median_of 2)" -v e="$(median_of 7)" \
      'BEGIN {printf "threads %s medians: step ours in parts %.2f ms, every op split by thread %.2f ms = %.2fx\n", t, a, e, e / a}'
  fi
  if [ "$precision" = bf16 ]; then
    awk -v t="$threads" -v a="$(median_of 2)" -v c="$(median_of 4)" \
      'BEGIN {printf "threads %s medians: step ours (bf16) %.2f ms vs PyTorch bf16 autocast %.2f ms = %.2fx\n", t, a, c, c / a}'
  fi
  awk -v t="$threads" -v f="$step_gflop" -v a="$(median_of 2)" -v r="$(median_of 5)" -v s="$(median_of 6)" \
    'BEGIN {printf "threads %s: step %.1f GFLOP/s (median) = %.0f%% of the products alone, %.1f GFLOP/s (median; %.1f as summed inside the steps) (oneDNN timing)\n", t, f / a * 1000, 100 * f / a * 1000 / r, r, s}'
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
