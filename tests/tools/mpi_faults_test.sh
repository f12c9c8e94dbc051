#!/usr/bin/env bash
# The faults that used to hang a data-parallel job, each with 2 ranks under mpirun on this host and
# again with the ranks' roles swapped: a data file, a --resume folder or a valid flag on one rank
# only; other --epochs, other data of the same vocabulary (the same path, other bytes) on one rank;
# bad data on one rank; g2p with other pairs or another cached CMUdict on one rank; a rank that stops
# answering mid-run; a g2p rank killed mid-run. Every job must end within 30 s
# with the failing rank's message (or the field, file or bucket at fault) and exit 1, 2, or 4 for a
# collective that timed out, and leave no process behind. Then signals (SIGTERM to either rank,
# SIGUSR1 to mpirun): every rank stops after the same step, rank 0 saves it, and
# --resume ends with the metrics of an uninterrupted run.
#   mpi_faults_test.sh ATTOGRAD          (exit 77, a skip, without mpirun)
set -u
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (tools/setup.sh installs Open MPI)"; exit 77; }
work="$(mktemp -d)"
# Every rank runs as $work/attograd: what is left of a job is found by that path.
ln -s "$(realpath "$1")" "$work/attograd"
attograd="$work/attograd"
cleanup() {
  pkill -KILL -f -- "$attograd" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI runs as root
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
[ -z "${ASAN_OPTIONS:-}" ] || export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"  # as in mpi_test.sh

# nothing_left NAME: no rank of the last job is still running (given 2 s to go).
nothing_left() {
  for _ in $(seq 20); do
    pgrep -f -- "$attograd" >/dev/null || { echo "OK $1: no process left behind"; return; }
    sleep 0.1
  done
  echo "NOT OK $1: processes left behind: $(pgrep -a -f -- "$attograd")"
  pkill -KILL -f -- "$attograd"
  failures=$((failures + 1))
}

# both_ways NAME EXIT MESSAGE MESSAGE_SWAPPED -- ARGS_A -- ARGS_B: `mpirun attograd ARGS_A : attograd
# ARGS_B` (one rank each), then the same with ARGS_B on rank 0; each must end in 30 s with EXIT and
# its MESSAGE, and leave nothing behind. ARGS may begin with mpirun's --wdir DIR and -x VAR=VALUE.
both_ways() {
  local name="$1" expected="$2" message="$3" swapped="$4"
  shift 5
  local a=() b=()
  while [ "$1" != "--" ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  one_way "$name" "$expected" "$message" a b
  one_way "$name (roles swapped)" "$expected" "$swapped" b a
}
one_way() {  # one_way NAME EXIT MESSAGE ARRAY0 ARRAY1
  local -n args0="$4" args1="$5"
  local first=("${args0[@]}") second=("${args1[@]}") context0=(-np 1) context1=(-np 1)
  while [ "${first[0]}" = "--wdir" ] || [ "${first[0]}" = "-x" ]; do
    context0+=("${first[@]:0:2}")
    first=("${first[@]:2}")
  done
  while [ "${second[0]}" = "--wdir" ] || [ "${second[0]}" = "-x" ]; do
    context1+=("${second[@]:0:2}")
    second=("${second[@]:2}")
  done
  check "$1" "$2" "$3" -- timeout -k 5 30 mpirun "${context0[@]}" "$attograd" --threads 1 "${first[@]}" : \
    "${context1[@]}" "$attograd" --threads 1 "${second[@]}"
  nothing_left "$1"
}

# wait_for FILE: until FILE is written (at most 30 s).
wait_for() {
  for _ in $(seq 300); do
    [ -s "$1" ] && return
    sleep 0.1
  done
}
# rank_pid R: the process id of rank R of the running job.
rank_pid() {
  for pid in $(pgrep -f -- "^$attograd"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$pid"
  done
}

printf '1\tgood film\n0\tbad film\n1\tgreat acting\n0\tawful plot\n' >"$work/train.tsv"
mkdir -p "$work/a" "$work/b"
cp "$work/train.tsv" "$work/a/train.tsv"
printf '0\tgood film\n1\tbad film\n1\tgreat acting\n0\tawful plot\n' >"$work/b/train.tsv"  # same words
for i in $(seq 200); do echo "call me ishmael. some years ago $i."; done >"$work/a/text.txt"
for i in $(seq 200); do echo "call me ishmeal. some years ago $i."; done >"$work/b/text.txt"  # same length, letters
printf '1\tgood film\nno tab on this line\n' >"$work/bad.tsv"
# g2p's toy pairs, and on b one pronunciation other (T A K for T A C); each also as the CMUdict of a
# data cache of its own (two hosts whose cached index.js differ).
for w in cat dog bird fish horse mouse tiger zebra camel eagle lion wolf bear deer frog goat ox yak emu owl; do
  for s in "" s er y ing; do echo "$w$s"; done
done | bash "$(dirname "${BASH_SOURCE[0]}")/reversal_pairs.sh" >"$work/a/pairs.tsv"
sed '1s/T A C$/T A K/' "$work/a/pairs.tsv" >"$work/b/pairs.tsv"
for side in a b; do
  mkdir -p "$work/$side/cache/cmudict"
  awk -F'\t' '{ printf "  \"%s\": \"%s\",\n", $1, $2 }' "$work/$side/pairs.tsv" >"$work/$side/cache/cmudict/index.js"
done
cmudict_sha() { sha256sum "$work/$1/cache/cmudict/index.js" | cut -d' ' -f1; }
sentiment=(train sentiment --quiet --epochs 2)
squares=(train squares --quiet)
charlm=(train charlm --quiet --block-size 8 --layers 1 --width 16 --heads 2 --batch-size 4)
g2p=(train g2p --quiet --d-model 16 --enc-layers 1 --dec-layers 1 --ff 32 --heads 2 --batch-size 16)
"$attograd" --threads 1 train squares --quiet --epochs 1 --out "$work/run" >/dev/null

echo "== a usage error on one rank: every rank ends with its message, exit 2"
both_ways "--data missing on one host" 2 "rank 1 of 2: --data: File does not exist: $work/not_on_this_host.tsv" \
  "rank 0 of 2: --data: File does not exist" -- \
  "${sentiment[@]}" --data "$work/train.tsv" -- "${sentiment[@]}" --data "$work/not_on_this_host.tsv"
both_ways "--resume folder missing on one host" 2 "rank 1 of 2: --resume: Directory does not exist" \
  "rank 0 of 2: --resume: Directory does not exist" -- \
  "${squares[@]}" --epochs 2 --resume "$work/run" --out "$work/resumed" -- \
  "${squares[@]}" --epochs 2 --resume "$work/not_here" --out "$work/resumed"
both_ways "--epochs -2 on one rank" 2 "rank 1 of 2: --epochs: expected a decimal whole number" \
  "rank 0 of 2: --epochs: expected a decimal whole number" -- "${squares[@]}" --epochs 2 -- "${squares[@]}" --epochs -2

echo "== settings or data that differ: refused before training, naming the field or the file"
both_ways "--epochs 2 and 3" 2 "config.json's epochs is 2 on rank 0, 3 on rank 1" \
  "config.json's epochs is 3 on rank 0, 2 on rank 1" -- "${squares[@]}" --epochs 2 -- "${squares[@]}" --epochs 3
# config.json records the data resolved (a relative path from each rank's folder) and its sha256, so
# one relative path in two folders is two paths, named first.
both_ways "sentiment: other bytes of the same vocabulary at the same relative path" 2 \
  "config.json's data is \"$work/a/train.tsv\" on rank 0, \"$work/b/train.tsv\" on rank 1" \
  "config.json's data is \"$work/b/train.tsv\" on rank 0, \"$work/a/train.tsv\" on rank 1" -- \
  --wdir "$work/a" "${sentiment[@]}" --data train.tsv -- --wdir "$work/b" "${sentiment[@]}" --data train.tsv
both_ways "charlm: other text at the same relative path" 2 \
  "config.json's data is \"$work/a/text.txt\" on rank 0" "config.json's data is \"$work/b/text.txt\" on rank 0" -- \
  --wdir "$work/a" "${charlm[@]}" --iters 4 --warmup-iters 1 --data text.txt -- --wdir "$work/b" "${charlm[@]}" --iters 4 --warmup-iters 1 --data text.txt
both_ways "g2p: other pairs at the same relative path" 2 \
  "config.json's data is \"$work/a/pairs.tsv\" on rank 0, \"$work/b/pairs.tsv\" on rank 1" \
  "config.json's data is \"$work/b/pairs.tsv\" on rank 0, \"$work/a/pairs.tsv\" on rank 1" -- \
  --wdir "$work/a" "${g2p[@]}" --data pairs.tsv --out "$work/g2p-refused" -- \
  --wdir "$work/b" "${g2p[@]}" --data pairs.tsv --out "$work/g2p-refused"
# Both ranks read "the CMUdict of the data cache" (config.json's data is ""): its sha256 is what
# differs, and the ranks are told their data, not their flags, differ (exit 1).
both_ways "g2p: another CMUdict in each rank's data cache" 1 \
  "the ranks' data differ: config.json's data_sha256 is \"$(cmudict_sha a)\" on rank 0, \"$(cmudict_sha b)\" on rank 1" \
  "config.json's data_sha256 is \"$(cmudict_sha b)\" on rank 0, \"$(cmudict_sha a)\" on rank 1" -- \
  -x "ATTOGRAD_DATA_DIR=$work/a/cache" "${g2p[@]}" --out "$work/g2p-refused" -- \
  -x "ATTOGRAD_DATA_DIR=$work/b/cache" "${g2p[@]}" --out "$work/g2p-refused"

echo "== a runtime error on one rank: exit 1 with its message"
both_ways "bad data on one rank" 1 "rank 1 of 2: error: $work/bad.tsv:2" "rank 0 of 2: error: $work/bad.tsv:2" -- \
  "${sentiment[@]}" --data "$work/train.tsv" -- "${sentiment[@]}" --data "$work/bad.tsv"

echo "== a rank that stops answering mid-run (SIGSTOP): the others time out (--collective-timeout 5), exit 4"
# stopped_rank R: rank R of a running charlm job is stopped once it has written a checkpoint.
stopped_rank() {
  local rank="$1" out="$work/stopped-$1" other=$((1 - $1))
  timeout -k 5 30 mpirun -np 2 "$attograd" --threads 1 --collective-timeout 5 "${charlm[@]}" --iters 100000 \
    --warmup-iters 1 --eval-interval 5 --data "$work/a/text.txt" --out "$out" >"$work/stopped.log" 2>&1 &
  local launcher=$!
  wait_for "$out/last.safetensors"
  kill -STOP "$(rank_pid "$rank")"
  wait "$launcher"
  local status=$?
  local name="rank $rank stopped"
  echo "  mpirun exit $status; $(grep -m1 'did not complete' "$work/stopped.log")"
  expect "$name: exit 4 (a collective timed out)" test "$status" -eq 4
  expect "$name: rank $other names the step's reduction and rank $rank" \
    grep -q "rank $other of 2: error: .* did not complete in [0-9]* s (--collective-timeout): rank $rank had not arrived" \
    "$work/stopped.log"
  nothing_left "$name"
  check "$name: last.safetensors loads" 0 "val loss" -- "$attograd" eval charlm --checkpoint "$out/last.safetensors"
}
stopped_rank 1
stopped_rank 0

echo "== a g2p rank killed mid-run (SIGKILL): the job ends naming it, the last checkpoint loads"
# killed_rank R: rank R of a running g2p job is killed once it has written a checkpoint.
killed_rank() {
  local rank="$1" out="$work/killed-$1" name="g2p: rank $1 killed"
  timeout -k 5 30 mpirun -np 2 "$attograd" --threads 1 "${g2p[@]}" --epochs 100000 --data "$work/a/pairs.tsv" \
    --out "$out" >"$work/killed.log" 2>&1 &
  local launcher=$!
  wait_for "$out/last.safetensors"
  kill -KILL "$(rank_pid "$rank")"
  wait "$launcher"
  local status=$?
  echo "  mpirun exit $status; $(grep -m1 'exited on signal' "$work/killed.log")"
  expect "$name: the job ends with a non-zero exit" test "$status" -ne 0 -a "$status" -ne 124
  expect "$name: mpirun names rank $rank and signal 9" grep -q "rank $rank .*exited on signal 9" "$work/killed.log"
  nothing_left "$name"
  check "$name: last.safetensors loads" 0 "test (greedy): PER" -- \
    "$attograd" eval g2p --checkpoint "$out/last.safetensors"
}
killed_rank 1
killed_rank 0

echo "== signals: every rank stops after the same step, rank 0 saves it, --resume ends as an uninterrupted run"
# A constant lr (no warm-up, --min-lr = --lr): the schedule does not depend on --iters, so a run
# stopped after iteration k and resumed to k + 20 must end as a fresh run of k + 20 iterations.
steady=("${charlm[@]}" --data "$work/a/text.txt" --warmup-iters 0 --lr 0.001 --min-lr 0.001 --eval-interval 10)
# signalled NAME TARGET SIGNAL: SIGNAL to TARGET (mpirun, rank0 or rank1) once a checkpoint exists.
signalled() {
  local name="$1" target="$2" signal="$3" out="$work/signalled-$2-$3"
  timeout -k 5 30 mpirun -np 2 "$attograd" --threads 1 "${steady[@]}" --iters 100000 --out "$out" \
    >"$work/signalled.log" 2>&1 &
  local launcher=$! pid=""
  wait_for "$out/last.safetensors"
  if [ "$target" = mpirun ]; then
    pid="$(pgrep -P "$launcher" -x mpirun)"  # not `timeout`, which does not pass SIGUSR1 on
  else
    pid="$(rank_pid "${target#rank}")"
  fi
  kill "-$signal" "$pid"
  wait "$launcher"
  local status=$?
  local stopped
  stopped="$(grep -o 'stopped by .* after iteration [0-9]*' "$work/signalled.log")"
  echo "  mpirun exit $status; $stopped"
  expect "$name: the job ends (exit $status), rank 0 saying where it stopped" \
    test "$status" -ne 0 -a "$status" -ne 124 -a -n "$stopped"
  nothing_left "$name"
  local k="${stopped##* }"
  [ -n "$k" ] || return
  check "$name: --resume to iteration $((k + 20))" 0 "final validation loss" -- timeout -k 5 30 mpirun -np 2 \
    "$attograd" --threads 1 "${steady[@]}" --iters $((k + 20)) --resume "$out"
  timeout -k 5 30 mpirun -np 2 "$attograd" --threads 1 "${steady[@]}" --iters $((k + 20)) --out "$out-straight" \
    >/dev/null 2>&1
  expect "$name: resumed metrics.csv equals an uninterrupted run's" cmp "$out/metrics.csv" "$out-straight/metrics.csv"
}
signalled "SIGTERM to rank 1" rank1 TERM
signalled "SIGTERM to rank 0" rank0 TERM
signalled "SIGUSR1 to mpirun (forwarded at once)" mpirun USR1
# Not here: SIGTERM to mpirun, which passes it on only after odls_base_sigkill_timeout and SIGKILLs
# as long after (README "More than one machine"); one run in a few ended without rank 0's save.

echo "mpi faults: $failures failed"
[ "$failures" -eq 0 ]
