#!/usr/bin/env bash
# The side-by-side scripts in tools/bench/ refuse bad flags before they time anything, naming the
# flag and what it takes: a count that is not a whole number ≥ 1 (or is missing), a precision other
# than f32 and bf16, a flag they do not know. No PyTorch needed: the flags are read first. Each run
# is bounded (20 s) in case a script took a bad flag and went on to time.
#   bench_flags_test.sh
set -u
here="$(dirname "${BASH_SOURCE[0]}")"
bench="$here/../../tools/bench"
source "$here/cli_check.sh"
run() { timeout 20 bash "$bench/$1" "${@:2}"; }

check "transformer_compare --runs 0" 2 "transformer_compare.sh: --runs must be a whole number ≥ 1, got '0'" -- \
  run transformer_compare.sh --runs 0
check "transformer_compare --iters without a value" 2 "--iters must be a whole number ≥ 1, got ''" -- \
  run transformer_compare.sh --iters
check "transformer_compare --precision f16" 2 "--precision must be f32 or bf16, got 'f16'" -- \
  run transformer_compare.sh --precision f16
check "charlm_compare --iters 1e3" 2 "charlm_compare: --iters must be a whole number ≥ 1, got '1e3'" -- \
  run charlm_compare.sh --iters 1e3
check "charlm_scaling --runs -1" 2 "charlm_scaling: --runs must be a whole number ≥ 1, got '-1'" -- \
  run charlm_scaling.sh --runs -1
check "compare --iters ten" 2 "compare.sh: --iters must be a whole number ≥ 1, got 'ten'" -- run compare.sh --iters ten
check "compare: an unknown flag" 2 "usage: compare.sh [--iters K]" -- run compare.sh --threads 2
check "sentiment_compare --threads 0" 2 "sentiment_compare: --threads must be a whole number ≥ 1, got '0'" -- \
  run sentiment_compare.sh --threads 0
check "sentiment_compare --seed -3" 2 "sentiment_compare: --seed must be a whole number, got '-3'" -- \
  run sentiment_compare.sh --seed -3
check "g2p_compare --runs 2x" 2 "g2p_compare: --runs must be a whole number ≥ 1, got '2x'" -- \
  run g2p_compare.sh "${BASH_SOURCE[0]}" --runs 2x
check "g2p_compare without a checkpoint" 2 "usage: g2p_compare.sh CHECKPOINT" -- run g2p_compare.sh

echo "bench_flags: $failures failed"
[ "$failures" -eq 0 ]
