#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: small valid inputs of each format (and a
few near misses), so fuzzing starts from files that reach deep into the parsers.
    fuzz/make_seeds.py            # rewrites fuzz/corpus/<target>/
The idx and checkpoint seeds are built byte by byte here; the others use numpy, zipfile
and OpenCV (python3-numpy, python3-opencv), whose encoders may differ across versions.
"""
import gzip
import io
import json
import os
import struct
import sys
import zipfile
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
    try:
        import cv2  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        # Debian's python3-numpy and python3-opencv serve its own interpreter, not another
        # one first on PATH (pyenv, a virtual environment): run under that one instead.
        if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(__file__)] + sys.argv[1:])
        sys.exit("make_seeds.py: needs numpy and OpenCV (apt-get install -y python3-numpy python3-opencv)")
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

    main_other_formats()


def npy(array, version=None):
    import numpy as np
    f = io.BytesIO()
    if version is None:
        np.save(f, array)
    else:
        np.lib.format.write_array(f, array, version=version)
    return f.getvalue()


def npz(arrays, compression=zipfile.ZIP_STORED):
    f = io.BytesIO()
    with zipfile.ZipFile(f, "w", compression) as z:
        for name, data in arrays:
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data, compress_type=compression)
    return f.getvalue()


def cifar_record(label, fill):
    return bytes([label]) + bytes([fill]) * 3072


def numpy_seeds():
    import numpy as np
    d = os.path.join(HERE, "corpus", "npy")
    images = np.arange(18, dtype=np.uint8).reshape(2, 3, 3)
    labels = np.array([0, 9, 3, 1], dtype=np.int64)
    write(d, "images_u8_2x3x3.npy", npy(images))
    write(d, "labels_i64_4.npy", npy(labels))
    write(d, "float32_2x1x2x2.npy", npy(np.linspace(0, 1, 8, dtype=np.float32).reshape(2, 1, 2, 2)))
    write(d, "version2_u8_1x2x2x3.npy", npy(np.arange(12, dtype=np.uint8).reshape(1, 2, 2, 3), version=(2, 0)))
    write(d, "truncated.npy", npy(images)[:-4])
    write(d, "fortran.npy", npy(np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3))))
    write(d, "big_endian.npy", npy(np.arange(3, dtype=">f4")))

    d = os.path.join(HERE, "corpus", "npz")
    train = [("x_train.npy", npy(images)), ("y_train.npy", npy(np.array([0, 2], dtype=np.int64)))]
    write(d, "train_stored.npz", npz(train))
    write(d, "train_deflated.npz", npz(train, zipfile.ZIP_DEFLATED))
    write(d, "float_nhwc_u8_labels.npz",
          npz([("x_train.npy", npy(np.zeros((2, 2, 2, 1), dtype=np.float32))),
               ("y_train.npy", npy(np.array([1, 0], dtype=np.uint8)))]))
    write(d, "lengths_differ.npz", npz([train[0], ("y_train.npy", npy(labels))]))
    write(d, "truncated.npz", npz(train)[:-30])


def picture_seeds():
    import cv2
    import numpy as np
    d = os.path.join(HERE, "corpus", "picture")
    colour = np.arange(4 * 4 * 3, dtype=np.uint8).reshape(4, 4, 3) * 5
    grey = np.arange(16, dtype=np.uint8).reshape(4, 4) * 16
    png = cv2.imencode(".png", colour)[1].tobytes()
    jpeg = cv2.imencode(".jpg", colour, [cv2.IMWRITE_JPEG_QUALITY, 50])[1].tobytes()
    write(d, "colour_4x4.png", png)
    write(d, "grey_4x4.png", cv2.imencode(".png", grey)[1].tobytes())
    write(d, "colour_4x4.jpg", jpeg)
    write(d, "grey_4x4.jpg", cv2.imencode(".jpg", grey, [cv2.IMWRITE_JPEG_QUALITY, 50])[1].tobytes())
    write(d, "colour_4x4.bmp", cv2.imencode(".bmp", colour)[1].tobytes())
    write(d, "grey_4x4.pgm", b"P5 4 4 255\n" + grey.tobytes())
    write(d, "truncated.png", png[:-20])
    write(d, "truncated.jpg", jpeg[: len(jpeg) // 2])


def main_other_formats():
    numpy_seeds()
    picture_seeds()

    # The first byte picks the batch file (0: data_batch_1.bin) that holds the rest.
    d = os.path.join(HERE, "corpus", "cifar")
    write(d, "two_records.bin", b"\x00" + cifar_record(3, 0x10) + cifar_record(9, 0xF0))
    write(d, "label_outside.bin", b"\x02" + cifar_record(10, 0x80))
    write(d, "truncated.bin", b"\x04" + cifar_record(1, 0x20)[:-7])

    d = os.path.join(HERE, "corpus", "hostfile")
    write(d, "two_hosts", b"localhost slots=2\n# c\nnode1\n")
    write(d, "crlf_comment", b"# cluster\r\nnode1 slots=4 # fast\r\n\r\nnode2\tslots=1\r\n")
    write(d, "zero_slots", b"node1 slots=0\n")
    write(d, "listed_twice", b"node1\nnode1 slots=2\n")

    # The metadata alone: checkpoint_json_fuzzer builds the container around it.
    d = os.path.join(HERE, "corpus", "checkpoint_json")
    write(d, "meta.json", meta())
    write(d, "with_data.json", meta(model="resnet18", data={"shape": [3, 32, 32], "classes": ["cat", "dog"],
                                                            "light_on_dark": False, "mean": [0.5, 0.5, 0.5],
                                                            "std": [0.25, 0.25, 0.25]},
                                   optimizer="adam", optimizer_steps=3, lr_schedule="cosine", accumulate=2))
    write(d, "null_loss.json", meta(epoch_loss_sum=None, history=[]))
    write(d, "negative_batch.json", meta(batch_size=-1))


if __name__ == "__main__":
    main()
