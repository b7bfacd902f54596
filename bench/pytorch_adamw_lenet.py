#!/usr/bin/python3
"""The peer of bench/adamw_lenet.sh: the concise LeNet (conv 1->20 3x3, ReLU, avgpool 2,
conv 20->50 5x5, ReLU, avgpool 2, linear 800->128, ReLU, linear 128->10, as dptrain's
--model lenet) trained on the real Fashion-MNIST with torch.optim.AdamW: the lesson's
initialization (weights N(0, 0.01^2), biases 0), mean softmax cross-entropy, shuffled
batches of 256, pixels scaled to [0, 1]. Prints one line per epoch and, last,
`test acc: <float>`.
usage: pytorch_adamw_lenet.py DATA_DIR EPOCHS LR WEIGHT_DECAY SEED"""
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The one IDX reader of the Python helpers.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data"))
from write_formats import read_idx  # noqa: E402


def split(root, prefix):
    def find(name):
        for candidate in (name + ".gz", name):
            if os.path.exists(os.path.join(root, candidate)):
                return os.path.join(root, candidate)
        sys.exit("pytorch_adamw_lenet.py: no %s in %s" % (name, root))
    x = torch.from_numpy(read_idx(find(prefix + "-images-idx3-ubyte")).astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(read_idx(find(prefix + "-labels-idx1-ubyte")).astype(np.int64))
    return x, y


root, epochs, lr, decay, seed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(2)  # Debian's torch starts with one thread here
torch.manual_seed(seed)
x_train, y_train = split(root, "train")
x_test, y_test = split(root, "t10k")
net = nn.Sequential(nn.Conv2d(1, 20, 3), nn.ReLU(), nn.AvgPool2d(2, 2), nn.Conv2d(20, 50, 5), nn.ReLU(),
                    nn.AvgPool2d(2, 2), nn.Flatten(), nn.Linear(800, 128), nn.ReLU(), nn.Linear(128, 10))
for m in net.modules():
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.normal_(m.weight, std=0.01)
        nn.init.zeros_(m.bias)
opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=decay)
for epoch in range(1, epochs + 1):
    start = time.perf_counter()
    order = torch.randperm(len(y_train))
    net.train()
    for b in range(0, len(order), 256):
        idx = order[b:b + 256]
        opt.zero_grad()
        loss = F.cross_entropy(net(x_train[idx]), y_train[idx])
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - start
    net.eval()
    with torch.no_grad():
        correct = sum(int((net(x_test[b:b + 1000]).argmax(1) == y_test[b:b + 1000]).sum())
                      for b in range(0, len(y_test), 1000))
    print("epoch %d: test acc %.4f, %.1f s" % (epoch, correct / len(y_test), seconds), flush=True)
print("test acc: %.4f" % (correct / len(y_test)))
