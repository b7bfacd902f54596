#!/usr/bin/env bash
# Several machines, simulated on one: HOSTS network namespaces ("hosts" h1..hN, each with
# its own network stack, eth0 = 10.77.0.1i/24 and host name) joined by veth pairs to a
# bridge in a further namespace (the "switch", 10.77.0.1, where mpirun runs as on a login
# node). mpirun reaches the hosts through a hostfile and an rsh agent (netns_rsh.sh: `ip
# netns exec HOST-NS ...` where it would `ssh HOST ...`), and the ranks talk TCP over the
# bridge (--mca btl self,tcp), as across machines. No address leaves the namespaces this
# script creates, and it deletes them on exit (trap). Checks:
#   (a) 3 hosts end with the parameters, bit for bit, of one process on 3 devices;
#   (b) a host dies mid-training (its link cut, then every process of its namespace
#       killed, as a power cut would): every rank stops with a clear error within the
#       collective timeout, none hangs; prints the time from the fault to every rank's exit;
#   (c) latency + loss between hosts (tc netem, or netem_relay.py where the kernel has no
#       sch_netem) slows the run but changes no bit;
#   (d) --resume on the 2 surviving hosts (3 -> 2 processes) continues from the last
#       checkpoint and ends with the bits of one process on 2 devices resuming from it;
#       prints the steps lost.
#   usage: multihost.sh DPTRAIN DATA_DIR WORK_DIR   (root; exit 77 = skipped)
set -euo pipefail
dptrain=$1 data=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)

hosts=(h1 h2 h3)
source "$here/netns_hosts.sh"

# 1000 images in batches of 96: 11 steps per epoch.
common=(--data "$data" --train-limit 1000 --test-limit 300 --batch-size 96 --seed 3)
# run_mpi LOG HOST... -- DPTRAIN-ARGS...: mpirun (in the switch namespace) with one rank on
# each HOST, bounded by a 150 s timeout; returns mpirun's status.
run_mpi() {
  local log=$1
  shift
  local list=()
  while [[ $1 != -- ]]; do
    list+=("$1")
    shift
  done
  shift
  printf '%s slots=1\n' "${list[@]}" >"$work/hostfile"
  local status=0
  in_ns sw unshare --uts sh -c 'hostname switch && exec "$@"' sh \
    timeout --kill-after=10 150 mpirun --hostfile "$work/hostfile" -np "${#list[@]}" "${mpirun_netns_args[@]}" \
    "$dptrain" train --dist mpi --devices cpu:1 --cores 1 "${common[@]}" "$@" >"$log" 2>&1 || status=$?
  return $status
}
digests() { "$dptrain" checkpoint-info "$1" | grep digest; }
newest() { ls "$1"/step-*.ckpt | tail -1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
source "$here/../support/fail.sh"

# (a) 3 hosts against one process on 3 devices.
t0=$(now)
run_mpi "$work/a.log" h1 h2 h3 -- --epochs 1 --checkpoint-dir "$work/a" || fail "the 3-host run failed" "$work/a.log"
t1=$(now)
"$dptrain" train --devices cpu:3 --cores 3 "${common[@]}" --epochs 1 --checkpoint-dir "$work/a_local" \
  >"$work/a_local.log" 2>&1 || fail "the one-process run failed" "$work/a_local.log"
diff <(digests "$(newest "$work/a")") <(digests "$(newest "$work/a_local")") >/dev/null ||
  fail "3 hosts and 3 devices ended with different parameters" "$work/a.log" "$work/a_local.log"
grep -q "on 3 MPI processes" "$work/a.log" || fail "the run did not span 3 processes" "$work/a.log"
clean_seconds=$(elapsed "$t0" "$t1")
echo "multihost (a): 3 hosts equal 3 devices bit for bit ($(digests "$(newest "$work/a")" | head -1)); ${clean_seconds} s"

# (c) latency and loss between every pair of hosts: slower, the same bits. With sch_netem
# in the kernel, netem on every host's link; without it (some VM kernels), the switch
# routes every host-to-host packet through a TUN device (route_through_relay,
# netns_hosts.sh), and netem_relay.py, a user-space netem, delays and drops them there.
delay_ms=5 jitter_ms=2 loss_percent=2
relay_pid=
if in_ns h1 tc qdisc add dev eth0 root netem delay ${delay_ms}ms ${jitter_ms}ms loss ${loss_percent}% 2>/dev/null; then
  shaping="tc netem delay ${delay_ms}ms ${jitter_ms}ms loss ${loss_percent}% on every host's link"
  for h in h2 h3; do in_ns "$h" tc qdisc add dev eth0 root netem delay ${delay_ms}ms ${jitter_ms}ms loss ${loss_percent}%; done
  unshape() { for h in "${hosts[@]}"; do in_ns "$h" tc qdisc del dev eth0 root; done; }
else
  shaping="netem_relay.py (this kernel has no sch_netem): delay ${delay_ms} ms +- ${jitter_ms} ms, loss ${loss_percent}% on every packet between hosts"
  route_through_relay
  # Not through in_ns (a function: $! would be a subshell's, and the relay would outlive it).
  ip netns exec "$prefix-sw" python3 "$here/netem_relay.py" --dev tun0 --delay-ms $delay_ms --jitter-ms $jitter_ms \
    --loss-percent $loss_percent 2>"$work/c_relay.log" &
  relay_pid=$!
  unshape() {
    kill "$relay_pid" && wait "$relay_pid" || true
    route_directly
  }
fi
t0=$(now)
run_mpi "$work/c.log" h1 h2 h3 -- --epochs 1 --checkpoint-dir "$work/c" || fail "the run under $shaping failed" "$work/c.log"
t1=$(now)
unshape
diff <(digests "$(newest "$work/a")") <(digests "$(newest "$work/c")") >/dev/null ||
  fail "$shaping changed the result" "$work/c.log"
echo "multihost (c): $shaping: the same bits, $(elapsed "$t0" "$t1") s (clean: ${clean_seconds} s)"
[[ -z $relay_pid ]] || echo "multihost (c): $(cat "$work/c_relay.log")"

# (b) h3 (rank 2) dies just after the checkpoint of step 8. The run asks for 1000 epochs
# (--epochs is not among the settings a resume must match), so however fast this machine
# is it cannot end before the fault (4 epochs, 44 steps, took 0.4 s on a quiet one): no
# timed window. (d) then resumes it with the 4 epochs of (a).
timeout_s=10
run_mpi "$work/b.log" h1 h2 h3 -- --epochs 1000 --checkpoint-dir "$work/b" --checkpoint-every 4 \
  --collective-timeout "$timeout_s" &
job=$!
until [[ -e $work/b/step-000000008.ckpt ]]; do
  kill -0 "$job" 2>/dev/null || fail "the run ended before its checkpoint of step 8" "$work/b.log"
  sleep 0.05
done
sleep 0.1 # mid-way between checkpoints: some steps are lost
in_ns h3 ip link set eth0 down # no FIN, no RST reaches the others: a dead machine
t_fault=$(now)
ip netns pids "$prefix-h3" | xargs -r kill -9
# Every rank's exit: the moment no dptrain is left in its host's namespace.
declare -A gone=()
while ((${#gone[@]} < 2)); do
  for h in h1 h2; do
    [[ -n ${gone[$h]:-} ]] && continue
    if ! runs_dptrain "$h"; then
      gone[$h]=$(now)
    fi
  done
  awk -v a="$t_fault" -v b="$(now)" -v l=$((timeout_s * 6)) 'BEGIN { exit !(b - a > l) }' &&
    fail "ranks still running $((timeout_s * 6)) s after the fault: a hang" "$work/b.log"
  sleep 0.1
done
# mpirun itself may go on waiting for the dead host's daemon (no FIN or RST ever comes):
# allowed 20 s after the last rank, then ended, as an operator would.
mpirun_note="ended by itself"
for _ in $(seq 1 200); do
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$job" 2>/dev/null; then
  mpirun_note="still waiting for h3's daemon 20 s after the ranks had exited: killed"
  ip netns pids "$prefix-sw" | xargs -r kill -TERM
fi
status=0
wait "$job" || status=$?
t_mpirun=$(now)
((status != 0)) || fail "the job succeeded although a host died" "$work/b.log"
rank0_exit=$(elapsed "$t_fault" "${gone[h1]}")
rank1_exit=$(elapsed "$t_fault" "${gone[h2]}")
grep -Eq "dptrain: error: rank [01] of 3 \(h[12]\): .*timed out after $timeout_s s waiting for rank" \
  "$work/b.log" || fail "no surviving rank reported its collective timing out" "$work/b.log"
awk -v a="$rank0_exit" -v b="$rank1_exit" -v l=$((timeout_s + 10)) 'BEGIN { exit !(a <= l && b <= l) }' ||
  fail "the ranks took $rank0_exit / $rank1_exit s to stop, more than the ${timeout_s} s timeout + 10" "$work/b.log"
last=$(newest "$work/b")
last_step=$(basename "$last" .ckpt | sed 's/step-0*//')
written=$(stat -c %.9Y "$last")
steps_per_s=$(awk -v s="$clean_seconds" 'BEGIN { printf "%.2f", 11 / s }')
lost=$(awk -v a="$written" -v b="$t_fault" -v r="$steps_per_s" 'BEGIN { printf "%d", (b - a) * r + 0.999 }')
grep -E "dptrain: error: rank" "$work/b.log" | head -2
echo "multihost (b): h3 died $(elapsed "$written" "$t_fault") s after step-$last_step.ckpt; rank 0 (h1) exited" \
  "${rank0_exit} s and rank 1 (h2) ${rank1_exit} s after the fault (collective timeout ${timeout_s} s)," \
  "mpirun $(elapsed "$t_fault" "$t_mpirun") s ($mpirun_note), status $status"

# (d) resume on the survivors, 3 -> 2 processes, against one process on 2 devices resuming
# from a copy of the same checkpoint.
cp -r "$work/b" "$work/d_local"
run_mpi "$work/d.log" h1 h2 -- --epochs 4 --checkpoint-dir "$work/b" --checkpoint-every 4 --resume ||
  fail "resuming on 2 hosts failed" "$work/d.log"
grep -q "resuming from .*step-0*$last_step.ckpt" "$work/d.log" ||
  fail "the resumed run did not start from step $last_step" "$work/d.log"
"$dptrain" train --devices cpu:2 --cores 2 "${common[@]}" --epochs 4 --checkpoint-dir "$work/d_local" \
  --checkpoint-every 4 --resume >"$work/d_local.log" 2>&1 || fail "the one-process resume failed" "$work/d_local.log"
[[ $(newest "$work/b") == */step-000000044.ckpt ]] || fail "the resumed run did not reach step 44" "$work/d.log"
diff <(digests "$(newest "$work/b")") <(digests "$(newest "$work/d_local")") >/dev/null ||
  fail "2 hosts resuming and 2 devices resuming ended differently" "$work/d.log" "$work/d_local.log"
echo "multihost (d): resumed on h1, h2 from step $last_step to 44, equal to 2 devices resuming bit for bit;" \
  "steps lost: about $lost (the fault came $(elapsed "$written" "$t_fault") s after the checkpoint," \
  "at ~$steps_per_s steps/s)"
echo "PASS: multihost: (a) 3 hosts = 3 devices, (b) dead host stops every rank in <= ${rank0_exit}/${rank1_exit} s," \
  "(c) link shaping changes no bit, (d) 3 -> 2 hosts resume from step $last_step"
