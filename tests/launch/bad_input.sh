#!/usr/bin/env bash
# `dptrain launch` refuses what cannot run, before it starts a job: each case one line on
# stderr ("dptrain: error: ...") and status 1.
#   usage: bad_input.sh DPTRAIN
set -uo pipefail
dptrain=${1:?usage: bad_input.sh DPTRAIN}
source "$(dirname "$0")/../cli/expect_error.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# What mpirun needs in containers and CI (as tests/mpi/CMakeLists.txt's DPT_MPIRUN_ARGS).
mpirun_args="--allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
echo "localhost slots=2" >"$work/hosts"

expect "cannot read hostfile $work/none: No such file or directory" \
  launch --hostfile "$work/none" -- --checkpoint-dir "$work/ckpt"
expect "launch needs --checkpoint-dir among the train flags: a restart resumes from its newest checkpoint" \
  launch --hostfile "$work/hosts" -- --epochs 1
expect "launch runs the job with --dist mpi, got --dist none" \
  launch --hostfile "$work/hosts" -- --dist none --checkpoint-dir "$work/ckpt"
printf 'localhost slots=0\n' >"$work/zero"
expect "hostfile $work/zero line 1: expected \"HOST\" or \"HOST slots=N\" (N >= 1), got \"localhost slots=0\"" \
  launch --hostfile "$work/zero" -- --checkpoint-dir "$work/ckpt"
printf '# hosts\n\n' >"$work/empty"
expect "hostfile $work/empty names no host" launch --hostfile "$work/empty" -- --checkpoint-dir "$work/ckpt"
# A host that cannot be reached (a name that resolves nowhere: .invalid, RFC 2606) leaves one
# of two: fewer than --min-hosts 2.
printf 'localhost slots=1\nnohost.invalid slots=1\n' >"$work/unreachable"
expect "only 1 of 2 hosts in $work/unreachable answer at the start (nohost.invalid: no answer to mpirun within 5 s); --min-hosts is 2" \
  launch --hostfile "$work/unreachable" --min-hosts 2 --probe-timeout 5 --mpirun-args "$mpirun_args" -- \
  --checkpoint-dir "$work/ckpt"
[[ ! -e $work/ckpt ]] || { echo "FAIL: a refused launch wrote $work/ckpt"; failures=$((failures + 1)); }
report_failures "every bad input to launch is refused with its one line and status 1"
