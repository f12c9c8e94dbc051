# Sourced by the benchmark scripts: the machine line every figure needs, medians, peak memory, and
# the check that the PyTorch peer runs on OpenBLAS as RESULTS.md measured it.
machine_line() {
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(grep -o -m1 'avx512f' /proc/cpuinfo || echo AVX2), load $(cut -d' ' -f1-3 /proc/loadavg)"
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
peak_mb() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1" | awk '{printf "%.0f", $1/1024}'; }
require_openblas() {  # torch on the reference BLAS is ~50x slower than the peer's figures
  update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep -q "^Value: .*openblas" || {
    echo "$1: the PyTorch peer needs OpenBLAS: apt-get install libopenblas0-openmp" >&2
    exit 2
  }
}
