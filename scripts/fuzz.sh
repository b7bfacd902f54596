#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, with ASan + UBSan) and fuzzes each for SECONDS
# (default 60), starting from the seeds in fuzz/corpus/. New inputs go to a working
# corpus in build-fuzz/, not into the repository; a crash leaves its input in
# build-fuzz/artifacts/ and fails the script.
#   scripts/fuzz.sh [SECONDS]
#   scripts/fuzz.sh replay     builds the targets and runs each once on every seed in
#                              fuzz/corpus/ (what CI does: seconds, not minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build_dir=build-fuzz
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; install clang and libclang-rt-dev (apt-get install -y clang libclang-rt-dev)" >&2
  exit 1
fi
cmake -S . -B "$build_dir" -DDPT_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
mkdir -p "$build_dir/artifacts"
if [[ $seconds == replay ]]; then
  for target in idx checkpoint; do
    seeds=(fuzz/corpus/"$target"/*)
    "$build_dir/fuzz/${target}_fuzzer" -runs=1 "${seeds[@]}" >"$build_dir/${target}-replay.log" 2>&1 ||
      { tail -40 "$build_dir/${target}-replay.log"; echo "fuzz: ${target}_fuzzer FAILED on a seed"; exit 1; }
    ran=$(grep -c '^Running: ' "$build_dir/${target}-replay.log" || true)
    if ((ran != ${#seeds[@]})); then
      tail -20 "$build_dir/${target}-replay.log"
      echo "fuzz: ${target}_fuzzer ran ${ran} of ${#seeds[@]} seeds"
      exit 1
    fi
    echo "fuzz: ${target}_fuzzer replayed its ${ran} seeds, no crash"
  done
  exit 0
fi
for target in idx checkpoint; do
  corpus="$build_dir/corpus/$target"
  mkdir -p "$corpus"
  cp -n fuzz/corpus/"$target"/* "$corpus"/
  echo "fuzz: ${target}_fuzzer for ${seconds} s"
  "$build_dir/fuzz/${target}_fuzzer" "$corpus" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build_dir/artifacts/${target}-" -max_len=4096 2>"$build_dir/${target}.log" ||
    { tail -40 "$build_dir/${target}.log"; echo "fuzz: ${target}_fuzzer FOUND A CRASH (input in $build_dir/artifacts/)"; exit 1; }
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build_dir/${target}.log" | grep -o '[0-9]*$')
  echo "fuzz: ${target}_fuzzer: ${runs} executions in ${seconds} s, no crash; corpus now $(ls "$corpus" | wc -l) inputs"
done
