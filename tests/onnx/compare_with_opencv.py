#!/usr/bin/env python3
"""ONNX export against OpenCV's dnn: for LeNet (scratch and concise API) and ResNet-18,
trains a tiny checkpoint with dptrain, exports it (`dptrain export --onnx`), runs the
first Fashion-MNIST test images through OpenCV's ONNX importer and through dptrain
(`dptrain predict --json` on an IDX file of the same images), and compares the logits.

Tolerance: max |opencv - dptrain| <= 1e-4 * max(1, max |dptrain logit|), i.e. 1e-4
relative to the logits' scale (both compute in float32, in different orders).
   usage: compare_with_opencv.py DPTRAIN DATA_DIR"""
import glob
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile

import cv2
import numpy as np

TOLERANCE = 1e-4
IMAGES = 64

dptrain, data_dir = sys.argv[1:3]
work = tempfile.mkdtemp(prefix="dpt-onnx-")

# The first IMAGES test images, as an IDX file dptrain reads and as the array OpenCV gets.
with gzip.open(os.path.join(data_dir, "t10k-images-idx3-ubyte.gz")) as f:
    raw = f.read()
count = struct.unpack(">I", raw[4:8])[0]
pixels = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(count, 28, 28)[:IMAGES]
idx_file = os.path.join(work, "images-idx3-ubyte")
with open(idx_file, "wb") as f:
    f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, IMAGES, 28, 28) + pixels.tobytes())
blob = (pixels.astype(np.float32) / 255.0).reshape(IMAGES, 1, 28, 28)

runs = {
    # lr 0.9 moves the lesson's N(0, 0.01^2) LeNet off its constant start within 512 images, so
    # the logits compared are not all near 0.
    "lenet-scratch": ["--api", "scratch", "--train-limit", "512", "--test-limit", "256", "--batch-size", "64",
                      "--lr", "0.9"],
    "lenet-concise": ["--api", "concise", "--model", "lenet", "--init", "kaiming", "--momentum", "0.9", "--lr",
                      "0.05", "--train-limit", "512", "--test-limit", "256", "--batch-size", "64"],
    "resnet18": ["--api", "concise", "--model", "resnet18", "--init", "kaiming", "--train-limit", "64",
                 "--test-limit", "32", "--batch-size", "32", "--lr", "0.05"],
}
failures = 0
for name, flags in runs.items():
    ckpt_dir = os.path.join(work, name)
    subprocess.run([dptrain, "train", "--data", data_dir, "--epochs", "1", "--checkpoint-dir", ckpt_dir] + flags,
                   check=True, stdout=subprocess.DEVNULL)
    ckpt = sorted(glob.glob(os.path.join(ckpt_dir, "step-*.ckpt")))[-1]
    onnx_file = os.path.join(work, name + ".onnx")
    subprocess.run([dptrain, "export", "--checkpoint", ckpt, "--onnx", onnx_file], check=True,
                   stdout=subprocess.DEVNULL)
    out = subprocess.run([dptrain, "predict", "--checkpoint", ckpt, "--json", idx_file], check=True,
                         capture_output=True, text=True).stdout
    ours = np.array([json.loads(line)["logits"] for line in out.splitlines()], dtype=np.float64)

    net = cv2.dnn.readNetFromONNX(onnx_file)
    net.setInput(blob)
    theirs = net.forward().astype(np.float64)

    diff = float(np.max(np.abs(theirs - ours)))
    scale = max(1.0, float(np.max(np.abs(ours))))
    agree = int(np.sum(np.argmax(theirs, axis=1) == np.argmax(ours, axis=1)))
    ok = ours.shape == theirs.shape == (IMAGES, 10) and diff <= TOLERANCE * scale
    print(f"{name}: {IMAGES} test images, logits in [{ours.min():.3g}, {ours.max():.3g}], max |opencv - dptrain| = {diff:.3g} "
          f"(max |logit| {scale:.3g}, tolerance {TOLERANCE * scale:.3g}), same top class for {agree}/{IMAGES}: "
          f"{'ok' if ok else 'FAIL'}")
    failures += not ok

if failures:
    print(f"FAIL: {failures} model(s) differ")
    sys.exit(1)
print("PASS: OpenCV's logits of every exported model match dptrain's")
