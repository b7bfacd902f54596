#!/usr/bin/python3
"""Writes the first N images of each split of the real Fashion-MNIST into the formats
dptrain reads, so that tests and benchmarks can compare them against the IDX files:

  OUT/png/train/<class>/<index>.png, OUT/png/test/...    a PNG image folder (grey)
  OUT/jpeg/train/<class>/<index>.jpg, ...                a JPEG image folder (colour, --jpeg-size)
  OUT/npy/x_train.npy, y_train.npy, x_test.npy, y_test.npy   uint8 N x 28 x 28
  OUT/keras.npz                                          the same as one .npz (Keras's layout)
  OUT/idx_by_class/, OUT/npy_by_class/  the same examples as IDX files and .npy arrays in the
        order an image folder lists them (by class, then by name), for bit-for-bit comparisons
  OUT/cifar/data_batch_1..5.bin, test_batch.bin, batches.meta.txt
        a 3-channel 32x32 set in CIFAR-10's binary layout: every image padded to 32x32 and
        tinted with a random colour of its own (red, green and blue weights drawn per
        picture, not per class: the colour says nothing of the class, the shape does)

usage: write_formats.py FASHION_MNIST_DIR OUT [--train N] [--test N] [--formats png,npy,...]
"""
import argparse
import gzip
import os
import zipfile

import cv2
import numpy as np

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(fashion, split, n):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(fashion, prefix + "-images-idx3-ubyte.gz"))[:n]
    y = read_idx(os.path.join(fashion, prefix + "-labels-idx1-ubyte.gz"))[:n]
    return x, y


def folder_name(c):
    return "%d_%s" % (c, CLASSES[c].replace("/", "-").replace(" ", "_"))


def coloured(x, seed, side=32):
    """N x 3 x side x side: each image padded to the side and tinted with a random colour of
    its own, drawn from the seed."""
    pad = (side - x.shape[1]) // 2
    grey = np.zeros((len(x), side, side), dtype=np.float32)
    grey[:, pad:pad + x.shape[1], pad:pad + x.shape[2]] = x
    tints = 0.35 + 0.65 * np.random.RandomState(seed).rand(len(x), 3)  # a colour per picture
    return (grey[:, None, :, :] * tints[:, :, None, None]).round().astype(np.uint8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fashion")
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=1000)
    ap.add_argument("--test", type=int, default=500)
    ap.add_argument("--formats", default="png,npy,npz,cifar")
    ap.add_argument("--jpeg-size", type=int, default=32)
    args = ap.parse_args()
    formats = args.formats.split(",")
    splits = {s: load(args.fashion, s, n) for s, n in (("train", args.train), ("test", args.test))}
    os.makedirs(args.out, exist_ok=True)
    if "png" in formats or "jpeg" in formats:
        for s, (x, y) in splits.items():
            for i, (image, label) in enumerate(zip(x, y)):
                if "png" in formats:
                    d = os.path.join(args.out, "png", s, folder_name(label))
                    os.makedirs(d, exist_ok=True)
                    cv2.imwrite(os.path.join(d, "%05d.png" % i), image)
                if "jpeg" in formats:
                    d = os.path.join(args.out, "jpeg", s, folder_name(label))
                    os.makedirs(d, exist_ok=True)
                    rgb = coloured(image[None], i, 32)[0].transpose(1, 2, 0)
                    big = cv2.resize(rgb, (args.jpeg_size, args.jpeg_size), interpolation=cv2.INTER_LINEAR)
                    cv2.imwrite(os.path.join(d, "%05d.jpg" % i), big[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 90])
    if "png" in formats:  # the folder's order: class folders in turn, each in index order
        by_class = {}
        for s, (x, y) in splits.items():
            order = np.argsort(y, kind="stable")
            by_class[s] = (x[order], y[order])
        write_idx_dir(os.path.join(args.out, "idx_by_class"), by_class)
        os.makedirs(os.path.join(args.out, "npy_by_class"), exist_ok=True)
        for s, (x, y) in by_class.items():
            np.save(os.path.join(args.out, "npy_by_class", "x_%s.npy" % s), x)
            np.save(os.path.join(args.out, "npy_by_class", "y_%s.npy" % s), y.astype(np.int64))
    arrays = {"x_train": splits["train"][0], "y_train": splits["train"][1].astype(np.int64),
              "x_test": splits["test"][0], "y_test": splits["test"][1].astype(np.int64)}
    if "npy" in formats:
        os.makedirs(os.path.join(args.out, "npy"), exist_ok=True)
        for name, a in arrays.items():
            np.save(os.path.join(args.out, "npy", name + ".npy"), a)
    if "npz" in formats:
        np.savez_compressed(os.path.join(args.out, "keras.npz"), **arrays)
    if "cifar" in formats:
        d = os.path.join(args.out, "cifar")
        os.makedirs(d, exist_ok=True)
        xtr, ytr = splits["train"]
        batches = np.array_split(np.arange(len(xtr)), 5)
        for b, idx in enumerate(batches):
            write_cifar(os.path.join(d, "data_batch_%d.bin" % (b + 1)), coloured(xtr[idx], b), ytr[idx])
        xte, yte = splits["test"]
        write_cifar(os.path.join(d, "test_batch.bin"), coloured(xte, 5), yte)
        with open(os.path.join(d, "batches.meta.txt"), "w") as f:
            f.write("\n".join(CLASSES) + "\n\n")


def write_idx_dir(d, splits):
    os.makedirs(d, exist_ok=True)
    for s, (x, y) in splits.items():
        prefix = "train" if s == "train" else "t10k"
        for kind, a in (("images-idx3", x), ("labels-idx1", y)):
            with open(os.path.join(d, "%s-%s-ubyte" % (prefix, kind)), "wb") as f:
                f.write(bytes([0, 0, 8, a.ndim]))
                for dim in a.shape:
                    f.write(int(dim).to_bytes(4, "big"))
                f.write(a.astype(np.uint8).tobytes())


def write_cifar(path, images, labels):
    with open(path, "wb") as f:
        for image, label in zip(images, labels):
            f.write(bytes([int(label)]))
            f.write(image.tobytes())


if __name__ == "__main__":
    main()
