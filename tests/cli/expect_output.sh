#!/usr/bin/env bash
# Runs a command and checks both its exit status and its output (stdout and stderr
# together) against an extended regular expression; CTest's PASS_REGULAR_EXPRESSION alone
# ignores the exit status, so a dptrain that printed the right error and exited 0 (or
# crashed after printing it) would pass.
#   usage: expect_output.sh STATUS REGEX COMMAND ARGS...
set -uo pipefail
want_status=${1:?usage: expect_output.sh STATUS REGEX COMMAND ARGS...}
regex=${2:?usage: expect_output.sh STATUS REGEX COMMAND ARGS...}
shift 2
output=$("$@" 2>&1)
status=$?
if [[ $status -ne $want_status ]]; then
  echo "FAIL: exit status $status, expected $want_status: $*"
  printf '%s\n' "$output"
  exit 1
fi
# Newlines become spaces so that one regex can span the lines of --help.
if ! grep -Eq -- "$regex" <<<"${output//$'\n'/ }"; then
  echo "FAIL: the output does not match /$regex/: $*"
  printf '%s\n' "$output"
  exit 1
fi
printf '%s\n' "$output" | tail -3
echo "PASS: status $status and the expected output"
