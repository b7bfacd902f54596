#!/usr/bin/env bash
# The main job, from a fresh machine: install what is missing, build the dptrain CLI in
# Release (only it: no tests, benchmarks or shared libraries), and train the lesson's LeNet
# on the real Fashion-MNIST with the defaults (10 epochs, batch 256, lr 0.2). Extra
# arguments go to `dptrain train`, e.g. --devices cpu:2.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
DPT_BUILD_TARGETS=dptrain scripts/build.sh
exec build/apps/dptrain train --model lenet "$@"
