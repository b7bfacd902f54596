# Sourced by the CLI bad-input scripts, after they set `dptrain`.
#   expect MESSAGE ARGS...: `dptrain ARGS...` must print exactly "dptrain: error: MESSAGE" on
#   stderr and exit with status 1; otherwise the case is counted in `failures`.
#   expect_like PATTERN ARGS...: as expect, with PATTERN a glob (a run id, another program's words).
#   report_failures PASS_TEXT: exits 1 naming the count, or prints "PASS: PASS_TEXT".
failures=0
# expect_matching exact|glob MESSAGE ARGS...: what expect and expect_like share.
expect_matching() {
  local how=$1 want="dptrain: error: $2"
  shift 2
  local got status matched=0
  got=$("$dptrain" "$@" 2>&1 >/dev/null)
  status=$?
  if [[ $how == glob ]]; then [[ $got == $want ]] && matched=1; else [[ $got == "$want" ]] && matched=1; fi
  if [[ $status -ne 1 || $matched -ne 1 ]]; then
    echo "FAIL: dptrain $*"
    echo "  want (status 1$([[ $how == glob ]] && echo ", a glob")): $want"
    echo "  got  (status $status): $got"
    failures=$((failures + 1))
  fi
}
expect() { expect_matching exact "$@"; }
expect_like() { expect_matching glob "$@"; }
report_failures() {
  if ((failures > 0)); then
    echo "FAIL: $failures case(s)"
    exit 1
  fi
  echo "PASS: $1"
}
