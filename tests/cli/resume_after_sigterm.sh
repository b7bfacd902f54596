#!/usr/bin/env bash
# Kill-and-resume, end to end: a training run stopped by SIGTERM mid-epoch and resumed
# with --resume must end with the same parameters, bit for bit, as a run that was never
# interrupted (same devices). The final checkpoints' digests (dptrain checkpoint-info)
# are compared.
#   usage: resume_after_sigterm.sh DPTRAIN DATA_DIR WORK_DIR
set -euo pipefail
dptrain=$1 data=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
# 3072 images in batches of 128: 24 steps per epoch, 48 in all, a checkpoint every 4.
common=(train --devices cpu:2 --data "$data" --train-limit 3072 --test-limit 512 --batch-size 128
  --checkpoint-every 4)
final=step-000000048.ckpt

"$dptrain" "${common[@]}" --epochs 2 --checkpoint-dir "$work/whole" >"$work/whole.log" 2>&1

# The run to interrupt asks for 1000 epochs (--epochs is not among the settings a resume
# must match), so it cannot end on its own however slow this machine is or however late
# the signal comes: no timed window. It is signalled once its first checkpoint exists (the
# signal handlers are installed by then), waiting for that file with no deadline but
# ctest's; the resumed run then asks for the uninterrupted run's 2 epochs.
"$dptrain" "${common[@]}" --epochs 1000 --checkpoint-dir "$work/parts" >"$work/first.log" 2>&1 &
pid=$!
until compgen -G "$work/parts/step-*.ckpt" >/dev/null; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: the run to interrupt ended before writing a checkpoint"
    cat "$work/first.log"
    exit 1
  fi
  sleep 0.05
done
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
if [[ $status -ne 143 ]]; then
  echo "FAIL: expected exit status 143 (128 + SIGTERM), got $status"
  cat "$work/first.log"
  exit 1
fi
stopped=$(grep "dptrain: stopped by SIGTERM after step" "$work/first.log") || {
  echo "FAIL: no stop message"
  cat "$work/first.log"
  exit 1
}
stopped_at=$(sed -n 's/.*stopped by SIGTERM after step \([0-9]*\).*/\1/p' <<<"$stopped")
if ((stopped_at >= 48)); then
  # Only a machine that took 44 steps to notice a file could get here.
  echo "FAIL: the first run was stopped after step $stopped_at, past the 48 steps of the run to compare with"
  exit 1
fi

"$dptrain" "${common[@]}" --epochs 2 --checkpoint-dir "$work/parts" --resume >"$work/second.log" 2>&1
grep "resuming from" "$work/second.log"

"$dptrain" checkpoint-info "$work/whole/$final" | grep digest >"$work/whole.digests"
"$dptrain" checkpoint-info "$work/parts/$final" | grep digest >"$work/parts.digests"
if ! diff "$work/whole.digests" "$work/parts.digests"; then
  echo "FAIL: the resumed run's parameters differ from the uninterrupted run's"
  exit 1
fi
echo "$stopped"
echo "PASS: resumed run equals the uninterrupted run bit for bit ($(head -1 "$work/parts.digests"))"
