#!/usr/bin/env bash
# Fuzzes attograd with libFuzzer (clang, ASan + UBSan, leak detection), SECONDS each (default 60):
# the safetensors reader (with a structure-aware mutator), the sentiment TSV reader, the command
# line's flags, and `run`: the program running eval/predict/sample/train on fuzzed checkpoint and
# data files (tests/fuzz/fuzz_run.cpp).
#   tools/fuzz.sh [SECONDS]       JOBS=1 tools/fuzz.sh 60   (build parallelism, default 2)
# Builds into build-fuzz/, starts from the committed seeds in tests/fuzz/<target>/ and grows a
# working corpus in build-fuzz/corpus/<target>/. A crash, leak, timeout or uncaught exception is
# a finding: its input is saved as build-fuzz/findings/<target>-*; copy it into
# tests/fuzz/<target>/ once fixed, and the ctest fuzz_replay_<target> keeps it fixed.
# Exit 0 only when no target found anything. Prints the executions per target.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
targets=(safetensors tsv cli run g2p)

# Not in setup.sh: CI does not fuzz. Debian 12: clang 14, its libFuzzer/sanitizer runtimes, and
# LLVM's OpenMP (clang's -fopenmp links libomp).
packages=(clang libclang-rt-14-dev libomp-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "fuzz: installing Debian packages: ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
"$root/tools/setup.sh" >/dev/null  # the other packages attograd needs

build="$root/build-fuzz"
if [ ! -f "$build/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DATTOGRAD_FUZZ=ON "${launcher[@]}" >&2
fi
cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]/#/fuzz_}" >&2

export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp"
mkdir -p "$build/findings"
found=0
for target in "${targets[@]}"; do
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  log="$build/fuzz_$target.log"
  max_len=8192
  [ "$target" = run ] && max_len=65536  # its seeds are whole (tiny) checkpoints
  status=0
  # -close_fd_mask=3: the CLI's own messages would drown the fuzzer's; -timeout: a hang is a finding.
  "$build/tests/fuzz/fuzz_$target" "$corpus" "$root/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -max_len="$max_len" -close_fd_mask=3 -print_final_stats=1 \
    -artifact_prefix="$build/findings/$target-" >"$log" 2>&1 || status=$?
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")"
  findings="$(find "$build/findings" -name "$target-*" | wc -l)"
  echo "fuzz $target: $execs executions in ${seconds}s, exit $status, $findings findings (log: $log)"
  if [ "$status" -ne 0 ] || [ "$findings" -ne 0 ]; then
    found=1
    grep -m 5 -E "ERROR|SUMMARY|deadly|uncaught" "$log" || true
  fi
done
exit "$found"
