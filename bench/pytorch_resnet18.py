#!/usr/bin/python3
"""The lesson's ResNet-18 for small images in PyTorch, the GPU peer of scripts/gpu-check.
The same network as dptrain's `--model resnet18` (3x3 conv 64 + BatchNorm + ReLU, four
stages of two residual blocks, 64-128-256-512 channels, global average pool, linear),
Kaiming-initialised, mean softmax cross-entropy, torch.optim.SGD, batch 256, on the real
Fashion-MNIST (read as pytorch_lenet.py reads it). Only the training loop is timed for
sec/epoch; the last three lines are machine-readable, as in pytorch_lenet.py.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_lenet import load_split  # noqa: E402  (same data reader, same checks)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402


class Residual(nn.Module):
    def __init__(self, in_channels, out_channels, use_1x1conv=False, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1, stride=stride)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.conv3 = nn.Conv2d(in_channels, out_channels, 1, stride=stride) if use_1x1conv else None

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.conv3(x) if self.conv3 is not None else x))


def resnet18(num_classes=10, in_channels=1):
    def stage(cin, cout, first):
        return nn.Sequential(Residual(cin, cout, not first, 1 if first else 2), Residual(cout, cout))

    net = nn.Sequential(nn.Conv2d(in_channels, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                        stage(64, 64, True), stage(64, 128, False), stage(128, 256, False), stage(256, 512, False),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes))
    for m in net.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight)
    return net


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU threads for torch (torch.set_num_threads; 0: torch's default, 1 on some machines)")
    ap.add_argument("--train-limit", type=int, default=0, help="train on the first N images only (0: all)")
    ap.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N images only (0: all)")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    X_train, y_train = (t.to(device) for t in load_split(args.data, "train"))
    X_test, y_test = (t.to(device) for t in load_split(args.data, "t10k"))
    if args.train_limit > 0:
        X_train, y_train = X_train[:args.train_limit], y_train[:args.train_limit]
    if args.test_limit > 0:
        X_test, y_test = X_test[:args.test_limit], y_test[:args.test_limit]
    net = resnet18().to(device)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    n = X_train.shape[0]
    print(f"pytorch {torch.__version__}, ResNet-18 on {device}, batch {args.batch_size}, lr {args.lr}, "
          f"{torch.get_num_threads()} threads", flush=True)
    train_secs, eval_secs, acc = [], [], 0.0
    for epoch in range(args.epochs):
        net.train()
        perm = torch.randperm(n, device=device)
        t0 = time.perf_counter()
        for i in range(0, n, args.batch_size):
            idx = perm[i:i + args.batch_size]
            loss = F.cross_entropy(net(X_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()  # one host sync per step, as dptrain's loss read-back
        train_secs.append(time.perf_counter() - t0)
        net.eval()
        t0 = time.perf_counter()
        correct = 0
        with torch.no_grad():
            for i in range(0, X_test.shape[0], args.batch_size):
                correct += (net(X_test[i:i + args.batch_size]).argmax(1) == y_test[i:i + args.batch_size]).sum().item()
        eval_secs.append(time.perf_counter() - t0)
        acc = correct / X_test.shape[0]
        print(f"epoch {epoch + 1}: test acc {acc:.4f}, train {train_secs[-1]:.2f} s, eval {eval_secs[-1]:.2f} s",
              flush=True)
    print(f"epoch secs: {' '.join(f'{t:.3f}' for t in train_secs)}")
    print(f"eval secs: {' '.join(f'{t:.3f}' for t in eval_secs)}")
    print(f"sec/epoch: {sum(train_secs) / len(train_secs):.3f}")
    print(f"eval sec: {sum(eval_secs) / len(eval_secs):.3f}")
    print(f"test acc: {acc:.4f}")


if __name__ == "__main__":
    main()
