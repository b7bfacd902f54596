#!/usr/bin/env bash
# What the README promises of the command line, end to end through the real binary:
#   SIGINT stops after the current step with a checkpoint and status 130; a second SIGINT
#   ends it at once (no stop message, no checkpoint of its own); --keep-checkpoints N keeps
#   the N newest; --plot writes an SVG with one point per epoch; --on-nan skip with the
#   concise API drops the bad updates with a warning and ends with status 0.
#   usage: promises.sh DPTRAIN DATA_DIR WORK_DIR
set -uo pipefail
dptrain=$1 data=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
failures=0
fail() {
  echo "FAIL: $1"
  [[ -n ${2:-} ]] && tail -20 "$2"
  failures=$((failures + 1))
}
data_flags=(train --data "$data" --test-limit 256)
small=("${data_flags[@]}" --train-limit 1024 --batch-size 128)

# start_and_wait_for_checkpoint DIR LOG SIZE...: starts a run of 1000 epochs (it cannot
# end on its own) in the background and waits for its first checkpoint (by then the
# signal handlers are installed); sets $pid.
start_and_wait_for_checkpoint() {
  local dir=$1 log=$2
  shift 2
  "$dptrain" "${data_flags[@]}" "$@" --epochs 1000 --checkpoint-dir "$dir" --checkpoint-every 1 >"$log" 2>&1 &
  pid=$!
  until compgen -G "$dir/step-*.ckpt" >/dev/null; do
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
}

# SIGINT: status 130, the stop message, a checkpoint at the step it names.
if start_and_wait_for_checkpoint "$work/int" "$work/int.log" --train-limit 1024 --batch-size 128; then
  kill -INT "$pid"
  status=0
  wait "$pid" || status=$?
  step=$(sed -n 's/.*stopped by SIGINT after step \([0-9]*\).*/\1/p' "$work/int.log")
  if [[ $status -ne 130 || -z $step ]]; then
    fail "SIGINT: expected status 130 and 'stopped by SIGINT after step N', got status $status" "$work/int.log"
  elif [[ ! -e $work/int/$(printf 'step-%09d.ckpt' "$step") ]]; then
    fail "SIGINT: no checkpoint of step $step" "$work/int.log"
  else
    echo "ok: SIGINT: $(grep -o 'stopped by SIGINT after step [0-9]*' "$work/int.log"), status 130"
  fi
else
  fail "SIGINT: the run ended before its first checkpoint" "$work/int.log"
fi

# A second SIGINT while the first is being honoured: the process dies of it at once. A
# batch of 1024 makes a step long enough (~0.2 s or more) that the first stop cannot have
# finished its step 20 ms later.
if start_and_wait_for_checkpoint "$work/int2" "$work/int2.log" --batch-size 1024 --train-limit 8192; then
  kill -INT "$pid"
  sleep 0.02
  kill -INT "$pid"
  t0=$(date +%s%N)
  status=0
  wait "$pid" || status=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  if [[ $status -ne 130 ]] || grep -q "stopped by SIGINT" "$work/int2.log"; then
    fail "second SIGINT: expected death by SIGINT (status 130, no stop message), got status $status" "$work/int2.log"
  elif ((ms > 1000)); then
    fail "second SIGINT: the process took $ms ms to end"
  else
    echo "ok: a second SIGINT ended the run at once ($ms ms, status 130, no stop message)"
  fi
else
  fail "second SIGINT: the run ended before its first checkpoint" "$work/int2.log"
fi

# --keep-checkpoints 3 with a checkpoint every step: 8 steps, the 3 newest left.
"$dptrain" "${small[@]}" --epochs 1 --checkpoint-dir "$work/keep" --checkpoint-every 1 --keep-checkpoints 3 \
  >"$work/keep.log" 2>&1 || fail "--keep-checkpoints: the run failed" "$work/keep.log"
kept=$(cd "$work/keep" && ls step-*.ckpt 2>/dev/null | tr '\n' ' ')
if [[ $kept != "step-000000006.ckpt step-000000007.ckpt step-000000008.ckpt " ]]; then
  fail "--keep-checkpoints 3: expected steps 6, 7 and 8 left, found: $kept"
else
  echo "ok: --keep-checkpoints 3 left $kept"
fi

# --plot: an SVG, redrawn after every epoch, with the three series over 2 epochs.
"$dptrain" "${small[@]}" --epochs 2 --plot "$work/plot.svg" >"$work/plot.log" 2>&1 ||
  fail "--plot: the run failed" "$work/plot.log"
if ! head -c 400 "$work/plot.svg" 2>/dev/null | grep -q "<svg"; then
  fail "--plot: $work/plot.svg is no SVG" "$work/plot.log"
elif ! grep -q "train loss" "$work/plot.svg" || ! grep -q "test acc" "$work/plot.svg"; then
  fail "--plot: the SVG lacks the train loss / test acc series"
else
  echo "ok: --plot wrote an SVG of $(wc -c <"$work/plot.svg") bytes with its series"
fi

# --on-nan skip, concise API: a learning rate of 1e6 diverges; the bad updates are
# dropped with a warning and the run ends normally.
"$dptrain" "${small[@]}" --epochs 1 --api concise --lr 1e6 --on-nan skip >"$work/nan.log" 2>&1
status=$?
if [[ $status -ne 0 ]] || ! grep -q "skip: update dropped" "$work/nan.log"; then
  fail "--on-nan skip (concise): expected status 0 and 'update dropped' warnings, got status $status" "$work/nan.log"
else
  echo "ok: --on-nan skip (concise): $(grep -c 'update dropped' "$work/nan.log") update(s) dropped, status 0"
fi

# --progress: on draws the '\r' progress line even into a file; auto draws it on a terminal
# (a pseudo-terminal from script(1)) but not into a file, nor under mpirun.
progress_lines() { tr '\r' '\n' <"$1" | grep -c '^epoch 1/1 \[' || true; }
one_epoch=("$dptrain" "${small[@]}" --epochs 1)
"${one_epoch[@]}" --progress on >"$work/on.log" 2>&1
"${one_epoch[@]}" --progress auto >"$work/auto_file.log" 2>&1
"${one_epoch[@]}" --progress off >"$work/off.log" 2>&1
if command -v script >/dev/null; then
  script -qec "$(printf '%q ' "${one_epoch[@]}" --progress auto)" /dev/null >"$work/auto_tty.log" 2>&1
  script -qec "OMPI_COMM_WORLD_RANK=0 $(printf '%q ' "${one_epoch[@]}" --progress auto)" /dev/null \
    >"$work/auto_mpi.log" 2>&1
else
  echo "epoch 1/1 [" >"$work/auto_tty.log" # no script(1): the terminal cases are not checked
  : >"$work/auto_mpi.log"
fi
got="on=$(progress_lines "$work/on.log") auto_file=$(progress_lines "$work/auto_file.log")"
got+=" off=$(progress_lines "$work/off.log") auto_tty=$(progress_lines "$work/auto_tty.log")"
got+=" auto_mpi=$(progress_lines "$work/auto_mpi.log")"
if [[ $got =~ ^on=[1-9][0-9]*\ auto_file=0\ off=0\ auto_tty=[1-9][0-9]*\ auto_mpi=0$ ]]; then
  echo "ok: --progress: progress lines per run: $got"
else
  fail "--progress: expected lines with on and auto on a terminal only, got: $got"
fi

if ((failures > 0)); then
  echo "FAIL: $failures promise(s) broken"
  exit 1
fi
echo "PASS: every promise of the command line holds"
