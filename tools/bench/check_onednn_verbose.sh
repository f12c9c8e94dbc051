#!/usr/bin/env bash
# Runs the benchmark workloads and the fast-path tests under ONEDNN_VERBOSE=1 and fails if any
# oneDNN primitive executed with a reference implementation (`ref:…`, e.g. the 1400× slower
# matmul a batch-broadcast mask post-op falls to, or softmax backward on AVX2). The engine's
# primitive cache refuses ref implementations, so a ref line here means a regression.
#   tools/bench/check_onednn_verbose.sh path/to/attograd path/to/engine_tests
# Deliberate exceptions: none today; list an implementation in `allowed` with the benchmark
# that chose it.
set -euo pipefail
attograd="$1"
engine_tests="$2"
allowed='^$'
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

export ONEDNN_VERBOSE=1 OMP_NUM_THREADS=2
for shape in 1,6,16,2 16,4,6,3 32,128,256,8 8,512,512,8; do
  "$attograd" bench attention --shape "$shape" --iters 1 >>"$log"
done
"$engine_tests" --gtest_filter='FastPath.*:Attention.*' >>"$log"

# onednn_verbose,exec,cpu,<primitive>,<implementation>,...
exec_lines="$(grep '^onednn_verbose,exec,' "$log" || true)"
if [ -z "$exec_lines" ]; then
  echo "check_onednn_verbose: no oneDNN primitive ran at all: is the fast path dispatching?" >&2
  exit 1
fi
ref_lines="$(awk -F, '$5 ~ /^ref/' <<<"$exec_lines" | grep -v -E "$allowed" || true)"
echo "oneDNN implementations that ran (count, primitive, implementation):"
awk -F, '{print $4 "," $5}' <<<"$exec_lines" | sort | uniq -c
if [ -n "$ref_lines" ]; then
  echo "check_onednn_verbose: FAILED: a hot op ran oneDNN's reference implementation:" >&2
  sort -u -t, -k4,7 <<<"$ref_lines" | cut -c1-300 >&2
  exit 1
fi
echo "check_onednn_verbose: OK, no ref implementation ran"
