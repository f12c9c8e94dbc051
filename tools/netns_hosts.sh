# Two hosts on one machine, for mpirun over TCP (source it; needs root and iproute2): two network
# namespaces joined by a veth pair, 10.231.0.1 and 10.231.0.2, and the rsh agent that runs
# mpirun's daemon in the namespace of the host it is asked for.
#   netns_hosts_up WORK   makes them (their names from this shell's pid), writes WORK/agent.sh and
#                         WORK/hosts, and sets the array `two_hosts`: mpirun in the first host, 2
#                         ranks over TCP only; returns 1 (and says why) where namespaces cannot be made
#   netns_hosts_down      kills what runs in them and deletes them (the veth pair goes with them)
# mpirun notices a lost host by TCP keepalives on its own connections (after 5 s idle, 3 probes
# 2 s apart: within ~11 s) and then ends the job. It must notice before a rank's collective times
# out: once a rank has called MPI_Abort, mpirun's order to kill the lost host's ranks sits unsent
# in the connection, TCP retransmits it for many minutes, and keepalives stay silent meanwhile.

netns_hosts_up() {
  local work="$1"
  ns_a="ag2h-a-$$" ns_b="ag2h-b-$$" veth_a="ag$$a" veth_b="ag$$b"
  if ! { ip netns add "$ns_a" && ip netns add "$ns_b"; } 2>"$work/netns.err"; then
    echo "cannot make network namespaces here: $(cat "$work/netns.err")"
    netns_hosts_down
    return 1
  fi
  ip link add "$veth_a" netns "$ns_a" type veth peer name "$veth_b" netns "$ns_b" &&
    ip -n "$ns_a" addr add 10.231.0.1/24 dev "$veth_a" && ip -n "$ns_b" addr add 10.231.0.2/24 dev "$veth_b" &&
    ip -n "$ns_a" link set "$veth_a" up && ip -n "$ns_b" link set "$veth_b" up &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up || {
    echo "cannot join the namespaces by a veth pair"
    netns_hosts_down
    return 1
  }
  cat >"$work/agent.sh" <<EOF
#!/bin/sh
host="\$1"; shift
case "\$host" in
  10.231.0.1) ns=$ns_a ;;
  10.231.0.2) ns=$ns_b ;;
  *) echo "agent: no such host: \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
  chmod +x "$work/agent.sh"
  printf '10.231.0.1 slots=1\n10.231.0.2 slots=1\n' >"$work/hosts"
  two_hosts=(ip netns exec "$ns_a" mpirun --hostfile "$work/hosts" -np 2 --mca plm_rsh_agent "$work/agent.sh"
    --mca btl tcp,self --mca btl_tcp_if_include 10.231.0.0/24 --mca oob_tcp_if_include 10.231.0.0/24
    --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3)
}

netns_hosts_down() {
  local ns pids
  for ns in "$ns_a" "$ns_b"; do
    pids="$(ip netns pids "$ns" 2>/dev/null)"
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
    ip netns delete "$ns" 2>/dev/null
  done
  return 0
}
