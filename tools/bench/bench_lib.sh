# Shared by the side-by-side scripts (source it): the attograd program they time, the machine line
# printed beside every figure, the median of numbers on stdin or of a column of the runs' rows, peak
# RSS from `/usr/bin/time -v`, the OpenBLAS check the PyTorch peer needs (without it Debian's torch
# runs the reference BLAS, ~50x slower), the flags and the command that run a peer in a precision.

attograd_program() {  # $1: the repository root, $2: the calling script's name
  [ -x "$1/build/tools/attograd" ] || { echo "$2: $1/build/tools/attograd is missing: run tools/setup.sh" >&2; exit 2; }
  echo "$1/build/tools/attograd"
}

# The CPU's model, its count, which of AVX-512 and the bf16 instructions (AVX512_BF16, AMX) it has,
# and the load average.
machine_line() {
  local isa
  isa=$(grep -m1 '^flags' /proc/cpuinfo | grep -o -w 'avx512f\|avx512_bf16\|amx_bf16' | paste -sd' ')
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, ${isa:-AVX2}, load $(cut -d' ' -f1-3 /proc/loadavg)"
}

# `cpu_round_trip ATTOGRAD`: ns for a cache line's round trip between the first two CPUs (`attograd
# bench cpus`, Note [near and far CPUs] in tools/bench_command.cpp: a 2-thread run where they sit far
# apart is slower), or - on one CPU.
cpu_round_trip() { "$1" bench cpus --iters 5 --json 2>/dev/null | sed -n 's/.*"round_trip_ns": \([0-9.]*\).*/\1/p' | grep . || echo -; }

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

# `column_median ROWS THREADS COLUMN`: the median of COLUMN over the lines of the file ROWS whose
# first field is THREADS (one line per run: threads, then that run's figures).
column_median() { awk -v t="$2" -v c="$3" '$1 == t {print $c}' "$1" | median; }

peak_mb() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1" | awk '{printf "%.0f", $1/1024}'; }

# `require_peer NAME`: refuses to start, naming the Debian packages to install, where the PyTorch
# peer cannot run (no torch for /usr/bin/python3) or would run on the reference BLAS (~2 GFLOP/s).
require_peer() {
  local missing=()
  /usr/bin/python3 -c 'import torch' 2>/dev/null || missing+=(python3-torch)
  update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep -q "^Value: .*openblas" ||
    missing+=(libopenblas0-openmp)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "$1: the PyTorch peer needs ${missing[*]}: apt-get install ${missing[*]}" >&2
    exit 2
  fi
}

# `autocast_training_line THREADS OURS PEER`: the medians line of our bf16 training tokens/s against
# the peer's under its CPU autocast.
autocast_training_line() {
  awk -v t="$1" -v a="$2" -v e="$3" \
    'BEGIN {printf "threads %s medians: training (ours bf16) %.0f vs PyTorch bf16 autocast %.0f tok/s = %.2fx\n", t, a, e, a / e}'
}

# `whole_number NAME FLAG VALUE`: refuses a VALUE of FLAG that is not a whole number ≥ 1 (an empty
# one too: the flag given last, without its value).
whole_number() {
  [[ "$3" =~ ^[1-9][0-9]*$ ]] || { echo "$1: $2 must be a whole number ≥ 1, got '$3'" >&2; exit 2; }
}

# `read_run_flags NAME "$@"`: --runs N, --iters N and --precision f32|bf16 into runs, iters and
# precision (the caller sets their defaults first).
read_run_flags() {
  local name="$1"
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --runs) whole_number "$name" "$1" "${2:-}"; runs="$2"; shift 2 ;;
      --iters) whole_number "$name" "$1" "${2:-}"; iters="$2"; shift 2 ;;
      --precision) precision="${2:-}"; shift $(($# < 2 ? 1 : 2)) ;;
      *) echo "usage: $name [--runs N] [--iters N] [--precision f32|bf16]" >&2; exit 2 ;;
    esac
  done
  check_precision "$name"
}

check_precision() {  # $1: the calling script's name; refuses a $precision other than f32 and bf16
  case "$precision" in f32 | bf16) ;; *) echo "$1: --precision must be f32 or bf16, got '$precision'" >&2; exit 2 ;; esac
}

# `set_peer_python f32|bf16 [--train-only]`: sets the array peer_python to the command that runs a
# PyTorch peer script (its path and arguments follow): /usr/bin/python3, and in bf16 the script
# under tools/bench/peer_autocast.py (with --train-only, its training steps only); $root must be
# the repository root.
set_peer_python() {
  peer_python=(/usr/bin/python3)
  if [ "$1" = bf16 ]; then peer_python+=("$root/tools/bench/peer_autocast.py" "${@:2}"); fi
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
  require_peer "$name"
}
