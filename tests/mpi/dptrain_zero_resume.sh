#!/usr/bin/env bash
# --zero 1 end to end with --deterministic: the optimizer state sharded over 2 processes for
# the first epoch, the run resumed from that checkpoint (which holds the whole, gathered
# state) on 3 processes, and a run on 2 processes of 2 devices each, all end with the digests
# (parameters, buffers, momentum) of the unsharded run on one device; the last line of a
# sharded run reports the state it kept.
#   usage: dptrain_zero_resume.sh DPTRAIN DATA_DIR WORK_DIR -- FLAGS...   ($DPT_MPIRUN starts the ranks)
set -euo pipefail
dptrain=$1 data=$2 work=$3
shift 3
[[ ${1:-} == -- ]] && shift
common=(--data "$data" --api concise --momentum 0.9 --deterministic "$@")
read -r -a mpirun <<<"${DPT_MPIRUN:?set DPT_MPIRUN to mpirun and its options}"
rm -rf "$work"
mkdir -p "$work"
digests() { "$dptrain" checkpoint-info "$(ls "$1"/step-*.ckpt | tail -1)" | grep digest; }
run() {  # log name, then the command
  local name=$1
  shift
  "$@" >"$work/$name.log" 2>&1 || {
    echo "FAIL: the $name run failed"
    cat "$work/$name.log"
    exit 1
  }
}
run plain "$dptrain" train --devices cpu:1 --cores 1 "${common[@]}" --epochs 2 --checkpoint-dir "$work/plain"
run first "${mpirun[@]}" -np 2 "$dptrain" train --dist mpi --devices cpu:1 --cores 1 "${common[@]}" --zero 1 \
  --epochs 1 --checkpoint-dir "$work/sharded"
run resumed "${mpirun[@]}" -np 3 "$dptrain" train --dist mpi --devices cpu:1 --cores 1 "${common[@]}" --zero 1 \
  --epochs 2 --checkpoint-dir "$work/sharded" --resume
run two_levels "${mpirun[@]}" -np 2 "$dptrain" train --dist mpi --devices cpu:2 --cores 2 "${common[@]}" --zero 1 \
  --epochs 2 --checkpoint-dir "$work/two_levels"
grep -q "^resuming from .*step-" "$work/resumed.log" || {
  echo "FAIL: the 3-process run did not resume"
  cat "$work/resumed.log"
  exit 1
}
digests "$work/plain" >"$work/plain.digests"
for name in sharded two_levels; do
  digests "$work/$name" >"$work/$name.digests"
  if ! diff "$work/plain.digests" "$work/$name.digests"; then
    echo "FAIL: the $name run (--zero 1) ended with other bits than the unsharded one"
    exit 1
  fi
done
state=$(grep "^zero 1:" "$work/resumed.log") || {
  echo "FAIL: the sharded run does not report its optimizer state"
  cat "$work/resumed.log"
  exit 1
}
echo "PASS: --zero 1 on 2 processes, resumed on 3, and on 2x2 end with the unsharded bits ($(head -1 "$work/plain.digests" | tr -s ' ')); $state"
