#!/usr/bin/env bash
# The multi-device tests under ThreadSanitizer: device workers, communicators, replicas.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build-tsan
# Without the CUDA backend: the sanitizers do not see into the CUDA runtime, and the GPU
# tests skip on a machine without a GPU anyway.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDPT_SANITIZE=thread -DDPT_CUDA=OFF
cmake --build "$build_dir" -j "$(nproc)" --target parallel_tests
# oneDNN's OpenMP runtime is not instrumented: each device runs one thread here, so no
# OpenMP team is ever started and every report is about dptrain's own threads.
(cd "$build_dir" && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/../scripts/tsan.supp" OMP_NUM_THREADS=1 \
  ctest --output-on-failure -L parallel)
