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
common=(train --devices cpu:2 --data "$data" --train-limit 3072 --test-limit 512 --batch-size 128 --epochs 2
  --checkpoint-every 4)
final=step-000000048.ckpt

"$dptrain" "${common[@]}" --checkpoint-dir "$work/whole" >"$work/whole.log" 2>&1

"$dptrain" "${common[@]}" --checkpoint-dir "$work/parts" >"$work/first.log" 2>&1 &
pid=$!
# Once the first checkpoint exists the signal handlers are installed and training is
# under way: stop it there.
for _ in $(seq 1 1200); do
  compgen -G "$work/parts/step-*.ckpt" >/dev/null && break
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
if [[ -e "$work/parts/$final" ]]; then
  echo "FAIL: the first run trained to the end; the signal came too late to test resuming"
  exit 1
fi

"$dptrain" "${common[@]}" --checkpoint-dir "$work/parts" --resume >"$work/second.log" 2>&1
grep "resuming from" "$work/second.log"

"$dptrain" checkpoint-info "$work/whole/$final" | grep digest >"$work/whole.digests"
"$dptrain" checkpoint-info "$work/parts/$final" | grep digest >"$work/parts.digests"
if ! diff "$work/whole.digests" "$work/parts.digests"; then
  echo "FAIL: the resumed run's parameters differ from the uninterrupted run's"
  exit 1
fi
echo "$stopped"
echo "PASS: resumed run equals the uninterrupted run bit for bit ($(head -1 "$work/parts.digests"))"
