#!/usr/bin/env bash
# Threads bound by the user (OMP_PROC_BIND, OMP_PLACES) land on distinct CPUs: the program's restart
# that sets a shorter spin (tools/main.cpp, Note [waiting threads]) must not run once libgomp has
# bound the first thread, or the restarted process inherits that one CPU and every thread shares
# it. Reads libgomp's own report of each thread's places (OMP_DISPLAY_AFFINITY) in a 2-thread run.
# Skips, saying so, where this process may use fewer than two CPUs.
#   thread_binding_test.sh ATTOGRAD
set -u
attograd="$1"
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"
if [ "$(nproc)" -lt 2 ]; then
  echo "SKIP: this process may use $(nproc) CPU; binding two threads apart needs two"
  exit 0
fi
affinities() {  # the distinct places the run's threads were bound to, one per line
  env "$@" OMP_DISPLAY_AFFINITY=true "$attograd" --threads 2 bench transformer --iters 1 2>&1 |
    sed -n 's/^level 1 thread .* affinity \(.*\)$/\1/p' | sort -u
}
for setting in "OMP_PROC_BIND=true" "OMP_PROC_BIND=close" "OMP_PLACES=cores" "OMP_PLACES=threads OMP_PROC_BIND=spread"; do
  # shellcheck disable=SC2086
  places="$(affinities $setting)"
  expect "$setting: the two threads bound to two places (got: $(echo $places))" test "$(wc -l <<<"$places")" -eq 2
done
[ "$failures" -eq 0 ] || exit 1
echo "ok: user-bound threads land on distinct CPUs"
