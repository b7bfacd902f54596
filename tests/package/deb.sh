#!/usr/bin/env bash
# The .deb as a user installs it: `cpack -G DEB` in the build tree, then its control data
# (name, version, and Depends naming the Debian packages of the libraries it links) and
# contents (the CLI, both libraries, the headers, the CMake and pkg-config files), then
# the package unpacked into an empty root (dpkg-deb -x: `dpkg -i` would install into this
# machine) and its `dptrain` run from there: --version, and one short training.
#   usage: deb.sh BUILD_DIR FASHION_MNIST_DIR WORK_DIR
set -uo pipefail
build=${1:?usage: deb.sh BUILD_DIR FASHION_MNIST_DIR WORK_DIR}
fashion=${2:?}
work=${3:?}
rm -rf "$work" && mkdir -p "$work"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
(cd "$build" && cpack -G DEB -B "$work/out") >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; echo "FAIL: cpack"; exit 1; }
deb=$(ls "$work"/out/dptrain_*.deb 2>/dev/null | head -1)
[[ -n $deb ]] || { echo "FAIL: cpack wrote no dptrain_*.deb"; exit 1; }
dpkg-deb -I "$deb" >"$work/info.txt"
dpkg-deb -c "$deb" >"$work/contents.txt"
cat "$work/info.txt"
grep -q "^ Package: dptrain$" "$work/info.txt" || fail "the package is not named dptrain"
version=$("$build/apps/dptrain" --version | sed 's/^dptrain //')
grep -q "^ Version: $version$" "$work/info.txt" || fail "the package's version is not $version"
for dep in libdnnl libturbojpeg libzip libopenmpi libprotobuf libc6 libstdc++6; do
  grep "^ Depends:" "$work/info.txt" | grep -q "$dep" || fail "Depends names no $dep"
done
for f in ./usr/bin/dptrain ./usr/include/dpt/dpt.h ./usr/lib/.*libdptrain.so ./usr/lib/.*libdptrain_onnx.so \
  ./usr/lib/.*cmake/dptrain/dptrainConfig.cmake ./usr/lib/.*pkgconfig/dptrain.pc; do
  grep -q " $f" "$work/contents.txt" || fail "the package holds no $f"
done
root=$work/root
dpkg-deb -x "$deb" "$root"
"$root/usr/bin/dptrain" --version | grep -qx "dptrain $version" || fail "the packaged dptrain --version"
"$root/usr/bin/dptrain" train --data "$fashion" --epochs 1 --train-limit 1024 --test-limit 512 --progress off \
  >"$work/train.log" 2>&1 || fail "the packaged dptrain train: $(tail -2 "$work/train.log")"
tail -2 "$work/train.log"
grep -q "^test acc: " "$work/train.log" || fail "the packaged dptrain did not train"
if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS: the .deb declares its dependencies, holds the package, and its dptrain trains"
