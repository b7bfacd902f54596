#!/usr/bin/python3
"""The peer of bench/loader_throughput.cc: torchvision's ImageFolder through a DataLoader
with num_workers workers, the same transforms (Resize, RandomCrop with padding 4,
RandomHorizontalFlip, ToTensor, Normalize), batch 256, shuffled; best of 2 passes.
usage: torchvision_loader.py FOLDER SIZE WORKERS"""
import sys
import time

import torch
import torchvision
import torchvision.transforms as T

folder, size, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)  # each worker decodes on its own core
transform = T.Compose([T.Resize((size, size)), T.RandomCrop(size, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
                       T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
data = torchvision.datasets.ImageFolder(folder + "/train", transform=transform)
loader = torch.utils.data.DataLoader(data, batch_size=256, shuffle=True, num_workers=workers, persistent_workers=True)
best = 0.0
for _ in range(2):
    start = time.perf_counter()
    images = sum(len(labels) for _, labels in loader)
    best = max(best, images / (time.perf_counter() - start))
print("torchvision: %.0f images/s (%s, %dx%d, DataLoader num_workers=%d, best of 2 passes)" % (best, folder, size, size, workers))
