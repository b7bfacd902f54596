#!/usr/bin/env bash
# --deterministic end to end: the same training run on several device counts, and (when
# $DPT_MPIRUN is set) as several MPI processes, must end with checkpoints whose every
# digest (parameters, buffers, momentum) is the same, bit for bit.
#   usage: same_bits_any_device_count.sh DPTRAIN DATA_DIR WORK_DIR "DEVICES..." "RANKS..." -- FLAGS...
#   DEVICES: device counts of one process (e.g. "1 2 3 4"); RANKS: MPI process counts ("2 4"
#   or "-" for none), PxD for P processes of D devices each ("2x2": the two-level sums). The
#   first run is the reference every other one is compared with.
set -euo pipefail
dptrain=$1 data=$2 work=$3 devices=$4 ranks=$5
shift 5
[[ ${1:-} == -- ]] && shift
common=(--deterministic --data "$data" "$@")
rm -rf "$work"
mkdir -p "$work"

digests() {  # checkpoint dir -> its newest checkpoint's digest lines
  local ckpt
  ckpt=$(ls "$1"/step-*.ckpt | tail -1)
  "$dptrain" checkpoint-info "$ckpt" | grep digest
}
run() {  # name, then the command
  local name=$1
  shift
  if ! "$@" --checkpoint-dir "$work/$name" >"$work/$name.log" 2>&1; then
    echo "FAIL: the $name run failed"
    cat "$work/$name.log"
    exit 1
  fi
  digests "$work/$name" >"$work/$name.digests"
}

reference=""
for n in $devices; do
  run "cpu$n" "$dptrain" train --devices "cpu:$n" --cores "$n" "${common[@]}"
  [[ -z $reference ]] && reference="cpu$n"
done
if [[ $ranks != - ]]; then
  read -r -a mpirun <<<"${DPT_MPIRUN:?set DPT_MPIRUN to mpirun and its options}"
  for n in $ranks; do
    processes=${n%x*} per_process=1
    [[ $n == *x* ]] && per_process=${n#*x}
    run "np$n" "${mpirun[@]}" -np "$processes" "$dptrain" train --dist mpi --devices "cpu:$per_process" \
      --cores "$per_process" "${common[@]}"
  done
else
  ranks=""
fi
names=()
for n in $devices; do names+=("cpu$n"); done
for n in $ranks; do names+=("np$n"); done
for name in "${names[@]}"; do
  if ! diff "$work/$reference.digests" "$work/$name.digests" >"$work/$name.diff"; then
    echo "FAIL: $name ended with other bits than $reference:"
    cat "$work/$name.diff"
    exit 1
  fi
done
echo "PASS: ${names[*]} end with the same bits ($(wc -l <"$work/$reference.digests") digests," \
  "$(head -1 "$work/$reference.digests" | tr -s ' '))"
