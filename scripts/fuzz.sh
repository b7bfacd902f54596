#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, with ASan + UBSan) and fuzzes each for SECONDS
# (default 60), one after the other, starting from the seeds in fuzz/corpus/<target>/
# (fuzz/make_seeds.py writes them). New inputs go to a working corpus in build-fuzz/, not
# into the repository; a crash leaves its input in build-fuzz/artifacts/ and fails the
# script.
#   scripts/fuzz.sh [SECONDS]
#   scripts/fuzz.sh replay     builds the targets and runs each once on every seed in
#                              fuzz/corpus/ (what CI does: seconds, not minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build_dir=build-fuzz
# Every target is fuzz/<target>_fuzzer.cc.
targets=(idx checkpoint checkpoint_json npy npz picture cifar hostfile)
# The longest input a target is fuzzed with: 4 KiB, but CIFAR's records are 3073 bytes
# and its seeds hold two (plus the byte that picks the batch file).
max_len() { [[ $1 == cifar ]] && echo 8192 || echo 4096; }
# Its dictionary of the format's words and limit-sized numbers, where fuzz/ has one.
dict_args() {
  local dict=fuzz/$1.dict
  [[ $1 == npz ]] && dict=fuzz/npy.dict
  if [[ -f $dict ]]; then echo "-dict=$dict"; fi
}
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; install clang and libclang-rt-dev (apt-get install -y clang libclang-rt-dev)" >&2
  exit 1
fi
cmake -S . -B "$build_dir" -DDPT_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
mkdir -p "$build_dir/artifacts"
if [[ $seconds == replay ]]; then
  for target in "${targets[@]}"; do
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
for target in "${targets[@]}"; do
  corpus="$build_dir/corpus/$target"
  mkdir -p "$corpus"
  cp -n fuzz/corpus/"$target"/* "$corpus"/
  echo "fuzz: ${target}_fuzzer for ${seconds} s"
  # shellcheck disable=SC2046  # dict_args: no argument, or one without spaces
  "$build_dir/fuzz/${target}_fuzzer" "$corpus" $(dict_args "$target") -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build_dir/artifacts/${target}-" -max_len="$(max_len "$target")" 2>"$build_dir/${target}.log" ||
    { tail -40 "$build_dir/${target}.log"; echo "fuzz: ${target}_fuzzer FOUND A CRASH (input in $build_dir/artifacts/)"; exit 1; }
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build_dir/${target}.log" | grep -o '[0-9]*$')
  echo "fuzz: ${target}_fuzzer: ${runs} executions in ${seconds} s, no crash; corpus now $(ls "$corpus" | wc -l) inputs"
done
