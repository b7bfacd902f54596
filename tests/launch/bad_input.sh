#!/usr/bin/env bash
# `dptrain launch` refuses what cannot run, before it starts a job: each case one line on
# stderr ("dptrain: error: ...") and status 1; a command line CLI11 refuses, its message and
# CLI11's status.
#   usage: bad_input.sh DPTRAIN
set -uo pipefail
dptrain=${1:?usage: bad_input.sh DPTRAIN}
source "$(dirname "$0")/../cli/expect_error.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# What mpirun needs in containers and CI (as tests/mpi/CMakeLists.txt's DPT_MPIRUN_ARGS).
mpirun_args="--allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
echo "localhost slots=2" >"$work/hosts"
# expect_cli STATUS MESSAGE ARGS...: as expect, for what CLI11 refuses: stderr exactly MESSAGE
# (lines) and "Run with --help for more information.", and status STATUS.
expect_cli() {
  local want_status=$1 want="$2"$'\n'"Run with --help for more information."
  shift 2
  local got status
  got=$("$dptrain" "$@" 2>&1 >/dev/null)
  status=$?
  if [[ $status -ne $want_status || $got != "$want" ]]; then
    echo "FAIL: dptrain $*"
    echo "  want (status $want_status): $want"
    echo "  got  (status $status): $got"
    failures=$((failures + 1))
  fi
}
what_to_pass='pass the path of a hostfile: one "HOST [slots=N]" per line'

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
# Not a text file: a NUL byte is refused as such; other control bytes are quoted escaped.
printf '\0\001binary data\n' >"$work/binary"
expect "hostfile $work/binary is not a text file (a NUL byte on line 1); $what_to_pass" \
  launch --hostfile "$work/binary" -- --checkpoint-dir "$work/ckpt"
printf 'localhost slots=1\nnode\001 slots=2\n' >"$work/control"
expect "hostfile $work/control line 2: expected \"HOST\" or \"HOST slots=N\" (N >= 1), got \"node\\x01 slots=2\"" \
  launch --hostfile "$work/control" -- --checkpoint-dir "$work/ckpt"
# Not a file: a folder, a device.
expect "hostfile $work is a folder; $what_to_pass" launch --hostfile "$work" -- --checkpoint-dir "$work/ckpt"
expect "hostfile /dev/null is not a regular file (a character device); $what_to_pass" \
  launch --hostfile /dev/null -- --checkpoint-dir "$work/ckpt"
# Train flags before --: CLI11 does not expect them (its status 109); the hint shows the command
# with them after --.
expect_cli 109 "The following argument was not expected: --deterministic
dptrain train's flags go after --: dptrain launch --hostfile $work/hosts -- --deterministic --checkpoint-dir $work/ckpt" \
  launch --hostfile "$work/hosts" --deterministic -- --checkpoint-dir "$work/ckpt"
expect_cli 109 "The following arguments were not expected: --epochs --checkpoint-dir
dptrain train's flags go after --: dptrain launch --min-hosts 1 --hostfile $work/hosts -- --epochs 2 --checkpoint-dir '$work/a b'" \
  launch --min-hosts 1 --epochs 2 --hostfile "$work/hosts" --checkpoint-dir "$work/a b"
# A host that cannot be reached (a name that resolves nowhere: .invalid, RFC 2606) leaves one
# of two: fewer than --min-hosts 2. Why is the remote shell's words when the name fails to
# resolve at once, or no answer within the probe's 5 s when the resolver itself waits (it
# did under load): either is right here.
printf 'localhost slots=1\nnohost.invalid slots=1\n' >"$work/unreachable"
expect_like "only 1 of 2 hosts in $work/unreachable answer at the start (nohost.invalid: ?*); --min-hosts is 2" \
  launch --hostfile "$work/unreachable" --min-hosts 2 --probe-timeout 5 --mpirun-args "$mpirun_args" -- \
  --checkpoint-dir "$work/ckpt"
# A host whose mpirun does not end in time: no answer (an mpirun that waits).
printf '#!/bin/sh\nexec sleep 60\n' >"$work/mpirun-waits"
chmod +x "$work/mpirun-waits"
expect "only 0 of 1 hosts in $work/hosts answer at the start (localhost: no answer to mpirun within 1 s); --min-hosts is 1" \
  launch --hostfile "$work/hosts" --probe-timeout 1 --mpirun "$work/mpirun-waits" -- --checkpoint-dir "$work/ckpt"
# As root without --allow-run-as-root, mpirun refuses at once: its words, and the fix. Where
# this is not root, an mpirun with Open MPI 4.1's words stands in.
root_mpirun=mpirun
if [[ $(id -u) -ne 0 ]]; then
  root_mpirun=$work/mpirun-as-root
  cat >"$root_mpirun" <<'MPIRUN'
#!/bin/sh
cat >&2 <<'TEXT'
--------------------------------------------------------------------------
mpirun has detected an attempt to run as root.

You can override this protection by adding the --allow-run-as-root option
to the cmd line or by setting two environment variables in the following way:
--------------------------------------------------------------------------
TEXT
exit 1
MPIRUN
  chmod +x "$root_mpirun"
fi
saved_env=$(declare -p OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM 2>/dev/null)
unset OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
expect "only 0 of 1 hosts in $work/hosts answer at the start (localhost: mpirun refused: mpirun has detected an attempt to run as root.); --min-hosts is 1; mpirun runs as root only with --mpirun-args \"--allow-run-as-root\" (or OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment)" \
  launch --hostfile "$work/hosts" --mpirun "$root_mpirun" -- --checkpoint-dir "$work/ckpt"
eval "$saved_env"
[[ ! -e $work/ckpt ]] || { echo "FAIL: a refused launch wrote $work/ckpt"; failures=$((failures + 1)); }
report_failures "every bad input to launch is refused with its one line and status 1"
