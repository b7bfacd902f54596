# Sourced by bench/link_fit.sh and bench/model_check.sh after tests/multihost/netns_hosts.sh
# (which defines in_ns, prefix and the hosts): link settings between the namespace hosts.
#   shape SETTING   applies SETTING to every host in "hosts"; unshape undoes it.
# SETTING: unshaped | tbf-RATE (tc tbf on each host's eth0 egress, RATE as tc writes it:
# 10gbit, 1gbit, 100mbit) | tbf-RATE+delay-Dms | relay+delay-Dms. The delay goes through
# tests/multihost/netem_relay.py (a user-space netem on a TUN device in the switch namespace,
# as tests/multihost/multihost.sh (c) does where the kernel has no sch_netem): every packet
# between hosts is held back D ms (one way). The relay, a Python loop, also limits the
# bandwidth; the fits (bench/link_fit.sh) measure the link as it is.
# Needs: root (the callers sourced netns_hosts.sh), $out (a directory for the relay's log).
relay_pid=
# shape SETTING: applies a link setting to every host.
shape() {
  local setting=$1 rate= delay=
  case $setting in
    unshaped) ;;
    tbf-*+delay-*) rate=${setting#tbf-}; rate=${rate%%+*}; delay=${setting##*delay-}; delay=${delay%ms} ;;
    tbf-*) rate=${setting#tbf-} ;;
    relay+delay-*) delay=${setting##*delay-}; delay=${delay%ms} ;;
    *) echo "link_fit: unknown link setting $setting" >&2; exit 2 ;;
  esac
  if [[ -n $rate ]]; then
    # burst: at least 64 KiB (a GSO packet on a veth) and 1 ms of the rate.
    local bits
    bits=$(awk -v r="$rate" 'BEGIN { m = (r ~ /gbit/) ? 1e9 : (r ~ /mbit/) ? 1e6 : 1; sub(/[a-z]+/, "", r); print r * m }')
    local burst=$(awk -v b="$bits" 'BEGIN { x = b / 8 / 1000; if (x < 131072) x = 131072; printf "%d", x }')
    for h in "${hosts[@]}"; do in_ns "$h" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency "${TBF_LATENCY:-100ms}"; done
  fi
  if [[ -n $delay ]]; then
    # As tests/multihost/multihost.sh (c): host-to-host packets through tun0 and the relay.
    route_through_relay
    ip netns exec "$prefix-sw" python3 "$root/tests/multihost/netem_relay.py" --dev tun0 --delay-ms "$delay" \
      2>"$out/relay-$setting.log" &
    relay_pid=$!
  fi
}
unshape() {
  local h
  for h in "${hosts[@]}"; do in_ns "$h" tc qdisc del dev eth0 root 2>/dev/null || true; done
  if [[ -n $relay_pid ]]; then
    kill "$relay_pid" && wait "$relay_pid" || true
    relay_pid=
    route_directly
  fi
}

