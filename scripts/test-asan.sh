#!/usr/bin/env bash
# Every test under AddressSanitizer + UndefinedBehaviorSanitizer: out-of-bounds reads and
# writes, use after free, leaks, signed overflow, misaligned or null accesses all fail
# the run (halt_on_error), with a stack trace.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build-asan
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDPT_SANITIZE=address
cmake --build "$build_dir" -j "$(nproc)"
# detect_leaks: LeakSanitizer runs at exit. oneDNN's JIT and OpenMP runtime are not
# instrumented, and their per-thread caches live until exit by design: scripts/lsan.supp.
(cd "$build_dir" &&
  ASAN_OPTIONS="halt_on_error=1 detect_leaks=1 abort_on_error=1" \
  LSAN_OPTIONS="suppressions=$PWD/../scripts/lsan.supp print_suppressions=0" \
  UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1" \
  ctest --output-on-failure -j "$(nproc)")
