#!/usr/bin/env bash
# `jacobian_cost`: jacfwd and jacrev agree on every size asked (the Jacobian's entries within f32
# error), the row counts of JVPs and VJPs are n and m, and bad sizes are usage errors naming them.
# Timings are printed, never checked. Prints OK / NOT OK per case.
set -u
jacobian_cost="$1"
source "$(dirname "$0")/cli_check.sh"

check "two sizes" 0 "max |diff|" -- "$jacobian_cost" --repeats 1 40,3 3,40
rows="$(grep -E '^ +[0-9]+ +[0-9]+ ' <<<"$last_output")"
expect "one row per size" test "$(wc -l <<<"$rows")" -eq 2
expect "JVPs = n and VJPs = m" awk '{ if ($3 != $1 || $5 != $2) exit 1 }' <<<"$rows"
expect "jacfwd = jacrev to f32 error" awk '{ if ($8 + 0 > 1e-5) exit 1 }' <<<"$rows"
check "help" 0 "jacfwd" -- "$jacobian_cost" --help
check "a size without m" 2 "got '5'" -- "$jacobian_cost" 5
check "a size not a number" 2 "got 'x,1'" -- "$jacobian_cost" x,1
check "a zero size" 2 "got '0,4'" -- "$jacobian_cost" 0,4
check "trailing text" 2 "got '3,4x'" -- "$jacobian_cost" 3,4x
check "no repeats" 2 "--repeats" -- "$jacobian_cost" --repeats 0

echo "$failures failed"
[ "$failures" -eq 0 ]
