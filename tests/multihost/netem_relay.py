#!/usr/bin/env python3
"""Latency and loss for kernels without sch_netem: a user-space netem on a TUN device.

The multi-host harness routes every packet between hosts through a TUN device in the
switch namespace; this program reads each packet from it, drops it with the given
probability, or writes it back after the delay plus a uniform jitter, and the kernel then
forwards it to its destination host. Jitter reorders packets, as netem's does. The random
draws come from --seed, so a run's drops are the same on every rerun of the same traffic.

Runs until SIGTERM or SIGINT, then prints what it relayed and dropped on stderr.
  usage: netem_relay.py --dev TUN --delay-ms D --jitter-ms J --loss-percent P [--seed S]
"""
import argparse
import fcntl
import heapq
import os
import random
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def open_tun(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", required=True, help="TUN device, made beforehand with ip tuntap")
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--loss-percent", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.delay_ms < 0 or args.jitter_ms < 0 or args.jitter_ms > args.delay_ms:
        parser.error("need 0 <= --jitter-ms <= --delay-ms")
    if not 0 <= args.loss_percent < 100:
        parser.error("--loss-percent must be in [0, 100)")

    fd = open_tun(args.dev)
    rng = random.Random(args.seed)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    pending = []  # (release time, arrival number, packet): a min-heap on release time
    arrivals = relayed = dropped = 0
    while not stop:
        now = time.monotonic()
        while pending and pending[0][0] <= now:
            _, _, packet = heapq.heappop(pending)
            os.write(fd, packet)
            relayed += 1
        wait = max(0.0, pending[0][0] - now) if pending else 0.5
        try:
            readable, _, _ = select.select([fd], [], [], wait)
        except InterruptedError:
            continue
        if not readable:
            continue
        while True:
            try:
                packet = os.read(fd, 65536)
            except BlockingIOError:
                break
            arrivals += 1
            if rng.random() * 100 < args.loss_percent:
                dropped += 1
                continue
            delay = args.delay_ms + rng.uniform(-args.jitter_ms, args.jitter_ms)
            heapq.heappush(pending, (time.monotonic() + delay / 1000, arrivals, packet))
    print(f"netem_relay: {arrivals} packets in, {relayed} relayed, {dropped} dropped "
          f"({100 * dropped / max(arrivals, 1):.1f}%)", file=sys.stderr)


if __name__ == "__main__":
    main()
