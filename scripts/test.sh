#!/usr/bin/env bash
# Installs what is missing, builds in Release and runs every test with ctest; then builds
# the multi-device tests under ThreadSanitizer and runs them (ctest label "parallel"),
# every test under AddressSanitizer + UndefinedBehaviorSanitizer, and replays the fuzz
# targets' seed corpora (scripts/fuzz.sh replay).
#
# CI must not pass by skipping: a missing Fashion-MNIST directory or a missing mpirun (the
# mpi tests would not even be registered) stops this script before anything is built, and
# the tests that need the data fail instead of skipping (DPT_REQUIRE_DATA=1). Set
# DPT_ALLOW_SKIPS=1 to run what can run on a machine without them. Each leg's time and
# the number of skipped tests (e.g. a CPU without AVX-512 or avx512_bf16, no GPU) are
# printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
data_dir=${DPT_DATA_DIR:-/usr/share/datasets/fashion-mnist}
if [[ ${DPT_ALLOW_SKIPS:-0} != 1 ]]; then
  missing=()
  [[ -d $data_dir ]] || missing+=("the Fashion-MNIST directory $data_dir (apt-get install dataset-fashion-mnist)")
  command -v mpirun >/dev/null || missing+=("mpirun (apt-get install openmpi-bin libopenmpi-dev)")
  if ((${#missing[@]} > 0)); then
    for m in "${missing[@]}"; do echo "test: FAIL: missing ${m}" >&2; done
    echo "test: the tests that need them would be skipped or not registered; set DPT_ALLOW_SKIPS=1 to run without them" >&2
    exit 1
  fi
  export DPT_REQUIRE_DATA=1
fi

# ccache (CMakeLists.txt) keys objects by paths relative to this checkout, so a clean clone
# in another folder reuses what an earlier build compiled; the cache holds the four builds.
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
command -v ccache >/dev/null && ccache --max-size=8G >/dev/null

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
legs=()
skipped_total=0
# leg NAME COMMAND...: runs it with its output also in a log, then records its time and
# the tests ctest reported as skipped in it.
leg() {
  local name=$1 start=$SECONDS
  shift
  "$@" 2>&1 | tee "$logs/$name.log"
  local skipped
  skipped=$(grep -c '(Skipped)' "$logs/$name.log" || true)
  skipped_total=$((skipped_total + skipped))
  legs+=("$(printf '%-10s %5d s  %3d skipped' "$name" $((SECONDS - start)) "$skipped")")
  grep '(Skipped)' "$logs/$name.log" | sed "s/^/test: $name skipped: /" >>"$logs/skips" || true
}

leg build scripts/build.sh
if [[ ${DPT_ALLOW_SKIPS:-0} != 1 ]] && ! (cd build && ctest -N -L mpi | grep -q 'Total Tests: [1-9]'); then
  echo "test: FAIL: no mpi tests registered in build/ (was mpirun found at configure time?)" >&2
  exit 1
fi
leg release bash -c 'cd build && ctest --output-on-failure -j "$(nproc)" -LE multihost'
leg multihost bash -c 'cd build && ctest --output-on-failure -L multihost'
leg tsan scripts/test-tsan.sh
leg asan scripts/test-asan.sh
leg fuzz scripts/fuzz.sh replay

echo "test: legs:"
printf '  %s\n' "${legs[@]}"
[[ -f $logs/skips ]] && cat "$logs/skips"
echo "test: ${skipped_total} test(s) skipped in all"
