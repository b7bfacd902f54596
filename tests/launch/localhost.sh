#!/usr/bin/env bash
# `dptrain launch` on one machine (hostfile "localhost slots=3"): faults injected into the
# ranks (dptrain_with_faults, $DPT_TEST_MPI_FAULT, each fault once over the restarts) must
# each end with the job finishing by itself, with --deterministic on the parameters of a run
# that never failed (bit for bit), without it as the run resumed by hand, and with no rank
# left behind. Prints one row of the fault table per case: restarts, the checkpoint
# resumed from, the seconds from the fault to the restart, and the digest. Also: SIGTERM to the launcher is passed on (the job
# checkpoints, the launcher exits 143), and too many faults make it give up.
#   usage: localhost.sh DPTRAIN DPTRAIN_WITH_FAULTS DATA_DIR WORK_DIR
set -euo pipefail
dptrain=$1 faulty=$2 data=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
# What mpirun needs in containers and CI (as tests/mpi/CMakeLists.txt's DPT_MPIRUN_ARGS).
mpirun_args="--allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
echo "localhost slots=3" >"$work/hosts"
# 1000 images in batches of 96: 11 steps per epoch, 22 in all; a checkpoint every 4.
common=(--data "$data" --train-limit 1000 --test-limit 300 --batch-size 96 --seed 3 --cores 1
  --checkpoint-every 4 --collective-timeout 4 --progress off)
source "$(dirname "$0")/../support/fail.sh"
digest() { "$dptrain" checkpoint-info "$(ls "$1"/step-*.ckpt | tail -1)" | grep digest; }
left_behind() { pgrep -f -- "--checkpoint-dir $1( |$)" || true; }

# launch_with FAULTS NAME [TRAIN FLAGS...]: dptrain launch of dptrain_with_faults, the
# faults firing once each, for $epochs epochs (2 unless set); its status.
launch_with() {
  local faults=$1 name=$2
  shift 2
  mkdir -p "$work/$name.once"
  local status=0
  DPT_TEST_MPI_FAULT=$faults DPT_TEST_MPI_FAULT_ONCE=$work/$name.once \
    timeout --kill-after=10 240 "$dptrain" launch --hostfile "$work/hosts" --max-restarts 3 --program "$faulty" \
    --mpirun-args "$mpirun_args -x DPT_TEST_MPI_FAULT -x DPT_TEST_MPI_FAULT_ONCE" -- \
    --devices cpu:1 "${common[@]}" --epochs "${epochs:-2}" --checkpoint-dir "$work/$name" --metrics "$work/$name.jsonl" "$@" \
    >"$work/$name.log" 2>&1 || status=$?
  return $status
}

# The run that never failed: one process, one device.
"$dptrain" train --devices cpu:1 --deterministic "${common[@]}" --epochs 2 --checkpoint-dir "$work/ref" >"$work/ref.log" 2>&1 ||
  fail "the uninterrupted run failed" "$work/ref.log"
reference=$(digest "$work/ref")

# check_case NAME RESTARTS WHAT: the launch finished with RESTARTS restarts, the reference
# digest and nothing left behind; prints its row.
check_case() {
  local name=$1 restarts=$2 what=$3
  [[ $(grep -c '"event":"restart"' "$work/$name.launch.jsonl") == "$restarts" ]] ||
    fail "$what: not $restarts restart(s)" "$work/$name.log"
  grep -q '"event":"finished"' "$work/$name.launch.jsonl" || fail "$what: no finished event" "$work/$name.log"
  # Resumed, not started again (which would also end with the same bits, only later).
  [[ $(grep -c "^resuming from $work/$name/step-" "$work/$name.log") == "$restarts" ]] ||
    fail "$what: not every restart resumed from a checkpoint" "$work/$name.log"
  [[ $(digest "$work/$name") == "$reference" ]] ||
    fail "$what: the parameters differ from the uninterrupted run's" "$work/$name.log" "$work/ref.log"
  [[ -z $(left_behind "$work/$name") ]] || fail "$what: processes left behind: $(left_behind "$work/$name")"
  local fault_at restart_at
  fault_at=$(grep -o 'DPT_TEST_MPI_FAULT: .* at unix time [0-9.]*' "$work/$name.log" | head -1 | awk '{print $NF}')
  restart_at=$(grep '"event":"restart"' "$work/$name.launch.jsonl" | head -1 | sed 's/.*"time":\([0-9.]*\).*/\1/')
  echo "launch: $what: $restarts restart(s), resumed from $(grep -o '"resume_from":"[^"]*"' "$work/$name.launch.jsonl" |
    cut -d'"' -f4 | paste -sd, -); $(awk -v a="$fault_at" -v b="$restart_at" 'BEGIN { printf "%.1f", b - a }') s from" \
    "the fault to the restart; $(digest "$work/$name" | head -1), equal to the uninterrupted run"
}

# Rank 1 crashes mid-epoch (its 30th allreduce: in step 6 or so, after the checkpoint of step 4).
launch_with "1:30:exit" crash --deterministic || fail "the launch with a crashed rank failed" "$work/crash.log"
check_case crash 1 "a rank that crashes"
# Rank 2 stops (SIGSTOP): the others time out (--collective-timeout 4) and end the run.
launch_with "2:30:stop" stopped --deterministic || fail "the launch with a stopped rank failed" "$work/stopped.log"
check_case stopped 1 "a rank stopped with SIGSTOP"
# Two faults in one job: rank 1 crashes, then in the restarted run rank 0 throws.
launch_with "1:30:exit,0:40:throw" two --deterministic || fail "the launch with two faults failed" "$work/two.log"
check_case two 2 "two faults in one job"

# Without --deterministic: the launcher's restart equals the same run resumed by hand
# (mpirun until the crash, then mpirun --resume), bit for bit. (Without it there are more
# allreduces per step, one per gradient tensor: the 100th falls after the checkpoint of step 4.)
launch_with "1:100:exit" plain || fail "the launch without --deterministic failed" "$work/plain.log"
mkdir -p "$work/hand.once"
by_hand=(mpirun $mpirun_args -np 3)
DPT_TEST_MPI_FAULT=1:100:exit DPT_TEST_MPI_FAULT_ONCE=$work/hand.once "${by_hand[@]}" \
  -x DPT_TEST_MPI_FAULT -x DPT_TEST_MPI_FAULT_ONCE "$faulty" train --dist mpi --devices cpu:1 "${common[@]}" --epochs 2 \
  --checkpoint-dir "$work/hand" >"$work/hand.log" 2>&1 && fail "the run by hand did not crash" "$work/hand.log"
"${by_hand[@]}" "$dptrain" train --dist mpi --devices cpu:1 "${common[@]}" --epochs 2 --checkpoint-dir "$work/hand" \
  --resume >"$work/hand_resume.log" 2>&1 || fail "resuming by hand failed" "$work/hand_resume.log"
[[ $(digest "$work/plain") == "$(digest "$work/hand")" ]] ||
  fail "without --deterministic the launcher's restart differs from the resume by hand" "$work/plain.log" "$work/hand_resume.log"
echo "launch: a crash without --deterministic: $(digest "$work/plain" | head -1), equal to the run resumed by hand"

# Too many faults: --max-restarts 3 is spent by four, and the launcher says so.
status=0
launch_with "1:10:exit,1:11:exit,1:12:exit,1:13:exit" spent --deterministic || status=$?
((status == 1)) || fail "four faults with --max-restarts 3 gave status $status, not 1" "$work/spent.log"
grep -q "^dptrain: error: launch gave up after 3 restarts (--max-restarts): " "$work/spent.log" ||
  fail "no line saying why the launcher gave up" "$work/spent.log"
[[ -z $(left_behind "$work/spent") ]] || fail "giving up left processes behind"
echo "launch: four faults: gave up after 3 restarts, status 1, nothing left behind"

# SIGTERM to the launcher: passed on, the job stops after a step with a checkpoint, 143.
epochs=200 launch_with "" stop --deterministic &
job=$!
until ls "$work/stop"/step-*.ckpt >/dev/null 2>&1; do
  kill -0 "$job" 2>/dev/null || fail "the launch ended before its first checkpoint" "$work/stop.log"
  sleep 0.1
done
kill -TERM "$(pgrep -f -- "launch --hostfile $work/hosts" | head -1)"
status=0
wait "$job" || status=$?
((status == 143)) || fail "the launcher stopped by SIGTERM exited $status, not 143" "$work/stop.log"
grep -q "stopped by SIGTERM after step" "$work/stop.log" || fail "the job did not stop after a step" "$work/stop.log"
[[ -z $(left_behind "$work/stop") ]] || fail "SIGTERM left processes behind"
echo "launch: SIGTERM to the launcher: the job stopped with a checkpoint, status 143, nothing left behind"
echo "PASS: launch on localhost slots=3: crash, SIGSTOP and two faults end with the uninterrupted run's bits"
