#!/usr/bin/env bash
# Installs the Debian packages dptrain builds, tests and benchmarks with. Run as root.
# Safe to run again: it calls apt-get only when a package is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libdnnl-dev zlib1g-dev libcli11-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev
  dataset-fashion-mnist
  # oneDNN's CMake package config looks for OpenCL (its GPU runtime); libdnnl-dev only
  # recommends it, so --no-install-recommends would leave find_package(dnnl) failing.
  ocl-icd-opencl-dev
  # One process per device over MPI (`mpirun ... dptrain train --dist mpi`) and its tests.
  libopenmpi-dev openmpi-bin
  # Pictures: image folders and `dptrain predict` decode with stb_image (and resize with
  # stb_image_resize), JPEG with libjpeg-turbo; NumPy .npz archives open with libzip.
  libstb-dev libturbojpeg0-dev libzip-dev
  # `dptrain export --onnx` builds the model with the ONNX library's protobuf classes; its
  # test runs the file in OpenCV's dnn module.
  libonnx-dev libprotobuf-dev python3-opencv python3-numpy
  # The --trace test renders the timeline SVG to PNG with rsvg-convert.
  librsvg2-bin
  # scripts/fuzz.sh builds the libFuzzer targets with clang; scripts/test-tsan.sh runs the
  # OpenMP teams on LLVM's runtime with its Archer tool (libomp-14-dev ships both).
  clang libclang-rt-14-dev libomp-14-dev
  # Compiled objects are reused across builds and checkouts (CMakeLists.txt, scripts/test.sh).
  ccache
)
# The benchmarks' peers (PyTorch on CPU, torchvision's ImageFolder and DataLoader) with
# OpenBLAS behind them: Debian's default libblas.so.3 is the reference BLAS, which would
# make the peer ~2x slower than it is.
if [[ "${DPT_WITH_BENCH_PEER:-0}" == 1 ]]; then
  packages+=(python3-torch python3-torchvision python3-numpy libopenblas0-openmp)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}; run this script as root (or install them with apt-get)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
