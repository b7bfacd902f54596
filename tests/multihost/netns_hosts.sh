# Sourced by the multi-host scripts (multihost.sh, launch.sh): HOSTS network namespaces
# ("hosts" h1..hN, each with its own network stack, eth0 = 10.77.0.1i/24 and host name)
# joined by veth pairs to a bridge in a further namespace (the "switch", 10.77.0.1, where
# mpirun runs as on a login node). mpirun reaches the hosts through a hostfile and an rsh
# agent (netns_rsh.sh: `ip netns exec HOST-NS ...` where it would `ssh HOST ...`). No
# address leaves the namespaces, and they are deleted on exit (trap), every process in
# them killed. Expects `hosts` (names) and `work` (a directory, emptied here) to be set.
#   in_ns NS COMMAND...: runs COMMAND in namespace NS (sw, or a host).
#   runs_dptrain HOST: whether a dptrain process is left in HOST's namespace.
#   mpirun_netns_args: the mpirun arguments for these hosts (agent, interfaces, TCP).
#   route_through_relay / route_directly: host-to-host packets through tun0 (for
#     netem_relay.py), and back to the bridge.
# Without root, or without ip, tc, unshare or mpirun, it exits 77 (a skip, for ctest).
skip() {
  echo "SKIP: $1"
  exit 77
}
[[ $(id -u) -eq 0 ]] || skip "needs root for network namespaces"
for tool in ip tc unshare mpirun; do command -v "$tool" >/dev/null || skip "$tool not found"; done

prefix=dptmh$$
export DPT_MH_PREFIX=$prefix
cleanup() {
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix-" || true); do
    ip netns pids "$ns" | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
rm -rf "$work"
mkdir -p "$work"

in_ns() {
  local ns=$1
  shift
  ip netns exec "$prefix-$ns" "$@"
}
ip netns add "$prefix-sw"
in_ns sw ip link set lo up
in_ns sw ip link add br0 type bridge
in_ns sw ip addr add 10.77.0.1/24 dev br0
in_ns sw ip link set br0 up
i=0
for h in "${hosts[@]}"; do
  i=$((i + 1))
  ip netns add "$prefix-$h"
  in_ns sw ip link add "p$h" type veth peer name eth0 netns "$prefix-$h"
  in_ns sw ip link set "p$h" master br0 up
  in_ns "$h" ip addr add "10.77.0.1$i/24" dev eth0
  in_ns "$h" ip link set eth0 up
  in_ns "$h" ip link set lo up
done

# Whether a dptrain process is left in HOST's namespace.
runs_dptrain() {
  local pid
  for pid in $(ip netns pids "$prefix-$1"); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == dptrain* ]] && return 0
  done
  return 1
}
# Where the kernel has no sch_netem: the switch routes every host-to-host packet through
# a TUN device, tun0, instead of bridging it, for a user-space relay (netem_relay.py) to
# delay or drop (policy routing: a packet from a host's port goes to tun0, the relay writes
# it back, and from tun0 it is routed to the destination's port; proxy ARP answers for the
# hosts). route_directly undoes it (after the relay has stopped).
route_through_relay() {
  local i=0 h
  in_ns sw ip tuntap add dev tun0 mode tun
  in_ns sw ip link set tun0 up
  in_ns sw sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.tun0.rp_filter=0
  in_ns sw ip route add default dev tun0 table 100
  for h in "${hosts[@]}"; do
    i=$((i + 1))
    in_ns sw ip link set "p$h" nomaster
    in_ns sw sysctl -qw "net.ipv4.conf.p$h.proxy_arp=1" "net.ipv4.conf.p$h.rp_filter=0"
    in_ns sw ip route add "10.77.0.1$i/32" dev "p$h"
    in_ns sw ip rule add iif "p$h" lookup 100 pref 100
    in_ns "$h" ip neigh flush dev eth0
  done
}
route_directly() {
  local i=0 h
  for h in "${hosts[@]}"; do
    i=$((i + 1))
    in_ns sw ip rule del iif "p$h" lookup 100 pref 100
    in_ns sw ip route del "10.77.0.1$i/32" dev "p$h"
    in_ns sw ip link set "p$h" master br0
    in_ns "$h" ip neigh flush dev eth0
  done
  in_ns sw ip link del tun0
}
mpirun_netns_args=(--allow-run-as-root --mca plm_rsh_agent "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/netns_rsh.sh"
  --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include 10.77.0.0/24 --mca btl self,tcp
  --mca btl_tcp_if_include 10.77.0.0/24 -x DPT_MH_PREFIX -x OMP_NUM_THREADS=1)
