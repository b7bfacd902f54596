#!/usr/bin/env bash
# Loader throughput: decode plus augment from a JPEG image folder, dptrain's seeded loader
# (streaming, 2 threads) against torchvision's ImageFolder + DataLoader(num_workers=2),
# the same files and transforms, at 32x32 and 224x224, in one invocation; prints both
# sides' images/s and the ratio dptrain / torchvision (>1: dptrain is faster).
#   usage: bench/loader_throughput.sh [BUILD_DIR] [IMAGES]
# Needs python3-torchvision (DPT_WITH_BENCH_PEER=1 scripts/install-deps.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build=${1:-build}
images=${2:-4000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for size in 32 224; do
  # Real Fashion-MNIST images, coloured by class and enlarged to SIZE, as JPEG.
  /usr/bin/python3 "$here/../tests/data/write_formats.py" /usr/share/datasets/fashion-mnist "$work/$size" \
    --train "$images" --test 10 --formats jpeg --jpeg-size "$size" >/dev/null
  ours=$("$build/bench/loader_throughput" "$work/$size/jpeg" --size "$size" --threads 2)
  peer=$(/usr/bin/python3 "$here/torchvision_loader.py" "$work/$size/jpeg" "$size" 2)
  echo "$ours"
  echo "$peer"
  a=$(echo "$ours" | sed -n 's/^dptrain: \([0-9]*\) images.*/\1/p')
  b=$(echo "$peer" | sed -n 's/^torchvision: \([0-9]*\) images.*/\1/p')
  echo "ratio at ${size}x${size} (dptrain / torchvision): $(echo "scale=2; $a / $b" | bc)"
done
