#!/usr/bin/env bash
# Installs what is missing, builds in Release and runs every test with ctest; then builds
# the multi-device tests under ThreadSanitizer and runs them (ctest label "parallel"), and
# every test under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j "$(nproc)")
scripts/test-tsan.sh
scripts/test-asan.sh
