#!/usr/bin/env bash
# Sets attograd up on Debian 12: installs the Debian packages that are missing, then
# configures and builds. Idempotent: with nothing changed it takes seconds.
#   tools/setup.sh [--sanitize] [TARGET...]
# Release build in build/, or ASan+UBSan build in build-sanitize/; with TARGETs only those and what
# they link (run.sh builds the `attograd` program alone, not the test programs). run.sh and test.sh
# call it; it prints the build folder's path as its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  build-essential cmake ninja-build pkg-config
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers  # oneDNN; its CMake config needs the OpenCL headers
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  libgoogle-perftools-dev  # tcmalloc for the attograd program
  libxxhash-dev  # XXH3, the checksum of the safetensors files attograd writes
  libssl-dev  # SHA-256 (OpenSSL's libcrypto): a corpus is checked again when it is read
  python3  # tests/tools/edit_checkpoint.py (the bad-input test), no torch needed
  graphviz  # `attograd graph --format svg` runs its dot
  libopenmpi-dev openmpi-bin  # data parallelism over MPI (nn/distributed.h; the mpi tests run mpirun)
  time  # /usr/bin/time -v: the peak-memory checks of the CLI tests
  chromium  # headless, for the step page's browser test (tests/tools/step_page_browser_test.py)
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# The real corpora (Moby-Dick, the UCI sentences, CMUdict) into the data cache; the tests that train on them
# need them. Offline, it says what to do and the rest of the set-up goes on.
"$root/tools/fetch_data.sh" || echo "setup: the corpora could not all be fetched (see above)" >&2

build="$root/build"
options=(-DCMAKE_BUILD_TYPE=Release)
if [ "${1:-}" = "--sanitize" ]; then
  build="$root/build-sanitize"
  options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTOGRAD_SANITIZE=ON)
  shift
fi
targets=()
for target in "$@"; do targets+=(--target "$target"); done
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja "${options[@]}" >&2
fi
cmake --build "$build" -j 2 "${targets[@]}" >&2
echo "$build"
