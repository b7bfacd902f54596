#!/usr/bin/env python3
"""Writes the hostile inputs of tests/cli/hostile_input.sh into FOLDER: data a user may hand
dptrain by mistake or by malice, each damaged in one way (numpy, cv2: Debian's python3).
    write_hostile_data.py FOLDER
"""
import os
import struct
import sys

import cv2
import numpy as np

rng = np.random.default_rng(0)


def npy_header_only(path, descr, shape):
    """An .npy file of version 1 whose header declares `shape` and which holds no data."""
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode())


def numpy_folder(d):
    os.makedirs(d, exist_ok=True)
    x = rng.integers(0, 255, (20, 16, 16), dtype=np.uint8)
    y = (np.arange(20) % 4).astype(np.int64)
    for name, a in (("x_train", x), ("y_train", y), ("x_test", x), ("y_test", y)):
        np.save(f"{d}/{name}.npy", a)


def image_folder(root, classes, n=3, side=28):
    for c in classes:
        for split in ("train", "test"):
            os.makedirs(f"{root}/{split}/{c}", exist_ok=True)
            for i in range(n):
                cv2.imwrite(f"{root}/{split}/{c}/{i}.png", rng.integers(0, 255, (side, side, 3), dtype=np.uint8))


def idx(path, a):
    a = np.asarray(a, dtype=np.uint8)
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 8, a.ndim]) + b"".join(struct.pack(">I", d) for d in a.shape) + a.tobytes())


def idx_folder(d, train_labels, test_labels):
    os.makedirs(d, exist_ok=True)
    for prefix, labels in (("train", train_labels), ("t10k", test_labels)):
        idx(f"{d}/{prefix}-images-idx3-ubyte", rng.integers(0, 255, (len(labels), 28, 28)))
        idx(f"{d}/{prefix}-labels-idx1-ubyte", labels)


def jpeg_bomb():
    """A small JPEG whose frame header (SOF0) declares 60000 x 60000 pixels."""
    ok, j = cv2.imencode(".jpg", rng.integers(0, 255, (8, 8, 3), dtype=np.uint8))
    j = bytearray(j.tobytes())
    sof = j.index(b"\xff\xc0")
    j[sof + 5:sof + 9] = struct.pack(">HH", 60000, 60000)
    return bytes(j)


def main(out):
    os.chdir(out)
    # NumPy: a shape whose product wraps past 2^64 to 0 with 0 data bytes; an empty split;
    # labels of Python objects.
    numpy_folder("npy_overflow")
    npy_header_only("npy_overflow/x_train.npy", "|u1", "(2305843009213693952, 16, 16)")
    numpy_folder("npy_empty")
    np.save("npy_empty/x_train.npy", np.zeros((0, 28, 28), np.uint8))
    np.save("npy_empty/y_train.npy", np.zeros((0,), np.int64))
    numpy_folder("npy_objects")
    np.save("npy_objects/y_train.npy", np.array([1, "a"] * 10, dtype=object), allow_pickle=True)
    # Pictures: a decompression bomb; a PNG whose header reads but whose data is damaged.
    image_folder("bomb", ["a", "b"])
    with open("bomb/train/a/bomb.jpg", "wb") as f:
        f.write(jpeg_bomb())
    with open("bomb.jpg", "wb") as f:
        f.write(jpeg_bomb())
    image_folder("bad_png", ["a", "b"])
    png = bytearray(open("bad_png/train/a/0.png", "rb").read())
    data = png.index(b"IDAT") + 6
    png[data:data + 14] = bytes(b ^ 0x5A for b in png[data:data + 14])
    with open("bad_png/train/a/0.png", "wb") as f:
        f.write(png)
    # Folders: a class name that is not UTF-8; one class only; a symbolic link to itself.
    image_folder("not_utf8", ["good", "other"])
    for split in ("train", "test"):
        os.rename(f"not_utf8/{split}/other".encode(), f"not_utf8/{split}/b".encode() + b"\xffag")
    image_folder("one_class", ["only"])
    # Two folders of the same shape whose second class is named differently.
    image_folder("classes_ab", ["a", "b"])
    image_folder("classes_ac", ["a", "c"])
    image_folder("link_loop", ["a", "b"])
    os.symlink("loop.png", "link_loop/train/a/loop.png")
    # IDX without classes.txt: a stray label 200 among 0-9; an empty training split.
    idx_folder("idx_label_200", [200 if i == 5 else i % 10 for i in range(64)], [i % 10 for i in range(16)])
    idx_folder("idx_empty", [], [i % 10 for i in range(16)])


if __name__ == "__main__":
    main(sys.argv[1])
