#!/usr/bin/env bash
# --trace end to end: on 2 devices with gradient buckets, on 2 devices in deterministic
# mode and on 1 device (under a launcher: 2 processes with buckets, and 2 processes of 2
# devices with --zero 1), the Chrome trace and its timeline hold what check_trace.py
# checks (spans nest per lane, every device traced, bucket allreduces overlapping
# backward, both levels of a two-level allreduce, ZeRO-1's parameter gathers), and the
# timeline renders to PNG with rsvg-convert.
#   usage: trace.sh DPTRAIN DATA_DIR WORK_DIR [LAUNCHER...]   (LAUNCHER: mpirun -np 2 ...)
set -euo pipefail
dptrain=${1:?usage: trace.sh DPTRAIN DATA_DIR WORK_DIR [LAUNCHER...]}
data=${2:?}
work=${3:?}
shift 3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
# 2048 images in batches of 256: 8 steps.
common=(--data "$data" --train-limit 2048 --test-limit 256 --epochs 1 --progress off)

traced() {  # NAME CHECK_ARGS -- TRAIN_ARGS...
  local name=$1 check=$2
  shift 3
  "$@" --trace "$work/$name.json" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
  grep -q "^trace: $work/$name.json .*timeline: $work/$name.timeline.svg, steps 3 to 5: " "$work/$name.log" ||
    { echo "FAIL: $name: no trace summary line"; cat "$work/$name.log"; exit 1; }
  # shellcheck disable=SC2086
  python3 "$here/check_trace.py" "$work/$name.json" $check
  rsvg-convert "$work/$name.timeline.svg" -o "$work/$name.timeline.png"
  [[ -s $work/$name.timeline.png ]] || { echo "FAIL: $name: rsvg-convert drew nothing"; exit 1; }
}

if [[ $# -gt 0 ]]; then  # under a launcher: 2 processes, one device each
  traced mpi_buckets "--processes 2 --devices 1 --steps 8 --buckets" -- \
    "$@" "$dptrain" train --dist mpi --devices cpu:1 --bucket-mb 0.05 "${common[@]}"
  traced mpi_two_levels_zero "--processes 2 --devices 2 --steps 8 --zero" -- \
    "$@" "$dptrain" train --dist mpi --devices cpu:2 --api concise --zero 1 "${common[@]}"
  echo "PASS: --trace under MPI: both ranks traced, buckets overlap backward on each; with 2 devices per" \
    "process both levels of every allreduce and ZeRO-1's parameter gathers are traced"
  exit 0
fi
traced buckets "--processes 1 --devices 2 --steps 8 --buckets" -- \
  "$dptrain" train --devices cpu:2 --bucket-mb 0.05 "${common[@]}"
traced deterministic "--processes 1 --devices 2 --steps 8 --chunks 8" -- \
  "$dptrain" train --devices cpu:2 --deterministic "${common[@]}"
traced one_device "--processes 1 --devices 1 --steps 8" -- "$dptrain" train --devices cpu:1 "${common[@]}"
echo "PASS: --trace on 2 devices with buckets, in deterministic mode and on 1 device"
