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

# `read_run_flags NAME "$@"`: --runs N, --iters N and --precision f32|bf16 into runs, iters and
# precision (the caller sets their defaults first).
read_run_flags() {
  local name="$1"
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --runs) runs="$2"; shift 2 ;;
      --iters) iters="$2"; shift 2 ;;
      --precision) precision="$2"; shift 2 ;;
      *) echo "usage: $name [--runs N] [--iters N] [--precision f32|bf16]" >&2; exit 2 ;;
    esac
  done
  case "$precision" in f32 | bf16) ;; *) echo "$name: --precision must be f32 or bf16, got '$precision'" >&2; exit 2 ;; esac
}

# The charlm scripts' shared start: `charlm_setup NAME "$@"` reads --runs N (3), --iters N (300) and
# --precision f32|bf16 (f32) and sets runs, iters, precision, peer (the PyTorch charlm script), data
# (Moby-Dick, fetched if missing) and attograd; $root must be the repository root.
charlm_setup() {
  local name="$1"
  shift
  runs=3 iters=300 precision=f32
  read_run_flags "$name" "$@"
  attograd="$(attograd_program "$root" "$name")"
  peer="${ATTOGRAD_PEER:-$root/../shared/peer}/charlm_torch.py"
  "$root/tools/fetch_data.sh"
  data="$("$root/tools/fetch_data.sh" --where)/moby-dick.txt"
  require_openblas "$name"
}
