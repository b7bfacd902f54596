#!/usr/bin/env python3
"""Checks what `dptrain train --trace FILE.json` promises about FILE.json and its timeline.

usage: check_trace.py TRACE.json --processes P --devices D --steps S [--buckets] [--chunks K] [--zero]

- the file parses as a Chrome trace: {"traceEvents": [...]}, complete events ("ph": "X")
  with name, cat, pid, tid, ts and dur >= 0;
- spans nest in every lane (pid, tid): each one inside the one still open before it, or
  after it has ended, never straddling its end;
- every process has a host lane with S iterations, each holding its data and step spans;
- every device of every process has S forward, backward and update spans (deterministic
  mode: one forward and backward per chunk, and S tree sums);
- --buckets: every device's bucket allreduces run on its own communication lane, and on
  every device at least one overlaps that device's backward (communication during compute);
  without it: one allreduce per step on the device lane;
- under --dist mpi with several devices per process: every device's allreduces hold a
  `within process` span, and device 0's a `between processes` one too;
- --zero: every update of every device holds one `gather parameters` span (ZeRO-1's
  all-gather of the updated slices);
- FILE.timeline.svg parses as XML and draws a lane per device.
Prints "PASS: ..." and exits 0, or the first failure and exits 1.
"""
import argparse
import collections
import json
import sys
import xml.etree.ElementTree as ET

EPS = 1e-3  # microseconds: ts and dur come from integer nanoseconds


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check_nesting(spans, lane):
    open_spans = []
    for s in sorted(spans, key=lambda s: (s["ts"], -s["dur"])):
        begin, end = s["ts"], s["ts"] + s["dur"]
        while open_spans and begin >= open_spans[-1][1] - EPS:
            open_spans.pop()
        if open_spans and end > open_spans[-1][1] + EPS:
            fail(f"lane {lane}: '{s['name']}' [{begin:.3f}, {end:.3f}] straddles the end of "
                 f"'{open_spans[-1][2]}' (ends {open_spans[-1][1]:.3f})")
        open_spans.append((begin, end, s["name"]))


def overlaps(a, b):
    return a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--devices", type=int, required=True, help="per process")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=0, help="deterministic: chunks per step, over the job")
    parser.add_argument("--buckets", action="store_true")
    parser.add_argument("--zero", action="store_true", help="--zero 1: a parameter gather inside every update")
    args = parser.parse_args()

    with open(args.trace) as f:
        trace = json.load(f)
    if not isinstance(trace.get("traceEvents"), list):
        fail("no traceEvents list")
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    for e in spans:
        for key in ("name", "cat", "pid", "tid", "ts", "dur"):
            if key not in e:
                fail(f"an event lacks '{key}': {e}")
        if e["dur"] < 0:
            fail(f"negative duration: {e}")
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}

    lanes = collections.defaultdict(list)
    for s in spans:
        lanes[(s["pid"], s["tid"])].append(s)
    for lane, lane_spans in lanes.items():
        check_nesting(lane_spans, f"{lane} ({names.get(lane, '?')})")

    if sorted({s["pid"] for s in spans}) != list(range(args.processes)):
        fail(f"processes {sorted({s['pid'] for s in spans})}, expected 0..{args.processes - 1}")
    count = collections.Counter((s["pid"], s["tid"], s["name"]) for s in spans)
    for pid in range(args.processes):
        if count[(pid, 0, "iteration")] != args.steps:
            fail(f"rank {pid}: {count[(pid, 0, 'iteration')]} iterations, expected {args.steps}")
        iterations = [s for s in lanes[(pid, 0)] if s["name"] == "iteration"]
        for it in iterations:
            inside = {s["name"] for s in lanes[(pid, 0)] if s is not it and it["ts"] <= s["ts"] and
                      s["ts"] + s["dur"] <= it["ts"] + it["dur"] + EPS}
            if not {"data", "step", "guard"} <= inside:
                fail(f"rank {pid}: iteration {it.get('args')} holds only {sorted(inside)}")
        for d in range(args.devices):
            device_lane, comm_lane = 2 * d + 1, 2 * d + 2
            where = f"rank {pid} device {d} ({names.get((pid, device_lane), '?')})"
            per_step = args.chunks // (args.processes * args.devices) if args.chunks else 1
            for name, expected in (("forward", args.steps * per_step), ("backward", args.steps * per_step),
                                   ("update", args.steps)):
                if count[(pid, device_lane, name)] != expected:
                    fail(f"{where}: {count[(pid, device_lane, name)]} {name} spans, expected {expected}")
            if args.chunks:
                if count[(pid, device_lane, "tree sum")] != args.steps:
                    fail(f"{where}: {count[(pid, device_lane, 'tree sum')]} tree sums, expected {args.steps}")
            elif args.buckets:
                buckets = [s for s in lanes[(pid, comm_lane)] if s["name"] == "bucket allreduce"]
                if len(buckets) < 2 * args.steps or len(buckets) % args.steps:
                    fail(f"{where}: {len(buckets)} bucket allreduces for {args.steps} steps")
                backwards = [s for s in lanes[(pid, device_lane)] if s["name"] == "backward"]
                during = sum(any(overlaps(b, bw) for bw in backwards) for b in buckets)
                if during == 0:
                    fail(f"{where}: no bucket allreduce overlaps a backward")
                print(f"{where}: {during} of {len(buckets)} bucket allreduces overlap backward")
            elif count[(pid, device_lane, "allreduce")] != args.steps:
                fail(f"{where}: {count[(pid, device_lane, 'allreduce')]} allreduces, expected {args.steps}")
            if args.processes > 1 and args.devices > 1:
                levels = ["within process"] + (["between processes"] if d == 0 else [])
                for level in levels:
                    if count[(pid, device_lane, level)] < args.steps:
                        fail(f"{where}: {count[(pid, device_lane, level)]} '{level}' spans in {args.steps} steps")
            if args.zero:
                updates = [s for s in lanes[(pid, device_lane)] if s["name"] == "update"]
                gathers = [s for s in lanes[(pid, device_lane)] if s["name"] == "gather parameters"]
                inside = sum(any(u["ts"] <= g["ts"] and g["ts"] + g["dur"] <= u["ts"] + u["dur"] + EPS
                                 for u in updates) for g in gathers)
                if len(gathers) != args.steps or inside != args.steps:
                    fail(f"{where}: {len(gathers)} parameter gathers, {inside} inside an update, expected "
                         f"{args.steps}")

    svg_file = args.trace[:-len(".json")] + ".timeline.svg"
    svg = ET.parse(svg_file).getroot()
    labels = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    device_labels = [t for t in labels if t and "cpu:" in t]
    if len(device_labels) != args.processes * args.devices:
        fail(f"{svg_file}: device lanes {device_labels}, expected {args.processes * args.devices}")
    print(f"PASS: {args.trace}: {len(spans)} spans in {len(lanes)} lanes nest, every device and rank traced, "
          f"{svg_file} draws {len(device_labels)} device lanes")


if __name__ == "__main__":
    main()
