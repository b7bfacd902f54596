#!/usr/bin/env bash
# Every test under AddressSanitizer + UndefinedBehaviorSanitizer (but the multi-host harness
# and the heaviest trainings, which run in the Release leg, see below): out-of-bounds reads and
# writes, use after free, leaks, signed overflow, misaligned or null accesses all fail
# the run (halt_on_error), with a stack trace.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build-asan
# Without the CUDA backend: the sanitizers do not see into the CUDA runtime, and the GPU
# tests skip on a machine without a GPU anyway.
# No benchmarks or shared libraries: nothing here runs them (the package tests run in Release).
# -O1, the optimisation level AddressSanitizer's documentation recommends: the instrumented
# code compiles about twice as fast as at -O2 and the tests run nearly as fast.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG" -DDPT_SANITIZE=address -DDPT_CUDA=OFF -DDPT_BUILD_BENCH=OFF \
  -DDPT_INSTALL=OFF
cmake --build "$build_dir" -j "$(nproc)"
cd "$build_dir"
export UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1"
# LeakSanitizer runs at each test's exit: nothing may be left allocated. (The mpi tests
# turn it off for their ranks, tests/mpi/CMakeLists.txt: Open MPI leaves allocations of
# plugins it has unloaded, whose stacks cannot be told from ours.)
#
# Left out here (they run in the Release leg): the longest end-to-end trainings, whose code
# the smaller tests under the sanitizers also run: ResNet-18 trained for many steps (its
# layers are checked by the gradient checks, FoldBatchNorm and the one-step ResNet tests) and
# the two-epoch accuracy bars on the whole of Fashion-MNIST (the loop and the LeNet kernels
# by the short training and resume tests). Under AddressSanitizer each takes minutes, and
# together they would push CI past its 45-minute budget on 2 cores.
heavy='^(RealData\.(TwoEpochsOfLeNetLearnFashionMnist|TwoEpochsWithANoOpAllreduceFallBelowTheBar|ResNet18LearnsOnASubset)'
heavy+='|deterministic\.concise_resnet18_batchnorm|deterministic\.resume_on_other_device_count_resnet18'
heavy+='|mpi\.dptrain\.deterministic_resnet18_np2_np4_equal_cpu1|cli\.resume_after_sigterm_resnet18_batchnorm'
# data.formats trains a dozen models on every format (47 s here); the data layer's own
# tests (data_test, data_transforms_test) run under the sanitizers. cli.hostile_input runs
# some 35 short trainings (40 s in Release); the readers it attacks are fuzzed under
# ASan + UBSan (scripts/fuzz.sh) and their unit tests run here.
heavy+='|data\.formats|cli\.hostile_input)$'
ASAN_OPTIONS="halt_on_error=1 abort_on_error=1 detect_leaks=1" ctest --output-on-failure -j "$(nproc)" -LE multihost \
  -E "$heavy"
