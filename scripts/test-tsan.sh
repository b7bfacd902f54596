#!/usr/bin/env bash
# The multi-device tests under ThreadSanitizer: device workers, communicators, replicas,
# and the OpenMP teams inside each device's kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build-tsan
# Without the CUDA backend: the sanitizers do not see into the CUDA runtime, and the GPU
# tests skip on a machine without a GPU anyway.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDPT_SANITIZE=thread -DDPT_CUDA=OFF -DDPT_BUILD_BENCH=OFF \
  -DDPT_INSTALL=OFF
cmake --build "$build_dir" -j "$(nproc)" --target parallel_tests

# GCC's OpenMP runtime (libgomp) is not instrumented, so ThreadSanitizer cannot see its
# barriers and reports every OpenMP team as racing with itself. LLVM's runtime implements
# libgomp's entry points and ships Archer, an OpenMP tool that tells ThreadSanitizer where
# the barriers, tasks and locks order the threads: the tests run on it, loaded in place of
# libgomp.so.1, so the kernels' teams (two threads per device in
# EquivalenceTest.TwoOpenMpThreadsPerDeviceStepAsOneThreadDoes) are checked for races too.
llvm_lib=/usr/lib/llvm-14/lib
for f in libomp.so.5 libarcher.so; do
  [[ -f $llvm_lib/$f ]] || {
    echo "test-tsan: $llvm_lib/$f is missing (apt-get install libomp-14-dev)" >&2
    exit 1
  }
done
omp_dir=$PWD/$build_dir/llvm-openmp
mkdir -p "$omp_dir"
ln -sf "$llvm_lib/libomp.so.5" "$omp_dir/libgomp.so.1"

# oneDNN (libdnnl.so.2) and the OpenMP runtime are not built with TSan: their own memory
# accesses are ignored (ignore_noninstrumented_modules), and scripts/tsan.supp says why
# oneDNN's calls are suppressed.
(cd "$build_dir" &&
  LD_LIBRARY_PATH=$omp_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} OMP_TOOL_LIBRARIES=$llvm_lib/libarcher.so \
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1 suppressions=$PWD/../scripts/tsan.supp" \
  ctest --output-on-failure -L parallel)
