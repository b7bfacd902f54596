#!/usr/bin/env bash
# --deterministic across a resume: two epochs on one device, against one epoch on 3 devices
# resumed for the second epoch on 2 devices, must end with the same checkpoint digests; and
# resuming a deterministic checkpoint without the mode is refused.
#   usage: resume_on_other_device_count.sh DPTRAIN DATA_DIR WORK_DIR -- FLAGS... (not --epochs: the script sets it)
set -euo pipefail
dptrain=$1 data=$2 work=$3
shift 3
[[ ${1:-} == -- ]] && shift
common=(--deterministic --data "$data" "$@")
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL: $1"
  cat "$work"/*.log
  exit 1
}
digests() { "$dptrain" checkpoint-info "$(ls "$1"/step-*.ckpt | tail -1)" | grep digest; }

"$dptrain" train --devices cpu:1 --epochs 2 "${common[@]}" --checkpoint-dir "$work/straight" >"$work/straight.log" 2>&1 ||
  fail "the uninterrupted run failed"
"$dptrain" train --devices cpu:3 --cores 3 --epochs 1 "${common[@]}" --checkpoint-dir "$work/resumed" \
  >"$work/first.log" 2>&1 || fail "the first half failed"
"$dptrain" train --devices cpu:2 --cores 2 --epochs 2 --resume "${common[@]}" --checkpoint-dir "$work/resumed" \
  >"$work/second.log" 2>&1 || fail "the resumed half failed"
diff <(digests "$work/straight") <(digests "$work/resumed") || fail "the resumed run ended with other bits"

# The default mode groups its sums otherwise: resuming a deterministic run without it is refused.
set +e
"$dptrain" train --devices cpu:2 --epochs 3 --resume --data "$data" "$@" --checkpoint-dir "$work/resumed" \
  >"$work/refused.log" 2>&1
status=$?
set -e
[[ $status -eq 1 ]] || fail "resuming without --deterministic exited with $status, not 1"
grep -q "it was written with --deterministic with --chunk-size 32, this run has no --deterministic" "$work/refused.log" ||
  fail "resuming without --deterministic did not say why"
echo "PASS: cpu:3 then cpu:2 across a resume ends with the bits of cpu:1 ($(digests "$work/straight" | tr '\n' ';'))"
