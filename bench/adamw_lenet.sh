#!/usr/bin/env bash
# AdamW against PyTorch's torch.optim.AdamW: the concise LeNet for EPOCHS epochs on the
# real Fashion-MNIST with the same hyper-parameters (lr, weight decay, batch 256, the
# lesson's initialization), once per seed on each side, in one invocation. Prints each
# run's final test accuracy, each side's mean, and the difference dptrain - PyTorch.
#   usage: bench/adamw_lenet.sh [BUILD_DIR] [EPOCHS] [LR] [WEIGHT_DECAY] [SEEDS]
# Needs python3-torch (DPT_WITH_BENCH_PEER=1 scripts/install-deps.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build=${1:-build}
epochs=${2:-5}
lr=${3:-0.001}
decay=${4:-0.01}
seeds=${5:-"0 1"}
data=${DPT_DATA_DIR:-/usr/share/datasets/fashion-mnist}
echo "concise LeNet, AdamW lr $lr, weight decay $decay, batch 256, $epochs epochs, seeds $seeds, on $(nproc) cores"
ours=() peers=()
for seed in $seeds; do
  a=$("$build/apps/dptrain" train --api concise --optimizer adamw --lr "$lr" --weight-decay "$decay" --epochs "$epochs" \
    --seed "$seed" --devices cpu:2 --data "$data" --progress off | sed -n 's/^loss .*test acc \([0-9.]*\)$/\1/p')
  b=$(/usr/bin/python3 "$here/pytorch_adamw_lenet.py" "$data" "$epochs" "$lr" "$decay" "$seed" | sed -n 's/^test acc: //p')
  echo "seed $seed: dptrain test acc $a, PyTorch test acc $b"
  ours+=("$a") peers+=("$b")
done
mean() { printf '%s\n' "$@" | awk '{s += $1} END {printf "%.4f", s / NR}'; }
a=$(mean "${ours[@]}") b=$(mean "${peers[@]}")
echo "mean test acc: dptrain $a, PyTorch $b, difference (dptrain - PyTorch) $(echo "$a - $b" | bc -l | sed 's/^\./0./;s/^-\./-0./')"
