#!/usr/bin/env bash
# What --deterministic costs: LeNet epochs (Fashion-MNIST, batch 256, lr 0.2) trained by
# dptrain in its default mode and with --deterministic, on the same devices, alternating
# in one invocation. Prints each mode's sec/epoch (the mean of the epochs after the
# first), its last test accuracy, and the ratio deterministic / default (>1: slower).
#   usage: bench/deterministic_cost.sh [--build DIR] [--devices cpu:2] [--epochs 3] [--rounds 2]
set -euo pipefail
build=build devices=cpu:2 epochs=3 rounds=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --devices) devices=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h | --help) sed -n 2,7p "$0"; exit 0 ;;
    *) echo "deterministic_cost.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done
dptrain="$build/apps/dptrain"
[[ -x $dptrain ]] || { echo "deterministic_cost.sh: no $dptrain; build first" >&2; exit 1; }
[[ $epochs -ge 2 ]] || { echo "deterministic_cost.sh: --epochs must be at least 2 (the first is not timed)" >&2; exit 1; }

# Mean seconds of epochs 2..N and the last test accuracy of one run.
run() {
  local log
  log=$("$dptrain" train --devices "$devices" --epochs "$epochs" "$@" 2>&1 | tr '\r' '\n' | grep -E '^epoch [0-9]+/[0-9]+:')
  awk '{ for (i = 1; i <= NF; ++i) { if ($(i + 1) == "sec,") s[NR] = $i; if ($i == "acc") a = $(i + 1) } }
       END { t = 0; for (k = 2; k <= NR; ++k) t += s[k]; gsub(",", "", a); printf "%.3f %s\n", t / (NR - 1), a }' <<<"$log"
}
echo "LeNet on Fashion-MNIST, $devices, $epochs epochs per run (the first untimed), $rounds rounds, $(nproc) cores"
default_sum=0 det_sum=0
for ((r = 1; r <= rounds; ++r)); do
  read -r d_sec d_acc < <(run)
  read -r x_sec x_acc < <(run --deterministic)
  echo "round $r: default $d_sec s/epoch (test acc $d_acc), deterministic $x_sec s/epoch (test acc $x_acc)"
  default_sum=$(awk -v a="$default_sum" -v b="$d_sec" 'BEGIN { print a + b }')
  det_sum=$(awk -v a="$det_sum" -v b="$x_sec" 'BEGIN { print a + b }')
done
awk -v d="$default_sum" -v x="$det_sum" -v n="$rounds" 'BEGIN {
  printf "mean: default %.3f s/epoch, deterministic %.3f s/epoch: deterministic / default = %.3f\n", d / n, x / n, x / d }'
