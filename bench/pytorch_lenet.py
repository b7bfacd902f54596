#!/usr/bin/python3
"""The lesson's from-scratch LeNet in PyTorch, as the peer for bench/lenet_epoch.sh.

Same model, initialisation, loss and update as the d2l multi-GPU from-scratch lesson
(and as dptrain's `--model lenet`): torch.nn.functional ops on plain tensors, softmax
cross-entropy summed over the batch, manual SGD `p -= lr * p.grad / batch_size`.
Reads the real Fashion-MNIST IDX gz files itself, so no torchvision is needed.

Only the training loop is timed for sec/epoch; test-set evaluation is timed apart.
The last three lines are machine-readable:
    sec/epoch: <float>
    eval sec: <float>
    test acc: <float>
Run it with /usr/bin/python3 (Debian's python3-torch lives there).
"""

import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # one clear message instead of a traceback
    sys.exit(f"pytorch_lenet.py: cannot import torch ({e}); install Debian's "
             f"python3-torch and run with /usr/bin/python3")


def blas_in_use():
    """The BLAS shared library this process actually loaded (torch links libblas.so.3,
    which Debian's alternatives may point at netlib's reference BLAS or at OpenBLAS;
    that choice alone changes PyTorch's LeNet epoch about 2x on our machines)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.split()[-1]}
    except OSError:
        return "unknown"
    if not libs:
        return "unknown"
    name = ", ".join(sorted(libs))
    if any("openblas" in lib for lib in libs):
        return f"OpenBLAS ({name})"
    if any("/blas/libblas.so" in lib for lib in libs):
        return f"netlib reference BLAS, slow ({name})"
    return name


def read_idx(path):
    """Reads one gzip'd IDX file (big-endian header: magic, dims) into a numpy array."""
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        sys.exit(f"pytorch_lenet.py: cannot read {path}: {e}; pass --data DIR "
                 f"(Debian package dataset-fashion-mnist installs it in "
                 f"/usr/share/datasets/fashion-mnist)")
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != 0x08:
        sys.exit(f"pytorch_lenet.py: {path} is not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        sys.exit(f"pytorch_lenet.py: {path} is truncated or corrupt "
                 f"(header says {dims}, found {body.size} bytes)")
    return body.reshape(dims)


def load_split(data_dir, prefix):
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    X = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)  # N,1,28,28
    y = torch.from_numpy(labels.astype(np.int64))
    return X, y


def init_params(generator):
    """The lesson's LeNet parameters: weights N(0, 0.01^2), biases 0."""
    def w(*shape):
        return (torch.randn(*shape, generator=generator) * 0.01).requires_grad_()

    def b(n):
        return torch.zeros(n, requires_grad=True)

    return [w(20, 1, 3, 3), b(20),
            w(50, 20, 5, 5), b(50),
            w(800, 128), b(128),
            w(128, 10), b(10)]


def lenet(X, params):
    h1 = F.relu(F.conv2d(X, params[0], params[1]))          # 20 x 26 x 26
    h1 = F.avg_pool2d(h1, kernel_size=2, stride=2)           # 20 x 13 x 13
    h2 = F.relu(F.conv2d(h1, params[2], params[3]))          # 50 x 9 x 9
    h2 = F.avg_pool2d(h2, kernel_size=2, stride=2)           # 50 x 4 x 4
    h2 = h2.reshape(h2.shape[0], -1)                         # 800
    h3 = F.relu(h2 @ params[4] + params[5])                  # 128
    return h3 @ params[6] + params[7]                        # 10


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad / batch_size
            p.grad.zero_()


def evaluate(params, X, y, batch_size):
    correct = 0
    with torch.no_grad():
        for i in range(0, X.shape[0], batch_size):
            out = lenet(X[i:i + batch_size], params)
            correct += (out.argmax(dim=1) == y[i:i + batch_size]).sum().item()
    return correct / X.shape[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda / cuda:N for the GPU peer of scripts/gpu-check")
    args = ap.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or args.threads < 1:
        ap.error("--epochs, --batch-size and --threads must be >= 1")

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)

    X_train, y_train = load_split(args.data, "train")
    X_test, y_test = load_split(args.data, "t10k")

    gen = torch.Generator().manual_seed(args.seed)
    params = init_params(gen)
    device = torch.device(args.device)
    if device.type != "cpu":
        # Weights drawn on the host (the same values as on the CPU), then moved; the data
        # lives on the GPU from the start, as a GPU user would keep it.
        params = [p.detach().to(device).requires_grad_() for p in params]
        X_train, y_train = X_train.to(device), y_train.to(device)
        X_test, y_test = X_test.to(device), y_test.to(device)
    n = X_train.shape[0]

    print(f"pytorch {torch.__version__}, device {device}, {torch.get_num_threads()} threads, "
          f"batch {args.batch_size}, lr {args.lr}, {n} train / {X_test.shape[0]} test")
    print(f"blas: {blas_in_use()}", flush=True)
    train_secs, eval_secs, test_acc = [], [], 0.0
    for epoch in range(args.epochs):
        perm = torch.randperm(n, generator=gen)
        loss_sum = 0.0
        t0 = time.perf_counter()
        for i in range(0, n, args.batch_size):
            idx = perm[i:i + args.batch_size].to(device)
            X, y = X_train[idx], y_train[idx]
            loss = F.cross_entropy(lenet(X, params), y, reduction="sum")
            loss.backward()
            # The last batch may be short: divide by its own size, as the lesson does.
            sgd(params, args.lr, X.shape[0])
            loss_sum += loss.item()
        train_secs.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        test_acc = evaluate(params, X_test, y_test, args.batch_size)
        eval_secs.append(time.perf_counter() - t0)
        print(f"epoch {epoch + 1}: train loss {loss_sum / n:.4f}, "
              f"test acc {test_acc:.4f}, train {train_secs[-1]:.2f} s, "
              f"eval {eval_secs[-1]:.2f} s", flush=True)

    print(f"sec/epoch: {sum(train_secs) / len(train_secs):.3f}")
    print(f"eval sec: {sum(eval_secs) / len(eval_secs):.3f}")
    print(f"test acc: {test_acc:.4f}")


if __name__ == "__main__":
    main()
