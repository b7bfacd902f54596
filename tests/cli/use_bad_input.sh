#!/usr/bin/env bash
# Bad input to evaluate, predict and export through the real dptrain binary: each must stop
# with exactly its message on stderr and exit status 1. Trains a tiny checkpoint first.
#   usage: use_bad_input.sh DPTRAIN DATA_DIR
set -uo pipefail
dptrain=${1:?usage: use_bad_input.sh DPTRAIN DATA_DIR}
data=${2:?usage: use_bad_input.sh DPTRAIN DATA_DIR}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dptrain" train --data "$data" --train-limit 256 --test-limit 128 --epochs 1 --batch-size 128 \
  --checkpoint-dir "$work/ckpt" >/dev/null || { echo "FAIL: could not train the test checkpoint"; exit 1; }
ckpt=$(ls "$work"/ckpt/step-*.ckpt | tail -1)
python3 "$here/set_checkpoint_model.py" "$ckpt" "$work/vgg.ckpt" vgg16 || exit 1
echo "not a picture" >"$work/notes.txt"
head -c 100 "$ckpt" >"$work/cut.ckpt"
source "$(dirname "$0")/expect_error.sh"
missing="checkpoint $work/none.ckpt does not exist (pass a step-*.ckpt file that --checkpoint-dir wrote)"
expect "$missing" evaluate --checkpoint "$work/none.ckpt" --data "$data"
expect "$missing" predict --checkpoint "$work/none.ckpt" "$work/notes.txt"
unknown="checkpoint $work/vgg.ckpt records the model 'vgg16', which this dptrain cannot build (it builds 'lenet (scratch API)', 'lenet', 'resnet18'; a program of yours registers its own with nn::register_model)"
expect "$unknown" evaluate --checkpoint "$work/vgg.ckpt" --data "$data"
expect "$unknown" predict --checkpoint "$work/vgg.ckpt" "$work/notes.txt"
expect "cannot read image $work/notes.txt: not a picture (JPEG, PNG, PGM, BMP, GIF, TGA) nor an IDX images file" \
  predict --checkpoint "$ckpt" "$work/notes.txt"
expect "cannot read image $work/nope.png: no such file" predict --checkpoint "$ckpt" "$work/nope.png"
expect "--top-k must be between 1 and 10, got 0" predict --checkpoint "$ckpt" --top-k 0 "$work/notes.txt"
expect "checkpoint $work/cut.ckpt is damaged: it is truncated (100 bytes, $(stat -c %s "$ckpt") expected); use an earlier checkpoint" \
  evaluate --checkpoint "$work/cut.ckpt"
expect "--test-limit must be >= 0, got -5" evaluate --checkpoint "$ckpt" --test-limit -5
expect "data '/nonexistent/fm' does not exist; check the path given to --data" \
  evaluate --checkpoint "$ckpt" --data /nonexistent/fm
expect "cannot write SVG plot /nonexistent/dir/c.svg: No such file or directory" \
  evaluate --checkpoint "$ckpt" --data "$data" --test-limit 16 --confusion-svg /nonexistent/dir/c.svg
expect "$missing" export --checkpoint "$work/none.ckpt" --onnx "$work/m.onnx"
expect "$unknown" export --checkpoint "$work/vgg.ckpt" --onnx "$work/m.onnx"
expect "cannot write ONNX file /nonexistent/dir/m.onnx: No such file or directory" \
  export --checkpoint "$ckpt" --onnx /nonexistent/dir/m.onnx
report_failures "every bad input to evaluate, predict and export stops with its message and status 1"
