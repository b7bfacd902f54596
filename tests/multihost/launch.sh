#!/usr/bin/env bash
# dptrain launch across machines (network namespaces, netns_hosts.sh), every run with
# --deterministic, against one process that never failed:
#   (e) h3 dies mid-epoch (its link cut, every process in it killed, as a power cut would):
#       the launcher ends the run, leaves h3 out (it does not answer a probe) and restarts
#       on h1, h2 from the newest checkpoint; then h3 comes back, and the launcher takes it
#       in again (the job checkpoints and restarts on 3 processes). One checkpoint
#       directory per host ({host}): h3's is behind when it returns, and is brought up to
#       date;
#   (f) h1, rank 0's host, dies and its checkpoint directory with it ({host}, h1's deleted):
#       the run restarts on h2, h3 from their own copies;
#   (g) h2's link is cut and its processes left running (a partition): the launcher ends
#       the run and restarts on h1, h3; once the link is back nothing of the job is left
#       on h2. One shared checkpoint directory.
# Each must end by itself with the uninterrupted run's parameters, bit for bit, and leave
# no dptrain or Open MPI daemon on any host. Prints a row of the fault table for each.
#   usage: launch.sh DPTRAIN DATA_DIR WORK_DIR   (root; exit 77 = skipped)
set -euo pipefail
dptrain=$1 data=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)

hosts=(h1 h2 h3)
source "$here/netns_hosts.sh"
printf '%s slots=1\n' "${hosts[@]}" >"$work/hosts"
# 12000 images in batches of 192: 63 steps per epoch, 315 in all, a checkpoint every 4 steps.
# Long enough for a host to be taken back well before the end: a re-admission probe that
# started while the link was still down waits out --probe-timeout (3 s) before the next one
# (--readmit-every 1), which with 3 epochs (4 s of training on 2 hosts) left the job
# finishing first in about 1 run of 4, on the code before and after the checkpoint-folder
# change alike.
common=(--data "$data" --train-limit 12000 --test-limit 300 --batch-size 192 --seed 3 --epochs 5 --deterministic
  --devices cpu:1 --cores 1 --checkpoint-every 4 --collective-timeout 4 --progress off)
source "$here/../support/fail.sh"
digest() { "$dptrain" checkpoint-info "$(ls "$1"/step-*.ckpt | tail -1)" | grep digest; }
now() { date +%s.%N; }
# left_on_hosts: the dptrain and Open MPI daemon processes left in any host's namespace.
left_on_hosts() {
  local h pid
  for h in "${hosts[@]}"; do
    for pid in $(ip netns pids "$prefix-$h"); do
      case $(cat "/proc/$pid/comm" 2>/dev/null) in dptrain* | orted) echo "$h:$pid:$(cat "/proc/$pid/comm")" ;; esac
    done
  done
}
# kill_host H: a power cut (no FIN, no RST reaches the others).
kill_host() {
  in_ns "$1" ip link set eth0 down
  ip netns pids "$prefix-$1" | xargs -r kill -9
}
# launch NAME [DIR]: dptrain launch in the switch namespace, in the background ($launcher),
# checkpointing into DIR ($work/NAME unless given).
launch() {
  in_ns sw unshare --uts sh -c 'hostname switch && exec "$@"' sh \
    timeout --kill-after=10 300 "$dptrain" launch --hostfile "$work/hosts" --max-restarts 3 --probe-timeout 3 \
    --error-grace 2 --readmit-every 1 --mpirun-args "${mpirun_netns_args[*]}" -- "${common[@]}" --checkpoint-dir "${2:-$work/$1}" \
    --metrics "$work/$1.jsonl" >"$work/$1.log" 2>&1 &
  launcher=$!
}
wait_for() { # wait_for NAME TEST...: polls TEST while the launcher runs
  local name=$1
  shift
  until "$@"; do
    kill -0 "$launcher" 2>/dev/null || fail "$name: the launcher ended before $*" "$work/$name.log"
    sleep 0.05
  done
}
events() { grep -c "\"event\":\"$2\"" "$work/$1.launch.jsonl" || true; }
# finish NAME RESTARTS GROWS WHAT FAULT_TIME RESUMED_TIME DIR...: waits for the launcher and
# checks the result, the newest checkpoint in each DIR included; RESUMED_TIME: when the
# restarted run printed "resuming from" (training again).
finish() {
  local name=$1 restarts=$2 grows=$3 what=$4 fault_time=$5 resumed_time=$6 status=0
  shift 6
  local dirs=("$@")
  wait "$launcher" || status=$?
  ((status == 0)) || fail "$what: the launcher exited $status" "$work/$name.log"
  [[ $(events "$name" restart) == "$restarts" && $(events "$name" grow) == "$grows" ]] ||
    fail "$what: not $restarts restart(s) and $grows growth(s)" "$work/$name.log"
  # The last run resumed (starting again would also end with the same bits, only later). A
  # run stopped to take a host back may end before it prints anything.
  awk '/^dptrain launch: (the run failed|.* answered again)/ { r = 0 } /^resuming from/ { r = 1 } END { exit !r }' \
    "$work/$name.log" || fail "$what: the last run did not resume from a checkpoint" "$work/$name.log"
  local dir
  for dir in "${dirs[@]}"; do
    [[ $(digest "$dir") == "$reference" ]] ||
      fail "$what: the parameters in $dir differ from the uninterrupted run's" "$work/$name.log"
  done
  local left
  left=$(left_on_hosts)
  [[ -z $left ]] || fail "$what: left behind: $left" "$work/$name.log"
  local restart_at
  restart_at=$(grep '"event":"restart"' "$work/$name.launch.jsonl" | head -1 | sed 's/.*"time":\([0-9.]*\).*/\1/')
  echo "launch: $what: $restarts restart(s), $grows growth(s), resumed from $(grep -o '^resuming from [^:]*' \
    "$work/$name.log" | sed 's|^resuming from '"$work"'/||' | paste -sd, -); restart $(awk -v a="$fault_time" -v b="$restart_at" \
    'BEGIN { printf "%.1f", b - a }') s and training again $(awk -v a="$fault_time" -v b="$resumed_time" \
    'BEGIN { printf "%.1f", b - a }') s after the fault; $(digest "${dirs[0]}" | head -1), equal to the uninterrupted run" \
    "in ${#dirs[@]} checkpoint director$( ((${#dirs[@]} == 1)) && echo y || echo ies)"
}

"$dptrain" train "${common[@]}" --checkpoint-dir "$work/ref" >"$work/ref.log" 2>&1 ||
  fail "the uninterrupted run failed" "$work/ref.log"
reference=$(digest "$work/ref")

# (e) h3 dies after the checkpoint of step 8, then comes back.
launch e "$work/e-{host}"
wait_for e test -e "$work/e-h1/step-000000008.ckpt"
kill_host h3
t_fault=$(now)
wait_for e grep -q '"event":"restart"' "$work/e.launch.jsonl"
grep -q '"event":"restart".*"hosts":\["h1","h2"\]' "$work/e.launch.jsonl" || fail "(e): not restarted on h1, h2" "$work/e.log"
wait_for e grep -q "^resuming from" "$work/e.log" # training on 2 hosts, then h3 is back
t_again=$(now)
in_ns h3 ip link set eth0 up
finish e 1 1 "(e) a host killed mid-epoch, then back" "$t_fault" "$t_again" "$work"/e-h{1,2,3}
grep -q '"event":"grow".*"hosts":\["h1","h2","h3"\]' "$work/e.launch.jsonl" || fail "(e): h3 not taken back" "$work/e.log"
grep "^resuming from" "$work/e.log" | tail -1 | grep -q "step-000000315.ckpt" &&
  fail "(e): h3 was taken back only after the last step" "$work/e.log"

# (f) rank 0's host dies after step 8.
launch f "$work/f-{host}"
wait_for f test -e "$work/f-h1/step-000000008.ckpt"
kill_host h1
rm -rf "$work/f-h1" # its disk went with it
t_fault=$(now)
wait_for f grep -q "^resuming from" "$work/f.log"
t_again=$(now)
finish f 1 0 "(f) rank 0's host killed, its checkpoints lost" "$t_fault" "$t_again" "$work"/f-h{2,3}
[[ ! -e $work/f-h1 ]] || fail "(f): something wrote h1's directory after it died" "$work/f.log"
grep -q '"event":"restart".*"hosts":\["h2","h3"\]' "$work/f.launch.jsonl" || fail "(f): not restarted on h2, h3" "$work/f.log"
in_ns h1 ip link set eth0 up

# (g) h2 cut off after step 8, its processes left running; the link back after the restart.
launch g
wait_for g test -e "$work/g/step-000000008.ckpt"
in_ns h2 ip link set eth0 down
t_fault=$(now)
wait_for g grep -q "^resuming from" "$work/g.log"
t_again=$(now)
in_ns h2 ip link set eth0 up
finish g 1 1 "(g) a link cut (partition)" "$t_fault" "$t_again" "$work/g"
echo "PASS: launch across hosts: a killed host, rank 0's host and a partition end with the uninterrupted run's bits"
