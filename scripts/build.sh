#!/usr/bin/env bash
# Configures and builds dptrain in Release into build/ (or $DPT_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DPT_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build_dir" -j "$(nproc)"
