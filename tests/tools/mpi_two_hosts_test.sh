#!/usr/bin/env bash
# Two hosts, really: two network namespaces joined by a veth pair (10.231.0.1 and 10.231.0.2, this
# test's own, torn down at the end however it ends), mpirun in the first with a hostfile naming
# both and an rsh agent that enters the namespace of the host it is asked for, the ranks talking
# over Open MPI's TCP transport only (no shared memory). Shows: the same bytes (metrics.csv and
# checkpoint) as 2 ranks on one host over shared memory (2 ranks sum a + b, the same either way);
# then the partition: the link taken down mid-run ends the job within --collective-timeout + 30 s
# with a message, last.safetensors loads, and --resume on one host continues the run.
#   mpi_two_hosts_test.sh ATTOGRAD       (exit 77, a skip, without mpirun, ip or namespaces)
set -u
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (tools/setup.sh installs Open MPI)"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: no ip (iproute2)"; exit 77; }
work="$(mktemp -d)"
ln -s "$(realpath "$1")" "$work/attograd"  # every rank runs as $work/attograd: what is left is found by it
attograd="$work/attograd"
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/netns_hosts.sh"
cleanup() {
  netns_hosts_down
  pkill -KILL -f -- "$attograd" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
netns_hosts_up "$work" || { echo "SKIP: two hosts in network namespaces: see above"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
[ -z "${ASAN_OPTIONS:-}" ] || export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"  # as in mpi_test.sh
one_host=(mpirun -np 2 --oversubscribe)

for i in $(seq 300); do echo "call me ishmael. some years ago, never mind how long precisely, i went to sea $i."; done >"$work/text.txt"
charlm=(train charlm --quiet --data "$work/text.txt" --block-size 16 --layers 1 --width 16 --heads 2 --batch-size 8
  --warmup-iters 5 --lr 0.003)

echo "== two hosts over TCP: the same bytes as two ranks on one host over shared memory"
check "2 ranks on 2 hosts (TCP)" 0 "final validation loss" -- \
  timeout -k 5 120 "${two_hosts[@]}" "$attograd" --threads 1 "${charlm[@]}" --iters 40 --eval-interval 10 --out "$work/tcp"
check "2 ranks on 1 host (shared memory)" 0 "final validation loss" -- \
  timeout -k 5 120 "${one_host[@]}" "$attograd" --threads 1 "${charlm[@]}" --iters 40 --eval-interval 10 --out "$work/shm"
paste -d, "$work/tcp/metrics.csv" "$work/shm/metrics.csv" | sed 's/^/  TCP | shared memory: /'
expect "the same metrics.csv" cmp "$work/tcp/metrics.csv" "$work/shm/metrics.csv"
expect "the same last.safetensors" cmp "$work/tcp/last.safetensors" "$work/shm/last.safetensors"

echo "== the partition: the link goes down mid-run"
timeout_s=20  # longer than mpirun takes to notice the lost host (tools/netns_hosts.sh)
out="$work/cut"
timeout -k 5 120 "${two_hosts[@]}" "$attograd" --threads 1 --collective-timeout "$timeout_s" "${charlm[@]}" \
  --iters 1000000 --eval-interval 10 --out "$out" >"$work/cut.log" 2>&1 &
launcher=$!
for _ in $(seq 600); do
  [ -s "$out/last.safetensors" ] && break
  sleep 0.1
done
sleep 1
cut_at=$SECONDS
ip -n "$ns_b" link set "$veth_b" down
wait "$launcher"
status=$?
took=$((SECONDS - cut_at))
sed 's/^/  /' "$work/cut.log" | grep -v '^  *$' | head -n 30
echo "  the job ended $took s after the cut, mpirun exit $status"
expect "the job ends (not by the test's time limit) with a non-zero exit" test "$status" -ne 0 -a "$status" -ne 124 -a "$status" -ne 137
expect "within --collective-timeout + 30 s" test "$took" -le $((timeout_s + 30))
expect "a message: a rank's collective timed out or mpirun lost the host" \
  grep -qE "did not complete in [0-9]+ s \(--collective-timeout\)|lost communication with a remote daemon" "$work/cut.log"
for _ in $(seq $((10 * (timeout_s + 10)))); do  # the ranks and daemons go (killed, or by their own timeout)
  [ -z "$(ip netns pids "$ns_a")$(ip netns pids "$ns_b")" ] && break
  sleep 0.1
done
expect "no rank or daemon left in either namespace" test -z "$(ip netns pids "$ns_a")$(ip netns pids "$ns_b")"
check "last.safetensors loads" 0 "val loss" -- "$attograd" eval charlm --checkpoint "$out/last.safetensors"
done_iters="$(tail -n 1 "$out/metrics.csv" | cut -d, -f3)"
check "--resume on one host continues the run" 0 "final validation loss" -- \
  "$attograd" --threads 1 train charlm --quiet --resume "$out" --iters $((done_iters + 20))
expect "the resumed run went on by 20 iterations" test "$(tail -n 1 "$out/metrics.csv" | cut -d, -f3)" -eq $((done_iters + 20))

echo "mpi two hosts: $failures failed"
[ "$failures" -eq 0 ]
