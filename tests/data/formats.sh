#!/usr/bin/env bash
# Every data format end to end, on the real Fashion-MNIST written into each of them by
# write_formats.py: the same examples in the same order give the same bits under
# --deterministic whatever the format; a 3-channel 32x32 set (CIFAR-10's binary layout)
# trains through both APIs on cpu:2 and under mpirun -np 2; evaluate, predict and export
# read the shape and classes from its checkpoint; every bad input stops with its message.
# With DPTRAIN_WITH_FAULTS (tests/mpi/dptrain_with_faults) the colour set's accuracy bar is
# also shown to fail a run under mpirun -np 2 whose gradient allreduce does nothing.
#   usage: formats.sh DPTRAIN FASHION_MNIST_DIR WORK_DIR [DPTRAIN_WITH_FAULTS]
set -uo pipefail
dptrain=${1:?usage: formats.sh DPTRAIN FASHION_MNIST_DIR WORK_DIR [DPTRAIN_WITH_FAULTS]}
fashion=${2:?}
work=${3:?}
with_faults=${4:-}
here=$(dirname "$0")
source "$here/../cli/expect_error.sh"
rm -rf "$work" && mkdir -p "$work"
/usr/bin/python3 "$here/write_formats.py" "$fashion" "$work/data" --train 2000 --test 500 --formats png,npy,npz,cifar ||
  { echo "FAIL: write_formats.py"; exit 1; }
d=$work/data

# digest NAME ARGS...: trains one deterministic epoch and prints its parameters' digest.
digest() {
  local name=$1
  shift
  rm -rf "$work/ckpt_$name"
  "$dptrain" train --deterministic --batch-size 160 --epochs 1 --progress off --checkpoint-dir "$work/ckpt_$name" "$@" \
    >"$work/$name.log" 2>&1 || { echo "FAIL: $name: dptrain train $*" >&2; cat "$work/$name.log" >&2; echo none; return; }
  "$dptrain" checkpoint-info "$work/ckpt_$name"/step-*.ckpt | sed -n 's/^params digest: //p'
}
same() {  # same WHAT DIGEST...
  local what=$1 first=$2
  shift 2
  for other in "$@"; do
    if [[ $other != "$first" || $first == none ]]; then
      echo "FAIL: $what: digests differ: $first $*"
      failures=$((failures + 1))
      return
    fi
  done
  echo "same bits: $what: $first"
}

limits=(--train-limit 2000 --test-limit 500)
same "IDX, .npy folder and .npz (file order), cpu:2" \
  "$(digest idx --data "$fashion" "${limits[@]}" --devices cpu:2)" \
  "$(digest npy --data "$d/npy" --devices cpu:2)" "$(digest npz --data "$d/keras.npz" --devices cpu:1)"
same "PNG folder, IDX and .npy in the folder's order, cpu:1 and cpu:2" \
  "$(digest png --data "$d/png" --devices cpu:2)" "$(digest png_streamed --data "$d/png" --data-cache 0 --prefetch 0)" \
  "$(digest idx_by_class --data "$d/idx_by_class" --devices cpu:2)" "$(digest npy_by_class --data "$d/npy_by_class")"

# A colour model: 3 x 32 x 32, 10 classes, through both APIs and under MPI, with augmentation.
# Each picture has a random tint of its own (write_formats.py): the shape gives the class.
colour=(--data "$d/cifar" --epochs 3 --batch-size 64 --progress off --random-crop 2 --hflip --normalize)
accuracy() { sed -n 's/.*test acc \([0-9.]*\)$/\1/p; s/^test acc: \([0-9.]*\),.*/\1/p' "$1" | tail -1; }
colour_bar=0.5  # chance: 0.1
below_bar() { [[ -z $1 ]] || (($(echo "$1 < $colour_bar" | bc) == 1)); }
bar() {  # bar WHAT LOG: the last test accuracy must clear the bar
  local acc
  acc=$(accuracy "$2")
  if ! grep -q "data: cifar-10, 3x32x32 images" "$2" || below_bar "$acc"; then
    echo "FAIL: $1: test accuracy '${acc}' under $colour_bar, or not 3x32x32 data"
    cat "$2"
    failures=$((failures + 1))
    return
  fi
  echo "colour model: $1: test acc $acc"
}
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
# Open MPI leaves its unloaded plugins' allocations behind: no leak check for the ranks
# (as tests/mpi does); the other checks of a sanitizer build stay on.
[[ -n ${ASAN_OPTIONS:-} ]] && export ASAN_OPTIONS="${ASAN_OPTIONS//detect_leaks=1/detect_leaks=0}"
# The scratch API with the lesson's N(0, 0.01^2) init: it sits at chance until the signal
# has grown through the layers, for about 4 of these epochs at lr 0.1. A run whose gradients
# are not summed across its 2 replicas takes steps of half the size, and is still there
# after 5 (measured with seeds 0 to 3: 0.64 to 0.67 correct, 0.09 to 0.18 without the sum).
scratch=(--data "$d/cifar" --epochs 5 --batch-size 32 --progress off --normalize --lr 0.1)
"$dptrain" train "${scratch[@]}" --devices cpu:2 >"$work/colour_scratch.log" 2>&1
bar "scratch API, cpu:2" "$work/colour_scratch.log"
"$dptrain" train "${colour[@]}" --devices cpu:2 --api concise --init kaiming --momentum 0.9 --lr 0.02 \
  --checkpoint-dir "$work/colour_ckpt" >"$work/colour_concise.log" 2>&1
bar "concise API, cpu:2" "$work/colour_concise.log"
if command -v mpirun >/dev/null; then
  "${mpirun[@]}" "$dptrain" train "${scratch[@]}" --dist mpi --devices cpu:1 --cores 1 >"$work/colour_scratch_mpi.log" 2>&1
  bar "scratch API, mpirun -np 2" "$work/colour_scratch_mpi.log"
  "${mpirun[@]}" "$dptrain" train "${colour[@]}" --dist mpi --devices cpu:1 --api concise --init kaiming --momentum 0.9 \
    --lr 0.02 >"$work/colour_mpi.log" 2>&1
  bar "concise API, mpirun -np 2" "$work/colour_mpi.log"
  if [[ -n $with_faults ]]; then  # the bar must tell a broken allreduce from a working one
    DPT_TEST_GRADIENT_ALLREDUCE=noop "${mpirun[@]}" -x DPT_TEST_GRADIENT_ALLREDUCE "$with_faults" train "${scratch[@]}" \
      --dist mpi --devices cpu:1 --cores 1 >"$work/colour_noop.log" 2>&1
    acc=$(accuracy "$work/colour_noop.log")
    if [[ -z $acc ]] || ! grep -q "allreduce no-op mpi" "$work/colour_noop.log" || ! below_bar "$acc"; then
      echo "FAIL: scratch API, mpirun -np 2 with a no-op gradient allreduce: test accuracy '$acc' not under $colour_bar"
      cat "$work/colour_noop.log"
      failures=$((failures + 1))
    else
      echo "colour model: scratch API, mpirun -np 2, no-op gradient allreduce: test acc $acc, under the bar"
    fi
  fi
fi

# What the checkpoint records drives evaluate, predict and export.
ckpt=$(ls "$work"/colour_ckpt/step-*.ckpt | tail -1)
"$dptrain" evaluate --checkpoint "$ckpt" --data "$d/cifar" >"$work/evaluate.log" 2>&1
grep -q "^test accuracy: " "$work/evaluate.log" && grep -q "Ankle boot" "$work/evaluate.log" ||
  { echo "FAIL: evaluate on the colour set"; cat "$work/evaluate.log"; failures=$((failures + 1)); }
/usr/bin/python3 -c "import cv2, numpy as np; cv2.imwrite('$work/red.png', np.dstack([np.zeros((40, 50)), np.zeros((40, 50)), np.full((40, 50), 200)]).astype(np.uint8))"
"$dptrain" predict --checkpoint "$ckpt" --json "$work/red.png" >"$work/predict.log" 2>&1
grep -q '"inverted":false' "$work/predict.log" || { echo "FAIL: predict on a colour model"; cat "$work/predict.log"; failures=$((failures + 1)); }
"$dptrain" export --checkpoint "$ckpt" --onnx "$work/colour.onnx" >"$work/export.log" 2>&1
grep -q "input images \[N, 3, 32, 32\] normalized per channel as in training, output logits \[N, 10\]" "$work/export.log" ||
  { echo "FAIL: export's shapes"; cat "$work/export.log"; failures=$((failures + 1)); }
expect "cannot resume from $(ls "$work"/colour_ckpt/step-*.ckpt | tail -1): it was written with data of 3x32x32 images in 10 classes (T-shirt/top, Trouser, Pullover, ...), this run has data of 1x28x28 images in 10 classes (T-shirt/top, Trouser, Pullover, ...); resume with the --data it was trained on" \
  train --api concise --init kaiming --momentum 0.9 --epochs 4 --checkpoint-dir "$work/colour_ckpt" --resume \
  --train-limit 2000 --progress off

# Bad input: one line naming the file and the fix, status 1.
bad=$work/bad
mkdir -p "$bad/empty" "$bad/noimages/train/cat" "$bad/broken/train/cat" "$bad/broken/train/dog"
expect "image folder '$bad/empty' holds no class folders; put the pictures of each class in a folder named after it ($bad/empty/CLASS/PICTURE.jpg)" \
  train --data "$bad/empty" --data-format folder
expect "class folder '$bad/noimages/train/cat' holds no pictures (.jpg, .png, .bmp, .gif, .tga, .pgm, .ppm); add some or remove the folder" \
  train --data "$bad/noimages"
cp "$d"/png/train/0_T-shirt-top/00001.png "$bad/broken/train/cat/a.png"
cp "$d"/png/train/1_Trouser/00016.png "$bad/broken/train/dog/b.png"
cp -r "$bad/broken/train" "$bad/broken/test"
head -c 100 "$d"/png/train/0_T-shirt-top/00001.png >"$bad/broken/train/dog/cut.png"
expect "cannot decode picture '$bad/broken/train/dog/cut.png': the file ends before the picture does (cut short); remove it, or pass --on-bad-image skip to leave such pictures out" \
  train --data "$bad/broken"
"$dptrain" train --data "$bad/broken" --on-bad-image skip --epochs 1 --batch-size 2 --progress off >"$work/skip.log" 2>&1
grep -q "dptrain: warning: left out 1 picture(s) of '$bad/broken/train' that do not decode (--on-bad-image skip)" "$work/skip.log" ||
  { echo "FAIL: --on-bad-image skip"; cat "$work/skip.log"; failures=$((failures + 1)); }
mkdir -p "$bad/npy"
/usr/bin/python3 - "$bad/npy" <<'PY'
import sys, numpy as np
d = sys.argv[1]
x = np.zeros((4, 16, 16), np.uint8); y = np.array([0, 1, 0, 1])
np.savez(d + "/lengths.npz", x_train=x, y_train=y[:3], x_test=x, y_test=y)
np.savez(d + "/dtype.npz", x_train=x.astype(np.float64), y_train=y, x_test=x, y_test=y)
np.savez(d + "/rank.npz", x_train=np.zeros((4, 256), np.uint8), y_train=y, x_test=x, y_test=y)
np.savez(d + "/label.npz", x_train=x, y_train=y, x_test=x, y_test=np.array([0, 1, 2, 0]))
PY
expect "NumPy arrays 'x_train' (4 images) and 'y_train' (3 labels) in '$bad/npy/lengths.npz' differ in length; save one label per image" \
  train --data "$bad/npy/lengths.npz"
expect "NumPy array 'x_train' in '$bad/npy/dtype.npz' has dtype '<f8'; images must be uint8 ('|u1') or float32 ('<f4'): convert them with astype" \
  train --data "$bad/npy/dtype.npz"
expect "NumPy array 'x_train' in '$bad/npy/rank.npz' has shape (4, 256); images must be N x H x W, N x C x H x W or N x H x W x C with C 1 or 3" \
  train --data "$bad/npy/rank.npz"
expect "NumPy array 'y_test' in '$bad/npy/label.npz': the label at index 2 is 2, outside the 2 classes; name every class in '$bad/npy/classes.txt', one per line" \
  train --data "$bad/npy/label.npz"
mkdir -p "$bad/cifar" && cp "$d"/cifar/* "$bad/cifar/" && head -c 5000 "$d/cifar/test_batch.bin" >"$bad/cifar/test_batch.bin"
expect "CIFAR-10 file '$bad/cifar/test_batch.bin' holds 5000 bytes, not a whole number of 3073-byte records; it is cut short or not a CIFAR-10 binary batch, download it again" \
  train --data "$bad/cifar"
expect "LeNet needs images of at least 14x14, got 12x12; pass --image-size 14 or more" \
  train --data "$d/npy" --image-size 12
mkdir -p "$bad/unknown" && echo notes >"$bad/unknown/readme.txt"
expect "cannot tell what data '$bad/unknown' holds: no IDX files (train-images-idx3-ubyte[.gz]), CIFAR batches (data_batch_1.bin, train.bin), NumPy arrays (an .npz file, x_train.npy) or class folders (train/CLASS/PICTURE); pass --data-format idx, cifar, folder or numpy" \
  train --data "$bad/unknown"
expect "'$d/npy' has a test split of its own; leave --test-split at 0" train --data "$d/npy" --test-split 0.1
report_failures "every format reads the real data, trains, and refuses bad input"
