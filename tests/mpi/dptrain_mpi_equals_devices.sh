#!/usr/bin/env bash
# End to end: `mpirun -np N dptrain train --dist mpi` (N processes, one device each, each
# reading its shard of every batch) ends with the parameters, bit for bit, of
# `dptrain train --devices cpu:N` (one process, N devices), compared through the digests of
# the checkpoints each writes (rank 0 alone writes under MPI). Every other rank is held to
# rank 0's bits by dptrain itself: after every epoch of a multi-process job each rank's
# replica digest is gathered, and a rank that differs stops the job with "the replicas of
# rank(s) R hold different parameters" (training_loop.cc), which fails the MPI run here.
# Also checks that only rank 0 printed the epoch line.
#   usage: dptrain_mpi_equals_devices.sh DPTRAIN DATA_DIR WORK_DIR RANKS MPI_FLAGS LOCAL_FLAGS -- COMMON...
#   MPI_FLAGS / LOCAL_FLAGS: extra dptrain flags of the MPI / the one-process run ("-" for none)
#   $DPT_MPIRUN (mpirun and its options) starts the ranks.
set -euo pipefail
dptrain=$1 data=$2 work=$3 ranks=$4 mpi_flags=$5 local_flags=$6
shift 6
[[ $mpi_flags == - ]] && mpi_flags=""
[[ $local_flags == - ]] && local_flags=""
[[ ${1:-} == -- ]] && shift
common=(--data "$data" "$@")
rm -rf "$work"
mkdir -p "$work"

# One oneDNN thread per device in both runs: the same kernels, so the same bits.
read -r -a mpirun <<<"${DPT_MPIRUN:?set DPT_MPIRUN to mpirun and its options}"
# shellcheck disable=SC2086
"${mpirun[@]}" -np "$ranks" "$dptrain" train --dist mpi --devices cpu:1 --cores 1 "${common[@]}" $mpi_flags \
  --checkpoint-dir "$work/mpi" >"$work/mpi.log" 2>&1 || {
  echo "FAIL: the MPI run failed"
  cat "$work/mpi.log"
  exit 1
}
# shellcheck disable=SC2086
"$dptrain" train --devices "cpu:$ranks" --cores "$ranks" "${common[@]}" $local_flags \
  --checkpoint-dir "$work/local" >"$work/local.log" 2>&1 || {
  echo "FAIL: the one-process run failed"
  cat "$work/local.log"
  exit 1
}

epoch_lines=$(grep -c "^epoch 1/1:" "$work/mpi.log" || true)
if [[ $epoch_lines -ne 1 ]]; then
  echo "FAIL: expected rank 0 alone to print the epoch line, found it $epoch_lines times"
  cat "$work/mpi.log"
  exit 1
fi
# An --allreduce flag of the MPI run must be the algorithm its communicator runs (the banner).
if [[ $mpi_flags =~ --allreduce\ ([a-z]+) ]] && ! grep -q "allreduce mpi ${BASH_REMATCH[1]})" "$work/mpi.log"; then
  echo "FAIL: the MPI run does not say it runs allreduce mpi ${BASH_REMATCH[1]}"
  grep "^training" "$work/mpi.log"
  exit 1
fi
mpi_ckpt=$(ls "$work/mpi"/step-*.ckpt | tail -1)
local_ckpt=$(ls "$work/local"/step-*.ckpt | tail -1)
"$dptrain" checkpoint-info "$mpi_ckpt" >"$work/mpi.info"
"$dptrain" checkpoint-info "$local_ckpt" >"$work/local.info"
grep digest "$work/mpi.info" >"$work/mpi.digests"
grep digest "$work/local.info" >"$work/local.digests"
if ! diff "$work/mpi.digests" "$work/local.digests"; then
  echo "FAIL: $ranks processes and $ranks devices ended with different parameters"
  grep -h "^epoch" "$work/mpi.log" "$work/local.log"
  exit 1
fi
grep -h -E "^(training|epoch 1/1:)" "$work/mpi.log" "$work/local.log"
echo "PASS: $ranks MPI processes equal $ranks devices bit for bit after $(grep -o '[0-9]* steps taken' "$work/mpi.info")" \
  "($(head -1 "$work/mpi.digests"))"
