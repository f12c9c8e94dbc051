# Shared by the side-by-side scripts (source it): the attograd program they time, the machine line
# printed beside every figure, the median of numbers on stdin, peak RSS from `/usr/bin/time -v`,
# and the OpenBLAS check the PyTorch peer needs (without it Debian's torch runs the reference
# BLAS, ~50x slower).

attograd_program() {  # $1: the repository root, $2: the calling script's name
  [ -x "$1/build/tools/attograd" ] || { echo "$2: $1/build/tools/attograd is missing: run tools/setup.sh" >&2; exit 2; }
  echo "$1/build/tools/attograd"
}

machine_line() {
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, $(grep -o -m1 'avx512f' /proc/cpuinfo || echo AVX2), load $(cut -d' ' -f1-3 /proc/loadavg)"
}

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

peak_mb() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1" | awk '{printf "%.0f", $1/1024}'; }

require_openblas() {  # $1: the calling script's name
  update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep -q "^Value: .*openblas" || {
    echo "$1: the PyTorch peer needs OpenBLAS: apt-get install libopenblas0-openmp" >&2
    exit 2
  }
}
