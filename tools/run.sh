#!/usr/bin/env bash
# Sets up (packages, configure, Release build of the program and the libraries it links; the test
# programs are test.sh's) and runs `attograd ARGS...`.
#   tools/run.sh gradcheck --all
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$("$root/tools/setup.sh" attograd | tail -n 1)"
exec "$build/tools/attograd" "$@"
