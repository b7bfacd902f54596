#!/usr/bin/env python3
"""Step time and compute time per step from a `dptrain train --trace` file (under mpirun:
every rank's lanes in one file), for bench/model_check.sh.

For every rank and every step (the host lane's `step` span, inside its `iteration` span,
which adds the wait for the batch and the divergence guard):
  W (exposed communication) = the time after the end of its last `backward` span (over
      the rank's devices) covered by communication spans (category "communication":
      `allreduce`, `bucket allreduce`, `buffers`, `within process`, `between processes`,
      `gather parameters`, ...; or a name naming a collective), overlapping spans counted
      once: with --zero 1 the optimizer's compute between the reduce-scatter and the
      parameter gather stays in C
  C (compute) = iteration - W
A step's compute is the largest C over the ranks (the ring waits for the slowest); its
time is rank 0's iteration. Prints the medians over the steps after the first --skip:
  "T_SECONDS C_SECONDS STEPS"
  usage: trace_step_times.py TRACE.json --skip N
"""
import argparse
import json
import statistics

COMM = ("allreduce", "buffers", "gather", "scatter", "alltoall", "broadcast", "process")


def covered(intervals):
    """Length of the union of (begin, end) intervals."""
    total, reach = 0.0, None
    for b, e in sorted(intervals):
        if reach is None or b > reach:
            total += e - b
            reach = e
        elif e > reach:
            total += e - reach
            reach = e
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--skip", type=int, default=0)
    args = ap.parse_args()
    data = json.load(open(args.trace))
    events = [e for e in (data["traceEvents"] if isinstance(data, dict) else data) if e.get("ph") == "X"]
    by_rank = {}
    for e in events:
        by_rank.setdefault(e["pid"], []).append(e)
    per_rank = {}
    for rank, evs in by_rank.items():
        iterations = sorted((e for e in evs if e["name"] == "iteration"), key=lambda e: e["ts"])
        rows = []
        for it in iterations:
            start, end = it["ts"], it["ts"] + it["dur"]
            inside = [e for e in evs if start <= e["ts"] < end and e is not it]
            backward = [e["ts"] + e["dur"] for e in inside if e["name"] == "backward"]
            if not backward:
                continue
            b_end = max(backward)
            comm = [(max(e["ts"], b_end), e["ts"] + e["dur"]) for e in inside
                    if e.get("cat") == "communication" or any(k in e["name"] for k in COMM)]
            wait = covered([(b, e) for b, e in comm if e > b])
            rows.append((it["dur"] / 1e6, (it["dur"] - wait) / 1e6))
        per_rank[rank] = rows
    steps = min(len(r) for r in per_rank.values())
    t = [per_rank[0][k][0] for k in range(args.skip, steps)]
    c = [max(per_rank[r][k][1] for r in per_rank) for k in range(args.skip, steps)]
    if not t:
        raise SystemExit(f"trace_step_times: only {steps} steps in {args.trace}, --skip {args.skip}")
    print(f"{statistics.median(t):.6f} {statistics.median(c):.6f} {len(t)}")


if __name__ == "__main__":
    main()
