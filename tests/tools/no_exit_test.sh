#!/usr/bin/env bash
# No library function ends the process: engine/, nn/ and tasks/ return or throw, and the program
# (tools/) decides the exit code. The one exception is nn::dist::abort_job, which must end every
# rank of an MPI job at once. Fails listing any call of exit, _Exit, quick_exit, abort or
# std::terminate found elsewhere in those folders' sources.
#   tests/tools/no_exit_test.sh [SOURCE_DIR]
set -euo pipefail
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root"
mapfile -t sources < <(find engine nn tasks -name '*.cpp' -o -name '*.h' | sort)
[ "${#sources[@]}" -gt 50 ] || { echo "NOT OK: found only ${#sources[@]} sources under $root"; exit 1; }
# Each call, unless it is inside the body of abort_job (from its definition to the closing brace).
found="$(awk '
  /^(\[\[noreturn\]\] )?void abort_job\(.*\{$/ { inside = 1 }
  !inside && tolower($0) ~ /(^|[^a-z0-9_])(std::)?(_?exit|quick_exit|abort|terminate)[ \t]*\(/ {
    print FILENAME ":" FNR ": " $0
  }
  inside && /^}/ { inside = 0 }
' "${sources[@]}")"
if [ -n "$found" ]; then
  echo "NOT OK: a library function ends the process (throw ag::Error, or return, instead):"
  echo "$found"
  exit 1
fi
echo "ok: no exit, _Exit, quick_exit, abort or terminate in ${#sources[@]} sources of engine/, nn/, tasks/ (abort_job aside)"
