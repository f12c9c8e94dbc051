#!/usr/bin/env bash
# How libgomp's threads wait between parallel regions changes our 2-thread times: this runs the
# attention block at a seed size and at (32,128,256,8) and the Transformer step at 2 threads under
# each wait setting (libgomp reads them once, at start-up, so each is a fresh process), on a quiet
# machine and with one busy process beside it (the "loaded" rows: another job on one of the two
# vCPUs). Prints a table of medians of --rounds rounds (each a `bench` median itself).
#   tools/bench/omp_wait.sh [--rounds N]   (default 3; uses build/tools/attograd)
# Run it alone: the busy process it starts is its own, any other load spoils the quiet rows.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tools/bench/bench_lib.sh"
rounds=3
[ "${1:-}" = "--rounds" ] && rounds="$2"
attograd="$(attograd_program "$root" omp_wait.sh)"
work="$(mktemp -d)"
busy_pid=""
trap '[ -n "$busy_pid" ] && kill "$busy_pid" 2>/dev/null; rm -rf "$work"' EXIT

# name=environment. libgomp's default spins up to 300,000 times, then sleeps; attograd sets 3,000
# unless told otherwise (Note [waiting threads] in tools/main.cpp); passive sleeps at once.
settings=("libgomp-default=GOMP_SPINCOUNT=300000" "attograd-3000=" "spin-1000=GOMP_SPINCOUNT=1000"
  "passive=OMP_WAIT_POLICY=passive" "active=OMP_WAIT_POLICY=active")
workloads=("attention 16,4,6,3" "attention 32,128,256,8" "transformer")

run() {  # $1: environment assignment or empty, $2: workload; prints the median in ms
  local -a cmd=("$attograd" bench)
  if [ "$2" = transformer ]; then cmd+=(transformer --iters 10); else cmd+=(attention --shape "${2#attention }" --iters 20); fi
  env ${1:+"$1"} "${cmd[@]}" --threads 2 --json | sed -n 's/.*"\(fwdbwd_ms\|step_ms\)": \([0-9.]*\).*/\2/p'
}

machine_line
echo "| workload, 2 threads | machine | $(for s in "${settings[@]}"; do printf '%s | ' "${s%%=*}"; done)"
echo "|---|---|$(for _ in "${settings[@]}"; do printf -- '---|'; done)"
for load in quiet loaded; do
  if [ "$load" = loaded ]; then
    (while :; do :; done) &
    busy_pid=$!
  fi
  for w in "${workloads[@]}"; do
    row="| ${w/attention /MHA fwd+bwd (}$([ "$w" = transformer ] && echo " step" || echo ")") | $load |"
    for s in "${settings[@]}"; do
      for _ in $(seq "$rounds"); do run "${s#*=}" "$w"; done >"$work/times"
      row+=" $(median <"$work/times") ms |"
    done
    echo "$row"
  done
done
