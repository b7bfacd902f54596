#!/usr/bin/env bash
# LeNet training epoch on one CPU device (all cores, intra-op threads) vs N CPU devices
# (one replica per core, data parallel), in one invocation; prints both and the speedup.
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

sec_per_epoch() {  # runs dptrain, echoes its output to stderr, prints sec/epoch
  local out
  out=$("$bin" train --model lenet --epochs "$epochs" --devices "$1" "${data[@]}")
  echo "$out" >&2
  sed -n 's/^test acc: [0-9.]*, \([0-9.]*\) sec\/epoch on .*/\1/p' <<<"$out" | tail -n 1
}

echo "LeNet, Fashion-MNIST, batch 256, lr 0.2, $epochs epoch(s), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
one=$(sec_per_epoch cpu:1)
many=$(sec_per_epoch "cpu:$devices")
printf '%-34s %8s s/epoch\n' "cpu:1 (one device, $(nproc) threads)" "$one" "cpu:$devices (data parallel)" "$many"
awk -v a="$one" -v b="$many" -v n="$devices" 'BEGIN { printf "speedup cpu:1 -> cpu:%d: %.2fx\n", n, a / b }'
