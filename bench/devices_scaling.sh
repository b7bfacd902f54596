#!/usr/bin/env bash
# LeNet training epoch, in one invocation: one CPU device on one core (the lesson's one
# device), one CPU device using every core (intra-op threads), and N CPU devices (one
# replica per core, data parallel). Prints each and the speedups against the first two.
# usage: bench/devices_scaling.sh [--build DIR] [--epochs N] [--devices N] [--data DIR]
set -euo pipefail
build=build epochs=1 devices=2 data=()
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --devices) devices=$2; shift 2 ;;
    --data) data=(--data "$2"); shift 2 ;;
    *) echo "devices_scaling.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
bin=$build/apps/dptrain
[[ -x $bin ]] || { echo "devices_scaling.sh: $bin not found; build first (scripts/build.sh)" >&2; exit 1; }

sec_per_epoch() {  # runs dptrain with the given flags, echoes its output to stderr, prints sec/epoch
  local out
  out=$("$bin" train --model lenet --epochs "$epochs" "$@" "${data[@]}")
  echo "$out" >&2
  sed -n 's/^test acc: [0-9.]*, \([0-9.]*\) sec\/epoch on .*/\1/p' <<<"$out" | tail -n 1
}

echo "LeNet, Fashion-MNIST, batch 256, lr 0.2, $epochs epoch(s), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
one_core=$(sec_per_epoch --devices cpu:1 --cores 1)
all_cores=$(sec_per_epoch --devices cpu:1)
many=$(sec_per_epoch --devices "cpu:$devices")
printf '%-44s %8s s/epoch\n' "cpu:1 --cores 1 (one device, one core)" "$one_core" \
  "cpu:1 (one device, $(nproc) intra-op threads)" "$all_cores" \
  "cpu:$devices (data parallel, one replica per device)" "$many"
awk -v a="$one_core" -v b="$many" -v n="$devices" \
  'BEGIN { printf "speedup one device on one core -> cpu:%d: %.2fx\n", n, a / b }'
awk -v a="$all_cores" -v b="$many" -v n="$devices" \
  'BEGIN { printf "speedup one device on all cores -> cpu:%d: %.2fx\n", n, a / b }'
