#!/usr/bin/env bash
# A smoke run of tools/bench/g2p_mpi_compare.sh (1 process beside 2 ranks) on the toy pairs, 2
# epochs of the small preset: both runs count the same training tokens, the side-by-side table has
# one row per epoch and the train losses agree to a relative 1e-5 (a split step is the same step:
# split_step_test.sh says why that limit), the tokens/s ratio is printed; its usage errors, and a
# failing run's output passed on.
#   g2p_mpi_compare_test.sh ATTOGRAD          (exit 77, a skip, without mpirun)
set -u
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (tools/setup.sh installs Open MPI)"; exit 77; }
attograd="$(realpath "$1")"
here="$(dirname "${BASH_SOURCE[0]}")"
script="$here/../../tools/bench/g2p_mpi_compare.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$here/cli_check.sh"
source "$here/mpi_check.sh"  # Open MPI as root, oversubscribed; under ASan, its allocations not leak-checked

printf '%s\n' cat cats dog dogs bird birds fish horse mouse mice tiger zebra camel eagle lion wolf bear deer frog \
  goat ox yak emu owl ant bee cow pig hen fox | bash "$here/reversal_pairs.sh" >"$work/pairs.tsv"
check "a smoke run" 0 "training tokens/s (median of 1 run): 1 rank × 1 thread" -- \
  bash "$script" --attograd "$attograd" --epochs 2 --data "$work/pairs.tsv"
output="$last_output"
echo "$output" | sed 's/^/  /'
tokens() { sed -n "s/^  $1 rank(s) × 1 thread: training: \([0-9]*\) tokens .*/\1/p" <<<"$output"; }
expect "1 process and 2 ranks count the same training tokens ($(tokens 1), $(tokens 2))" \
  test -n "$(tokens 1)" -a "$(tokens 1)" = "$(tokens 2)"
expect "one row per epoch" test "$(grep -cE '^ +[12] +[0-9]+\.[0-9]+ ' <<<"$output")" -eq 2
worst="$(sed -n 's/^largest relative difference of the train loss: //p' <<<"$output")"
expect "the train losses agree to a relative 1e-5 (largest $worst)" \
  awk -v w="$worst" 'BEGIN { exit !(w != "" && w <= 1e-5) }'
expect "the machine and the load before and after" test "$(grep -c '^uptime: ' <<<"$output")" -eq 2

check "--epochs 0" 2 "--epochs must be a whole number ≥ 1, got '0'" -- bash "$script" --epochs 0
check "an unknown flag" 2 "unknown argument '--threads'" -- bash "$script" --threads 2
check "--help" 0 "tokens/s" -- bash "$script" --help
check "a run that fails: its output" 1 "the run on 1 rank(s) failed" -- \
  bash "$script" --attograd "$attograd" --data "$work/missing.tsv"
expect "... which names the missing file" grep -qF -- "--data: File does not exist: $work/missing.tsv" <<<"$last_output"

echo "g2p_mpi_compare: $failures failed"
[ "$failures" -eq 0 ]
