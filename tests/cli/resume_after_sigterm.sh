#!/usr/bin/env bash
# Kill-and-resume, end to end: a training run stopped by SIGTERM mid-epoch and resumed
# with --resume must end with the same parameters, buffers (BatchNorm's running
# statistics) and momentum, bit for bit, as a run that was never interrupted (same
# devices), compared through the final checkpoints' digests (dptrain checkpoint-info).
# The --metrics file the two parts wrote must hold every epoch once, in order, with the
# uninterrupted run's figures (the timings aside): the resumed run appends to it.
#   usage: resume_after_sigterm.sh DPTRAIN DATA_DIR WORK_DIR EPOCHS STOP_STEP RANKS -- FLAGS...
#   EPOCHS: the length of the run to compare with; STOP_STEP: the signal is sent once the
#   checkpoint of this step exists (pick one in epoch 2 or later, so that the first part
#   has written a metrics line of its own, and a multiple of --checkpoint-every);
#   RANKS: "-" for one process, or N to run every part as `$DPT_MPIRUN -np N DPTRAIN train
#   --dist mpi`, SIGTERM then going to rank 1 alone: the ranks agree on the stop, and rank 0
#   writes the checkpoint. (Not to mpirun: Open MPI 4.1's mpirun passes SIGTERM on only after
#   odls_base_sigkill_timeout, 1 s, SIGKILLs the ranks 1 s later and exits 1 whatever they
#   did.) DPTRAIN is then dptrain_with_faults (no fault set), whose ranks each write their
#   process id and exit status to $DPT_TEST_STATUS_DIR: rank 1 is signalled by that id, and
#   every rank, and mpirun, must exit with 143.
#   FLAGS: the training flags of every part (not --epochs, --checkpoint-dir, --metrics).
set -euo pipefail
dptrain=$1 data=$2 work=$3 epochs=$4 stop_step=$5 ranks=$6
shift 6
[[ ${1:-} == -- ]] && shift
rm -rf "$work"
mkdir -p "$work"
launch=("$dptrain" train)
if [[ $ranks != - ]]; then
  read -r -a mpirun <<<"${DPT_MPIRUN:?set DPT_MPIRUN to mpirun and its options}"
  export DPT_TEST_STATUS_DIR=$work/statuses
  mkdir -p "$DPT_TEST_STATUS_DIR"
  launch=("${mpirun[@]}" -x DPT_TEST_STATUS_DIR -np "$ranks" "$dptrain" train --dist mpi)
fi
common=("${launch[@]}" --data "$data" "$@")
fail() {
  echo "FAIL: $1"
  [[ -n ${2:-} ]] && cat "$2"
  exit 1
}
newest() { ls "$1"/step-*.ckpt | tail -1; }
# The metrics without the timings, which differ from run to run, and the wire bytes (an
# epoch cut by the stop counts only those of its resumed part).
figures() { sed -E 's/"(seconds|examples_per_sec|eval_seconds|bytes_within_process|bytes_between_processes)":[^,]*,//g' "$1"; }

"${common[@]}" --epochs "$epochs" --checkpoint-dir "$work/whole" --metrics "$work/whole.jsonl" >"$work/whole.log" 2>&1 ||
  fail "the uninterrupted run failed" "$work/whole.log"
final=$(basename "$(newest "$work/whole")")
final_step=$((10#$(sed 's/step-\([0-9]*\).ckpt/\1/' <<<"$final")))

# The run to interrupt asks for 1000 epochs (--epochs is not among the settings a resume
# must match), so it cannot end on its own however slow this machine is or however late
# the signal comes: no timed window. It is signalled once the checkpoint of STOP_STEP
# exists (the signal handlers are installed by then), waiting for that file with no
# deadline but ctest's; the resumed run then asks for the uninterrupted run's epochs.
"${common[@]}" --epochs 1000 --checkpoint-dir "$work/parts" --metrics "$work/parts.jsonl" >"$work/first.log" 2>&1 &
pid=$!
# The newest checkpoint's step: with --keep-checkpoints the one of stop_step may already be
# gone again when a fast run is looked at, so "stop_step or later" is what is waited for.
newest_step() {
  local f
  f=$(ls "$work/parts"/step-*.ckpt 2>/dev/null | tail -1)
  [[ -n $f ]] && echo $((10#$(basename "$f" | sed 's/step-\([0-9]*\).ckpt/\1/'))) || echo -1
}
until (($(newest_step) >= stop_step)); do
  kill -0 "$pid" 2>/dev/null || fail "the run to interrupt ended before writing the checkpoint of step $stop_step" \
    "$work/first.log"
  sleep 0.05
done
target=$pid
if [[ $ranks != - ]]; then  # rank 1, by the process id it wrote once MPI started
  # (Not found by scanning mpirun's children for OMPI_COMM_WORLD_RANK=1 in their
  # environment: under AddressSanitizer that scan once found no rank 1.)
  target=$(cat "$DPT_TEST_STATUS_DIR/rank1.pid" 2>/dev/null) || fail "rank 1 wrote no process id" "$work/first.log"
  kill -0 "$target" 2>/dev/null || fail "rank 1 (process $target) is not running" "$work/first.log"
fi
kill -TERM "$target"
status=0
wait "$pid" || status=$?
[[ $status -eq 143 ]] || fail "expected exit status 143 (128 + SIGTERM), got $status" "$work/first.log"
if [[ $ranks != - ]]; then
  for ((r = 0; r < ranks; ++r)); do
    [[ $(cat "$DPT_TEST_STATUS_DIR/rank$r.status" 2>/dev/null) == 143 ]] ||
      fail "rank $r exited with '$(cat "$DPT_TEST_STATUS_DIR/rank$r.status" 2>/dev/null)', not 143" "$work/first.log"
  done
fi
# Exactly one stop message (rank 0 speaks for the job), naming the checkpoint it wrote.
[[ $(grep -c "dptrain: stopped by" "$work/first.log") -eq 1 ]] || fail "not exactly one stop message" "$work/first.log"
stopped=$(grep "dptrain: stopped by SIGTERM after step" "$work/first.log") || fail "no stop by SIGTERM" "$work/first.log"
stopped_at=$(sed -n 's/.*stopped by SIGTERM after step \([0-9]*\).*/\1/p' <<<"$stopped")
written=$(printf 'step-%09d.ckpt' "$stopped_at")
grep -q "checkpoint written to $work/parts/$written, rerun with --resume to continue" <<<"$stopped" &&
  [[ -e $work/parts/$written ]] || fail "no checkpoint of the step the run stopped after ($stopped_at)" "$work/first.log"
# Only a machine that took a whole epoch to notice a file could get past these.
((stopped_at >= stop_step && stopped_at < final_step)) ||
  fail "the first run stopped after step $stopped_at, not between steps $stop_step and $final_step"

"${common[@]}" --epochs "$epochs" --checkpoint-dir "$work/parts" --metrics "$work/parts.jsonl" --resume \
  >"$work/second.log" 2>&1 || fail "the resumed run failed" "$work/second.log"
grep "resuming from" "$work/second.log"

"$dptrain" checkpoint-info "$work/whole/$final" | grep digest >"$work/whole.digests"
"$dptrain" checkpoint-info "$work/parts/$final" | grep digest >"$work/parts.digests" ||
  fail "the resumed run wrote no $final"
diff "$work/whole.digests" "$work/parts.digests" || fail "the resumed run's state differs from the uninterrupted run's"
diff <(figures "$work/whole.jsonl") <(figures "$work/parts.jsonl") ||
  fail "the metrics of the two parts differ from the uninterrupted run's (- uninterrupted, + parts)"
echo "$stopped"
echo "PASS: resumed run equals the uninterrupted run bit for bit, and its metrics file holds epochs" \
  "$(grep -o '"epoch":[0-9]*' "$work/parts.jsonl" | cut -d: -f2 | tr '\n' ' ')once each;" \
  "$(tr '\n' ';' <"$work/parts.digests")"
rm -rf "$work"
