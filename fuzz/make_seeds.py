#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: small valid inputs of each format (and a
few near misses), so fuzzing starts from files that reach deep into the parsers.
    fuzz/make_seeds.py            # rewrites fuzz/corpus/{idx,checkpoint}/
"""
import gzip
import json
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def idx(dims, values):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(values)


def checkpoint(meta, tensors, version=1):
    body = struct.pack("<Q", len(meta)) + meta + struct.pack("<I", len(tensors))
    for name, shape, values in tensors:
        body += struct.pack("<I", len(name)) + name + struct.pack("<I", len(shape))
        body += b"".join(struct.pack("<q", d) for d in shape)
        body += b"".join(struct.pack("<f", v) for v in values)
    head = b"DPTCKPT\n" + struct.pack("<IQ", version, len(body)) + body
    return head + struct.pack("<I", zlib.crc32(head) & 0xFFFFFFFF)


def meta(**changes):
    m = {"model": "lenet (scratch API)", "seed": 0, "batch_size": 4, "train_examples": 8,
         "devices": ["cpu:0", "cpu:1"], "epoch": 1, "batch_offset": 1, "global_step": 3,
         "epoch_loss_sum": 9.2, "epoch_correct": 1, "epoch_examples": 4, "epoch_seconds": 0.5,
         "history": [{"epoch": 1, "train_loss": 2.3, "train_acc": 0.1, "test_acc": 0.1,
                      "seconds": 0.5, "examples_per_sec": 16.0}]}
    m.update(changes)
    return json.dumps(m, separators=(",", ":")).encode()


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def main():
    d = os.path.join(HERE, "corpus", "idx")
    images = idx([2, 3, 3], range(18))
    write(d, "images_2x3x3.idx", images)
    write(d, "labels_4.idx", idx([4], [0, 9, 3, 1]))
    write(d, "images_2x3x3.idx.gz", gzip.compress(images, mtime=0))
    write(d, "truncated.idx", images[:-5])
    write(d, "empty_dim.idx", idx([0, 28, 28], []))

    d = os.path.join(HERE, "corpus", "checkpoint")
    params = [(b"param/W1", [2, 2], [0.5, -1.0, 2.0, 0.0]), (b"param/b1", [2], [0.1, 0.2])]
    write(d, "scratch.ckpt", checkpoint(meta(), params))
    write(d, "concise.ckpt", checkpoint(meta(model="lenet"), params + [
        (b"buffer/bn.running_mean", [2], [0.0, 1.0]), (b"momentum/W1", [2, 2], [1.0, 1.0, 1.0, 1.0])]))
    write(d, "nan_history.ckpt", checkpoint(meta(history=[{"epoch": 1, "train_loss": None, "train_acc": 0.0,
                                                           "test_acc": 0.1, "seconds": 0.5,
                                                           "examples_per_sec": 0.0}]), params))
    write(d, "version2.ckpt", checkpoint(meta(), params, version=2))
    write(d, "truncated.ckpt", checkpoint(meta(), params)[:-9])


if __name__ == "__main__":
    main()
