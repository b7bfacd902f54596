#!/usr/bin/env bash
# The installed package as a user meets it: `cmake --install` into a fresh prefix, then
# every project in examples/ configured and built outside the source tree against that
# prefix alone (find_package(dptrain)), and run for a few steps on the real Fashion-MNIST;
# one example also built with nothing but `pkg-config --cflags --libs dptrain`.
#   usage: examples.sh BUILD_DIR SOURCE_DIR FASHION_MNIST_DIR WORK_DIR
set -uo pipefail
build=${1:?usage: examples.sh BUILD_DIR SOURCE_DIR FASHION_MNIST_DIR WORK_DIR}
source_dir=${2:?}
fashion=${3:?}
work=${4:?}
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; echo "FAIL: cmake --install"; exit 1; }
for f in include/dpt/dpt.h include/dpt/version.h lib/libdptrain.so lib/libdptrain_onnx.so bin/dptrain \
  lib/cmake/dptrain/dptrainConfig.cmake lib/cmake/dptrain/dptrainTargets.cmake lib/pkgconfig/dptrain.pc; do
  [[ -e $prefix/$f ]] || fail "the install lacks $f"
done
# No header of the backends' internals (oneDNN, CUDA types) is installed.
if find "$prefix/include" -path '*ops/cpu*' -o -path '*ops/cuda*' -o -path '*dpt/cuda*' | grep -q .; then
  fail "backend headers were installed"
fi

# build NAME: configures and builds examples/NAME against the prefix, in the work folder.
build_example() {
  cmake -S "$source_dir/examples/$1" -B "$work/$1" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
    >"$work/$1.configure.log" 2>&1 && cmake --build "$work/$1" -j 2 >"$work/$1.build.log" 2>&1 ||
    { cat "$work/$1".*.log; fail "examples/$1 does not build against the installed package"; return 1; }
}

/usr/bin/python3 "$source_dir/tests/data/write_formats.py" "$fashion" "$work/data" --train 600 --test 200 --formats png \
  >/dev/null || fail "write_formats.py"
if build_example custom_cnn; then
  "$work/custom_cnn/custom_cnn" "$work/data/png" 1 >"$work/custom_cnn.log" 2>&1 || fail "custom_cnn: $(tail -3 "$work/custom_cnn.log")"
  cat "$work/custom_cnn.log"
  grep -q "^epoch 1: loss .*, test acc 0\.[0-9]*" "$work/custom_cnn.log" || fail "custom_cnn printed no epoch"
fi
if build_example from_scratch; then
  "$work/from_scratch/from_scratch" "$fashion" 2 60 >"$work/from_scratch.log" 2>&1 || fail "from_scratch: $(tail -3 "$work/from_scratch.log")"
  cat "$work/from_scratch.log"
  grep -q "^60 steps on 2 devices: mean training loss" "$work/from_scratch.log" || fail "from_scratch did not take 60 steps"
fi
if build_example mpi; then
  mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader --mca btl_vader_single_copy_mechanism none \
    "$work/mpi/mpi_lenet" "$fashion" 1 2000 >"$work/mpi.log" 2>&1 || fail "mpi_lenet: $(tail -3 "$work/mpi.log")"
  sort "$work/mpi.log"
  digests=$(sed -n 's/^rank [01]: parameter digest //p' "$work/mpi.log" | sort -u)
  [[ $(grep -c "^rank [01]: parameter digest" "$work/mpi.log") == 2 && $(echo "$digests" | wc -l) == 1 ]] ||
    fail "mpi_lenet: the two ranks did not report one and the same digest"
fi
# pkg-config alone: the flags the .pc file gives build and link a program.
flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs dptrain) || fail "pkg-config dptrain"
g++ -O1 "$source_dir/examples/from_scratch/main.cc" $flags -Wl,-rpath,"$prefix/lib" -o "$work/from_scratch_pc" \
  >"$work/pc.log" 2>&1 || { cat "$work/pc.log"; fail "from_scratch does not build with pkg-config's flags"; }
"$work/from_scratch_pc" "$fashion" 1 3 | grep -q "^3 steps on 1 devices" || fail "from_scratch built with pkg-config did not run"

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS: the installed package builds and runs every example"
