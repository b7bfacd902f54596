#!/usr/bin/env bash
# A LeNet epoch read from a PNG image folder against the same epoch read from the IDX
# files, in one invocation: the whole of Fashion-MNIST (60,000 + 10,000 pictures) written
# as a PNG folder, then `dptrain train` for EPOCHS epochs (batch 256, defaults otherwise)
# on the IDX files, on the folder with the decoded pictures cached (--data-cache, the
# default 2048 MiB holds them all) and on the folder streamed (--data-cache 0: every
# picture decoded for every batch). Prints each run's seconds per epoch (the first epoch,
# which fills the cache, apart from the mean of the later ones) and the ratios
# folder / IDX (1.00: as fast; above: slower).
#   usage: bench/folder_epoch.sh [BUILD_DIR] [EPOCHS] [DEVICES]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build=${1:-build}
epochs=${2:-3}
devices=${3:-cpu:2}
fashion=${DPT_DATA_DIR:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "writing Fashion-MNIST as a PNG folder ..."
/usr/bin/python3 "$here/../tests/data/write_formats.py" "$fashion" "$work" --train 60000 --test 10000 --formats png >/dev/null
echo "LeNet, $epochs epochs, --devices $devices, on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"

# run NAME ARGS...: trains, then prints "NAME first LATER": epoch 1's seconds and the
# mean of the later epochs'.
run() {
  local name=$1
  shift
  "$build/apps/dptrain" train --epochs "$epochs" --devices "$devices" --progress off --metrics "$work/$name.jsonl" "$@" \
    >"$work/$name.log"
  /usr/bin/python3 - "$work/$name.jsonl" "$name" <<'PY'
import json, sys
e = [json.loads(l) for l in open(sys.argv[1])]
later = [x["seconds"] for x in e[1:]] or [e[0]["seconds"]]
print("%s %.3f %.3f %.4f" % (sys.argv[2], e[0]["seconds"], sum(later) / len(later), e[-1]["test_acc"]))
PY
}
results=$({
  run idx --data "$fashion"
  run cached --data "$work/png"
  run streamed --data "$work/png" --data-cache 0
})
echo "$results" | awk '{printf "%-9s epoch 1: %6.3f s   later epochs: %6.3f s/epoch   test acc %s\n", $1, $2, $3, $4}'
echo "$results" | awk '$1 == "idx" {f = $2; l = $3} $1 != "idx" {printf "ratio %s / idx: epoch 1 %.3f, later epochs %.3f\n", $1, $2 / f, $3 / l}'
