#!/usr/bin/env bash
# Every test (but the multi-host harness, which runs in Release) under AddressSanitizer + UndefinedBehaviorSanitizer: out-of-bounds reads and
# writes, use after free, leaks, signed overflow, misaligned or null accesses all fail
# the run (halt_on_error), with a stack trace.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build-asan
# Without the CUDA backend: the sanitizers do not see into the CUDA runtime, and the GPU
# tests skip on a machine without a GPU anyway.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDPT_SANITIZE=address -DDPT_CUDA=OFF
cmake --build "$build_dir" -j "$(nproc)"
cd "$build_dir"
export UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1"
# LeakSanitizer runs at each test's exit: nothing may be left allocated. (The mpi tests
# turn it off for their ranks, tests/mpi/CMakeLists.txt: Open MPI leaves allocations of
# plugins it has unloaded, whose stacks cannot be told from ours.)
ASAN_OPTIONS="halt_on_error=1 abort_on_error=1 detect_leaks=1" ctest --output-on-failure -j "$(nproc)" -LE multihost
