#!/usr/bin/env bash
# Sets up and runs the whole test suite.
#   tools/test.sh                 Release build in build/
#   tools/test.sh --sanitize      ASan + UBSan build in build-sanitize/, leak detection on
#   tools/test.sh [--sanitize] -L gradcheck    extra arguments go to ctest
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
setup_args=()
if [ "${1:-}" = "--sanitize" ]; then
  setup_args=(--sanitize)
  shift
  # Distinctive exit codes: a shell test tells a sanitizer report (86 ASan/LSan, 87 UBSan) from exit 1.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:exitcode=86"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87"
  export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp"
fi
build="$("$root/tools/setup.sh" "${setup_args[@]}" | tail -n 1)"
cd "$build"
exec ctest --output-on-failure -j 2 "$@"
