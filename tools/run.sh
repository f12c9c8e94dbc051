#!/usr/bin/env bash
# Sets up (packages, configure, Release build) and runs `attograd ARGS...`.
#   tools/run.sh gradcheck --all
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$("$root/tools/setup.sh" | tail -n 1)"
exec "$build/tools/attograd" "$@"
