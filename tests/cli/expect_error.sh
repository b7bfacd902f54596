# Sourced by the CLI bad-input scripts, after they set `dptrain`.
#   expect MESSAGE ARGS...: `dptrain ARGS...` must print exactly "dptrain: error: MESSAGE" on
#   stderr and exit with status 1; otherwise the case is counted in `failures`.
#   expect_like PATTERN ARGS...: as expect, with PATTERN a glob (a run id, another program's words).
#   report_failures PASS_TEXT: exits 1 naming the count, or prints "PASS: PASS_TEXT".
failures=0
expect() {
  local want="dptrain: error: $1"
  shift
  local got status
  got=$("$dptrain" "$@" 2>&1 >/dev/null)
  status=$?
  if [[ $status -ne 1 || $got != "$want" ]]; then
    echo "FAIL: dptrain $*"
    echo "  want (status 1): $want"
    echo "  got  (status $status): $got"
    failures=$((failures + 1))
  fi
}
expect_like() {
  local want="dptrain: error: $1"
  shift
  local got status
  got=$("$dptrain" "$@" 2>&1 >/dev/null)
  status=$?
  if [[ $status -ne 1 || $got != $want ]]; then
    echo "FAIL: dptrain $*"
    echo "  want (status 1, a glob): $want"
    echo "  got  (status $status): $got"
    failures=$((failures + 1))
  fi
}
report_failures() {
  if ((failures > 0)); then
    echo "FAIL: $failures case(s)"
    exit 1
  fi
  echo "PASS: $1"
}
