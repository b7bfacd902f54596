#!/usr/bin/env bash
# Configures and builds dptrain in Release into build/ (or $DPT_BUILD_DIR): everything, or
# only the targets named in $DPT_BUILD_TARGETS (e.g. "dptrain", all the main job needs).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DPT_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@"
targets=()
for t in ${DPT_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
