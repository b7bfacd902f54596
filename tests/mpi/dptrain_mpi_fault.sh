#!/usr/bin/env bash
# Fault handling end to end: one rank of `mpirun -np N dptrain_with_faults train --dist mpi`
# (the real CLI with a test-only FaultInjectingCommunicator, tests/mpi/dptrain_with_faults.cc,
# driven by DPT_TEST_MPI_FAULT) fails in the middle of training, and every rank must stop,
# with a message saying what happened, within a bounded time, never hang.
#   MODE exit: rank 1 exits without MPI_Finalize (a crash): mpirun ends the job.
#   MODE hang: rank 1 stops responding: its peers' collectives time out
#              (--collective-timeout 3) and MPI_Abort ends the job.
#   MODE throw: rank 1 raises an error: it prints it with its rank and MPI_Abort ends the job.
#   MODE signals: rank 1 gets SIGINT and rank 2 SIGTERM in the same allreduce (3 ranks): every
#              rank must stop after the same step by the one agreed signal, SIGTERM, and
#              exit with 128 + 15 (each rank writes its status to a file), rank 0 saying so.
#   usage: dptrain_mpi_fault.sh DPTRAIN_WITH_FAULTS DATA_DIR RANKS MODE; $DPT_MPIRUN starts the ranks.
set -uo pipefail
dptrain=$1 data=$2 ranks=$3 mode=$4
limit=60 # seconds: the job must be over well before this
# Only a hang needs the collective timeout; otherwise it is long enough never to be what
# stopped the job, even on a loaded machine.
timeout=30
[[ $mode == hang ]] && timeout=3
fault="1:5:$mode"
[[ $mode == signals ]] && fault="1:5:sigint,2:5:sigterm"
read -r -a mpirun <<<"${DPT_MPIRUN:?set DPT_MPIRUN to mpirun and its options}"
log=$(mktemp)
statuses=$(mktemp -d)
start=$(date +%s%N)
DPT_TEST_MPI_FAULT="$fault" DPT_TEST_STATUS_DIR="$statuses" timeout --kill-after=5 "$limit" "${mpirun[@]}" \
  -x DPT_TEST_MPI_FAULT -x DPT_TEST_STATUS_DIR -np "$ranks" \
  "$dptrain" train --dist mpi --cores 1 --data "$data" --train-limit 2048 --test-limit 256 --batch-size 64 \
  --epochs 1 --collective-timeout "$timeout" >"$log" 2>&1
status=$?
end=$(date +%s.%N)
seconds=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
fail() {
  echo "FAIL: $1 (exit status $status after $seconds s)"
  cat "$log"
  for f in "$statuses"/*; do [[ -e $f ]] && echo "$(basename "$f"): $(cat "$f")"; done
  rm -rf "$log" "$statuses"
  exit 1
}
# timeout's 124 (or 137 once it had to kill): judged by the time taken, as a rank's own exit
# status 137 (128 + SIGKILL) comes back through mpirun too.
awk -v s="$seconds" -v l="$limit" 'BEGIN { exit !(s >= l) }' && fail "the job hung: still running after $limit s"
if [[ $mode == signals ]]; then
  grep -q "rank 1: DPT_TEST_MPI_FAULT: raising SIGINT in allreduce 5" "$log" &&
    grep -q "rank 2: DPT_TEST_MPI_FAULT: raising SIGTERM in allreduce 5" "$log" || fail "the signals were not raised"
  for ((r = 0; r < ranks; ++r)); do
    [[ -f $statuses/rank$r.status ]] || fail "rank $r wrote no exit status (it did not return from dptrain)"
    [[ $(cat "$statuses/rank$r.status") == 143 ]] ||
      fail "rank $r exited with $(cat "$statuses/rank$r.status"), not 143 (128 + SIGTERM)"
  done
  # Rank 0 alone speaks for the job, naming the agreed signal.
  [[ $(grep -c "dptrain: stopped by" "$log") -eq 1 ]] || fail "not exactly one 'stopped by' message"
  grep -Eq "dptrain: stopped by SIGTERM after step [0-9]+ \(epoch 1, batch [0-9]+\); no --checkpoint-dir was given" \
    "$log" || fail "rank 0 did not report the stop by SIGTERM"
  grep "dptrain: stopped by" "$log"
  echo "PASS: $ranks ranks, SIGINT on rank 1 and SIGTERM on rank 2 in one step: every rank stopped by SIGTERM" \
    "with status 143 (the whole job took $seconds s)"
  rm -rf "$log" "$statuses"
  exit 0
fi
[[ $status -eq 0 ]] && fail "the job succeeded although rank 1 failed"
grep -q "rank 1: DPT_TEST_MPI_FAULT" "$log" || fail "the fault was not injected"
if [[ $mode == throw ]]; then
  grep -Eq "dptrain: error: rank 1 of $ranks \(.*\): injected error \(DPT_TEST_MPI_FAULT\) in allreduce 5" "$log" ||
    fail "no error message from rank 1"
  # Rank 1's MPI_Abort ended rank 0 at once: it never got to its own collective timeout.
  # (mpirun's "MPI_ABORT was invoked" banner is not checked: it is sometimes lost as the
  # job is torn down.)
  grep -q "timed out" "$log" && fail "rank 0 was left waiting until its timeout"
elif [[ $mode == exit ]]; then
  # mpirun's report names the rank that went away.
  grep -q "mpirun detected that one or more processes exited with non-zero status" "$log" &&
    grep -Eq "Process name: \[\[[0-9]+,[0-9]+\],1\]" "$log" || fail "no message from mpirun naming the failed rank"
else
  grep -Eq "dptrain: error: rank [0-9]+ of $ranks \(.*\): MPI allreduce .* timed out after 3 s waiting for rank" "$log" ||
    fail "no timeout message from a waiting rank"
fi
grep -E "DPT_TEST_MPI_FAULT|timed out|Process name|dptrain: error" "$log" | head -3
fault_time=$(grep -o "DPT_TEST_MPI_FAULT: .* at unix time [0-9.]*" "$log" | grep -o "[0-9.]*$")
after_fault=$(awk -v a="$fault_time" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
awk -v t="$after_fault" 'BEGIN { exit !(t < 30) }' || fail "the others took $after_fault s to stop after the fault"
echo "PASS: $ranks ranks, rank 1 ${mode}s mid-training: every rank stopped $after_fault s after the fault" \
  "(the whole job took $seconds s) with exit status $status"
rm -rf "$log" "$statuses"
