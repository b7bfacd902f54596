# Sourced by the test scripts that train and compare runs.
#   fail MESSAGE [LOG...]: prints "FAIL: MESSAGE" and the end of each LOG, then exits 1.
fail() {
  echo "FAIL: $1"
  shift
  local f
  for f in "$@"; do
    echo "--- $f"
    tail -40 "$f"
  done
  exit 1
}
