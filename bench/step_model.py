#!/usr/bin/env python3
"""Step-time model of data-parallel training: alpha-beta links + measured compute.

Subcommands (python3 standard library only):
  fit      least-squares fit of latency alpha and inverse bandwidth beta to link_sweep's
           JSON lines (bench/link_fit.sh runs it for every shaped link)
  predict  predicted step time of one configuration (ranks, devices per rank, buckets and
           overlap, compression, ZeRO) from the fitted links and a measured compute time
  project  the projection table for ResNet-18 / ResNet-50 on 8 .. 1024 H100s (a MODEL,
           not a measurement; the link and compute figures are published ones, cited)

The equations (also in bench/README.md, "step_model.py"):

  Ring allreduce of n bytes over N ranks on a link (alpha s, beta s/byte):
      A_N(n) = 2 (N-1) (alpha + n beta / N)
  Reduce-scatter and all-gather are each half of it:
      RS_N(n) = AG_N(n) = (N-1) (alpha + n beta / N)
  bf16 compression: the bytes between processes are halved (n -> n/2 in the
      inter-process terms; the sum is in fp32, the conversion cost is neglected).
  Several devices per process (hierarchical, D devices, P processes):
      H(n) = A_D^mem(n) + A_P^link(n) + (D-1) (alpha_m + n beta_m)
      (ring allreduce inside the process over memory copies, ring among the processes
      by one thread per process, broadcast inside the process)
  Buckets and overlap: gradients are cut into buckets g_1..g_k (last layers first, as
      dptrain's assign_buckets does). Bucket i is ready at r_i, while backward runs:
          r_i = C (1 - f_o) - f_b C (1 - cumbytes_i / G)
      (backward produces gradient bytes at a uniform rate over its f_b C seconds, ending
      at C (1 - f_o); the last bucket is ready when backward ends). One communication
      thread sends the buckets in order:
          e_0 = 0,  e_i = max(r_i, e_{i-1}) + A(g_i)
      and the step ends after the last allreduce and the optimizer:
          T = max(C (1 - f_o), e_k) + f_o C
      With --bucket-mb 0 there is one bucket, ready at the end of backward:
          T = C + A(G)  (for f_o = 0).
  ZeRO-1: the buckets are reduce-scattered (RS instead of A above), the optimizer runs
      on 1/N of the parameters, and the parameters are all-gathered after it, exposed:
          T = max(C (1 - f_o), e_k) + f_o C / N + AG_N(G)
  Links shaped by tc tbf (link model "local"), a token bucket: rate r, burst b (as
      bench/netns_links.sh sets them), latency l per round of messages (the sweep's 1 KB
      allreduce / 2). A collective in which each host sends h bytes in k rounds, after the
      link idled s seconds, takes
          k l + max(0, h - tokens) / rate,   tokens = min(b, tokens_left + s r)
      (the bucket is full when the step starts); rate = r, except for a transfer queued
      behind the previous one (ready before the link was free: s = 0), which runs at the
      sweep's largest message's rate, the link's back-to-back rate. For a ring allreduce
      h = 2(P-1)/P n and k = 2(P-1); for a reduce-scatter or all-gather half of both.
  C is the compute time of one step of one device with its share of the global batch,
      measured (bench/model_check.sh measures it two ways: from the run's own trace, the
      step minus the wait for gradient communication after backward; and from runs with
      no communication under the same sharing of the machine's cores).
  Link models: "global" uses the link's one alpha/beta (bench/link_fit.sh); "local" the
      token bucket above for tbf links, and for the others (unshaped veth, shared memory,
      the delay relay alone) the sweep's time at the same bytes per host: the straight
      line through the two measured sizes around it, plus l per round beyond the sweep's 2
      (these links are not one line in the message size, bench/README.md).
"""
import argparse
import json
import math
import re
import sys

# ---------------------------------------------------------------------------- models
# Parameter tensors in dptrain's registration order (conv weight, conv bias, BN gamma, BN
# beta, ...), Fashion-MNIST input (1x28x28, 10 classes); totals checked against the wire
# volume mpi_overlap measured (bench/README.md: 516,272 and 44,703,272 gradient bytes).


def _conv(i, o, k, bias=True):
    return [o * i * k * k] + ([o] if bias else [])


def lenet_params():
    return [20 * 1 * 3 * 3, 20, 50 * 20 * 5 * 5, 50, 128 * 800, 128, 10 * 128, 10]


def resnet18_params(in_channels=1, classes=10, bias=True):
    p = _conv(in_channels, 64, 3, bias) + [64, 64]

    def residual(i, o, one_by_one):
        r = _conv(i, o, 3, bias) + [o, o] + _conv(o, o, 3, bias) + [o, o]
        return r + (_conv(i, o, 1, bias) if one_by_one else [])

    for i, o, first in [(64, 64, True), (64, 128, False), (128, 256, False), (256, 512, False)]:
        p += residual(i, o, not first) + residual(o, o, False)
    return p + [512 * classes, classes]


MODELS = {"lenet": lenet_params, "resnet18": resnet18_params}


def assign_buckets(param_counts, bucket_bytes):
    """dptrain's GradientBucketer::assign_buckets: last parameter first; a new bucket once
    the current one holds >= bucket_bytes (0: one bucket). Returns bucket sizes in bytes."""
    buckets = []
    filled = None
    for count in reversed(param_counts):
        if filled is None or (bucket_bytes > 0 and filled >= bucket_bytes):
            buckets.append(0)
            filled = 0
        buckets[-1] += 4 * count
        filled += 4 * count
    return buckets


def equal_buckets(total_bytes, bucket_bytes):
    if bucket_bytes <= 0 or bucket_bytes >= total_bytes:
        return [total_bytes]
    k = int(total_bytes // bucket_bytes)
    rest = total_bytes - k * bucket_bytes
    return [bucket_bytes] * k + ([rest] if rest > 0 else [])


# ---------------------------------------------------------------------------- pieces


def ring_allreduce(n, ranks, alpha, beta):
    if ranks <= 1 or n <= 0:
        return 0.0
    return 2 * (ranks - 1) * (alpha + n * beta / ranks)


def ring_half(n, ranks, alpha, beta):
    """Reduce-scatter or all-gather alone."""
    if ranks <= 1 or n <= 0:
        return 0.0
    return (ranks - 1) * (alpha + n * beta / ranks)


def step_time(compute_s, buckets, comm, zero_allgather_s=0.0, f_b=2 / 3, f_o=0.0, zero_ranks=1):
    """The event model: buckets (bytes, launch order), comm(bytes, idle seconds before it)
    -> seconds; zero_allgather_s, seconds or a function of the idle seconds before it.
    Returns (step seconds, exposed communication seconds)."""
    total = float(sum(buckets))
    end_backward = compute_s * (1 - f_o)
    start_backward = end_backward - f_b * compute_s
    e = 0.0
    cum = 0.0
    for i, g in enumerate(buckets):
        cum += g
        ready = end_backward if i == len(buckets) - 1 else start_backward + f_b * compute_s * cum / total
        e = max(ready, e) + comm(g, max(ready - e, 0.0))
    optimizer = f_o * compute_s / max(zero_ranks, 1)
    t = max(end_backward, e) + optimizer
    if callable(zero_allgather_s):
        zero_allgather_s = zero_allgather_s(max(end_backward - e, 0.0) + optimizer)
    t += zero_allgather_s
    return t, t - compute_s


class TokenBucket:
    """A tc tbf link as the step sees it: `rate` bit/s, a bucket of `burst` bytes that refills
    at the rate while the link idles (full at the step's start: the forward pass and the
    compute before it idle the link longer than a refill takes, 10 ms at 100 Mbit/s), and
    `latency` seconds per round of messages (the sweep's smallest allreduce / 2). A host
    sending h bytes after `idle` seconds takes rounds latency + max(0, h - tokens) 8 / rate."""

    def __init__(self, rate_bit_s, burst_bytes, latency_s, sustained_bit_s):
        self.rate, self.burst, self.latency = rate_bit_s / 8.0, burst_bytes, latency_s
        self.sustained = min(sustained_bit_s / 8.0, self.rate)
        self.tokens = burst_bytes

    def send(self, host_bytes, rounds, idle_s):
        self.tokens = min(self.burst, self.tokens + idle_s * self.rate)
        # A transfer queued behind the previous one (ready before the link was free) keeps
        # the link busy without a pause: the rate of the sweep's largest message, a long
        # busy link, holds for it, not the shaped one.
        rate = self.rate if idle_s > 0 else self.sustained
        paid = max(host_bytes - self.tokens, 0.0)
        self.tokens = max(self.tokens - host_bytes, 0.0)
        return rounds * self.latency + paid / rate


def local_link(link, n):
    """alpha and beta of the straight line through the two measured sweep sizes around n
    (the nearest two when n lies outside the sweep): the link as this message sees it.
    The shaped links here are not one line in the message size (a token bucket's burst
    passes free after an idle moment, large transfers slow down; bench/README.md), so the
    line's alpha may even be negative: only the time it gives near n means anything."""
    pts = sorted(link.get("sweep_points") or [])
    if len(pts) < 2 or n <= 0:
        return link["alpha_s"], link["beta_s_per_byte"]
    k = next((i for i, (m, _) in enumerate(pts) if m >= n), len(pts) - 1)
    (m1, t1), (m2, t2) = pts[max(k - 1, 0)], pts[max(k, 1)]
    slope = (t2 - t1) / (m2 - m1)
    steps = 2 * (link["ranks"] - 1)  # t = 2(N-1)(alpha + m beta / N) on the sweep's N ranks
    return (t1 - slope * m1) / steps, slope * link["ranks"] / steps


def sweep_time(link, host_bytes, rounds):
    """The local link model: the time of a collective in which every host sends host_bytes
    in `rounds` rounds of messages, read off the 2-rank sweep at the size whose allreduce
    sends as many bytes per host (2 rounds), plus the latency of the rounds beyond 2. The
    sweep starts every allreduce after an idle moment, as a training step starts its
    communication after computing, so a token bucket's burst is in it."""
    pts = link.get("sweep_points")
    if not pts or host_bytes <= 0:
        return 0.0
    alpha, beta = local_link(link, host_bytes)
    latency = pts[0][1] / 2  # one round of the smallest message
    return max(2 * alpha + host_bytes * beta, 0.0) + max(rounds - 2, 0) * latency


def sustained_rate(link):
    """Bits per second of the sweep's largest message (2 ranks: a host sends as many bytes)."""
    n, t = max(link["sweep_points"])
    return 8 * n / t


def predict(cfg, links):
    """cfg: dict with processes, devices, compute_s, link, bucket_mb, compression, zero,
    model or grad_bytes, f_b, f_o, intra link (memory copies) name."""
    P = int(cfg["processes"])
    D = int(cfg.get("devices", 1))
    link = links[cfg["link"]]
    alpha, beta = link["alpha_s"], link["beta_s_per_byte"]
    mem = links.get(cfg.get("intra", "memory"), {"alpha_s": 5e-6, "beta_s_per_byte": 1 / 5e9})
    am, bm = mem["alpha_s"], mem["beta_s_per_byte"]
    comp = 0.5 if cfg.get("compression", "none") == "bf16" else 1.0
    zero = int(cfg.get("zero", 0))
    bucket_bytes = int(float(cfg.get("bucket_mb", 0)) * 1024 * 1024)
    if cfg.get("model") in MODELS:
        buckets = assign_buckets(MODELS[cfg["model"]](), bucket_bytes)
    else:
        buckets = equal_buckets(int(cfg["grad_bytes"]), bucket_bytes)
    grad_bytes = sum(buckets)

    local = cfg.get("link_model", "global") == "local"
    bucket = (TokenBucket(link["rate_bit_s"], link["burst_bytes"], link["t_smallest_s"] / 2, sustained_rate(link))
              if local and link.get("rate_bit_s") else None)

    def inter(n, idle):
        # a ring allreduce: every host sends 2(P-1)/P of the bytes in 2(P-1) rounds; a
        # reduce-scatter or all-gather half of that
        rounds = (1 if zero else 2) * (P - 1)
        host_bytes = rounds * comp * n / P
        if bucket:
            return bucket.send(host_bytes, rounds, idle)
        if local:  # as the sweep measured a host sending as many bytes after an idle moment
            return sweep_time(link, host_bytes, rounds)
        return (ring_half if zero else ring_allreduce)(comp * n, P, alpha, beta)

    def comm(n, idle=0.0):
        t = inter(n, idle)
        if D > 1:
            t += ring_allreduce(n, D, am, bm) + (D - 1) * (am + n * bm)
        return t

    allgather = 0.0
    if zero:  # the parameters, fp32, after the optimizer
        def allgather(idle):
            host_bytes = (P - 1) * grad_bytes / P
            if bucket:  # it waits for the optimizer's slice: never queued behind the reduce-scatter
                return bucket.send(host_bytes, P - 1, max(idle, 1e-6))
            if local:
                return sweep_time(link, host_bytes, P - 1)
            return ring_half(grad_bytes, P, alpha, beta)
    t, exposed = step_time(float(cfg["compute_s"]), buckets, comm, allgather, float(cfg.get("f_b", 2 / 3)),
                           float(cfg.get("f_o", 0.0)), P * D if zero else 1)
    return {"step_s": t, "exposed_comm_s": exposed, "buckets": len(buckets), "grad_bytes": grad_bytes}


# ---------------------------------------------------------------------------- fit


def fit(points, ranks, min_bytes=0, latency_from_smallest=False):
    """Least squares of t = a + b n on the sizes >= min_bytes with weights 1/t^2 (relative
    residuals: 64 KB and 64 MB count alike), a >= 0; alpha = a / (2(N-1)),
    beta = b N / (2(N-1)). With latency_from_smallest, a is the smallest message's time
    (the latency as measured, 1 KB: its bytes cost nothing next to it) and only b is
    fitted. Residuals are reported over every size, fitted or not."""
    used = [(n, t) for n, t in points if n >= min_bytes] or points
    sw = swx = swy = swxx = swxy = 0.0
    for n, t in used:
        w = 1.0 / (t * t)
        sw += w
        swx += w * n
        swy += w * t
        swxx += w * n * n
        swxy += w * n * t
    if latency_from_smallest:
        a = points[0][1]
        b = max((swxy - a * swx) / swxx, 0.0)
    else:
        det = sw * swxx - swx * swx
        b = (sw * swxy - swx * swy) / det if det > 0 else swxy / swxx
        a = (swy - b * swx) / sw
        if a < 0:  # the constrained optimum lies on a = 0: the slope alone
            a = 0.0
            b = swxy / swxx
    steps = 2 * (ranks - 1)
    alpha = a / steps
    beta = b * ranks / steps

    def rel(pts):
        return [((a + b * n) - t) / t for n, t in pts]

    fitted, every = rel(used), rel(points)
    return {"alpha_s": alpha, "beta_s_per_byte": beta,
            "rms_rel_residual": math.sqrt(sum(r * r for r in fitted) / len(fitted)),
            "max_rel_residual": max(abs(r) for r in fitted),
            "residuals_by_size": {str(n): round(r, 4) for (n, _), r in zip(points, every)},
            "fit_min_bytes": min_bytes, "t_smallest_s": points[0][1]}


def cmd_fit(args):
    fits = {}
    if args.out and args.append:
        try:
            with open(args.out) as f:
                fits = json.load(f).get("links", {})
        except FileNotFoundError:
            pass
    for spec in args.sweeps:
        name, path = spec.split("=", 1)
        rows = [json.loads(line) for line in open(path) if line.strip()]
        ranks = rows[0]["ranks"]
        points = sorted((r["bytes"], r["median_s"]) for r in rows)
        f = fit(points, ranks, args.min_bytes, latency_from_smallest=True)
        f.update({"ranks": ranks, "points": len(points), "min_bytes": points[0][0], "max_bytes": points[-1][0],
                  "sweep": path, "sweep_points": points})
        shaped = re.match(r"tbf-(\d+(?:\.\d+)?)(g|m|k)bit", name)
        if shaped:  # as bench/netns_links.sh shapes it: burst max(128 KiB, 1 ms of the rate)
            rate = float(shaped.group(1)) * {"g": 1e9, "m": 1e6, "k": 1e3}[shaped.group(2)]
            f.update({"rate_bit_s": rate, "burst_bytes": max(131072, int(rate / 8 / 1000))})
        fits[name] = f
    print(f"{'link':<24} {'alpha_us':>9} {'beta_Gbit/s':>11} {'rms_resid_%':>11} {'max_resid_%':>11} "
          f"{'t(1KB)_us':>9}  residual by size (%, 1KB..64MB; fitted from {args.min_bytes} B)")
    for name, f in fits.items():
        res = " ".join(f"{100 * r:+.0f}" for r in f["residuals_by_size"].values())
        print(f"{name:<24} {f['alpha_s'] * 1e6:9.1f} {8 / f['beta_s_per_byte'] / 1e9:11.3f} "
              f"{100 * f['rms_rel_residual']:11.1f} {100 * f['max_rel_residual']:11.1f} "
              f"{f['t_smallest_s'] * 1e6:9.0f}  {res}")
    shaped = {name: f for name, f in fits.items() if f.get("rate_bit_s")}
    if shaped:
        print()
        print("token buckets (the tbf links as predict's local model sees them; residuals: the bucket model, full "
              "after the sweep's idle gap, against the sweep)")
        print(f"{'link':<24} {'rate_Gbit/s':>11} {'burst_KiB':>9} {'l_us':>7} {'back-to-back_Gbit/s':>19}  "
              f"residual by size (%, 1KB..64MB)")
        for name, f in shaped.items():
            res = []
            for n, t in f["sweep_points"]:
                model = TokenBucket(f["rate_bit_s"], f["burst_bytes"], f["t_smallest_s"] / 2, f["rate_bit_s"])
                res.append(f"{100 * (model.send(n, 2, 1.0) - t) / t:+.0f}")
            print(f"{name:<24} {f['rate_bit_s'] / 1e9:11.3f} {f['burst_bytes'] / 1024:9.0f} "
                  f"{f['t_smallest_s'] / 2 * 1e6:7.1f} {sustained_rate(f) / 1e9:19.3f}  {' '.join(res)}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"model": "t(n) = 2(N-1)(alpha + n beta / N): 2(N-1) alpha = the smallest message's time, "
                                f"beta by least squares of relative residuals on the sizes >= {args.min_bytes} bytes",
                       "links": fits}, f, indent=1)
            f.write("\n")


def cmd_predict(args):
    links = json.load(open(args.links))["links"]
    if args.intra_alpha_us is not None:
        links["memory"] = {"alpha_s": args.intra_alpha_us * 1e-6, "beta_s_per_byte": 1 / (args.intra_gbyte_s * 1e9)}
    cfg = {"processes": args.processes, "devices": args.devices, "compute_s": args.compute_s, "link": args.link,
           "bucket_mb": args.bucket_mb, "compression": args.compression, "zero": args.zero, "f_b": args.f_b,
           "f_o": args.f_o, "link_model": args.link_model}
    if args.grad_bytes:
        cfg["grad_bytes"] = args.grad_bytes
    else:
        cfg["model"] = args.model
    r = predict(cfg, links)
    if args.json:
        print(json.dumps(r))
    else:
        print(f"predicted step {r['step_s'] * 1e3:.2f} ms (compute {args.compute_s * 1e3:.2f} ms, exposed "
              f"communication {r['exposed_comm_s'] * 1e3:.2f} ms, {r['buckets']} buckets, "
              f"{r['grad_bytes']} gradient bytes)")


# ---------------------------------------------------------------------------- project

SOURCES = {
    "nvlink": ("NVLink 4 on H100 SXM: 18 links, 900 GB/s per GPU (both directions together), so 450 GB/s "
               "each way; as the MLCommons system description of a DGX H100 states it ('18x 4th Gen NVLink, 900GB/s')",
               "https://github.com/mlcommons/mlperf_inference_test_submissions_v5.0/blob/main/closed/Google/"
               "results/DGX-H100_H100-SXM-80GBx8_TRT/summary.html (NVIDIA DGX H100, 8x H100-SXM-80GB) ; "
               "'900 GB/s of bidirectional bandwidth': https://github.com/scaleway/docs-content/blob/main/pages/gpu/"
               "reference-content/migration-h100.mdx"),
    "ib": ("InfiniBand NDR: 400 Gb/s per port = 50 GB/s each way, one ConnectX-7 per GPU "
           "(DGX H100 / XE9680 systems list '8x 400Gb Infiniband')",
           "https://docs.nvidia.com/networking/display/mlnxofedv590560107/release+notes (ConnectX-7: NDR) ; "
           "https://github.com/mlcommons/inference_results_v3.1/blob/main/closed/Dell/systems/XE9680_H100_SXM_80GBx8_TRT.json"),
    "alpha": ("per-hop latency of NCCL's Simple protocol (the one large gradient buckets use): ~6 us "
              "(LL ~1 us, LL128 ~2 us)",
              "https://the-dsvolk.github.io/ai-perf/ai-infra/nccl-perf.html ; see also Hu et al., "
              "'Demystifying NCCL', https://arxiv.org/abs/2507.04786"),
    "compute": ("ResNet-50 v1.5 training, 1 GPU, mixed precision, batch 256: 2470 img/s on an A100 80GB "
                "(NVIDIA DeepLearningExamples; no H100 row is published there): used as a LOWER bound of an "
                "H100's speed, which makes communication look relatively cheaper than on a real H100. "
                "MLPerf Training v3.0 (8x H100, ResNet-50, 13.466 min to train) is listed for reference only",
                "https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/ConvNets/"
                "resnet50v1.5/README.md ; https://developer.nvidia.com/deep-learning-performance-training-inference/training"),
    "flops": ("ResNet-18 compute = ResNet-50's x 1.8/3.8 (forward GFLOPs of the two in He et al. 2015, Table 1)",
              "https://arxiv.org/abs/1512.03385"),
    "params": ("parameters: ResNet-18 11.69M, ResNet-50 25.56M (torchvision ImageNet models)",
               "https://pytorch.org/vision/stable/models.html"),
}


def cmd_project(args):
    nvl_beta = 1 / (args.nvlink_gbyte_s * 1e9)
    ib_beta = 1 / (args.ib_gbit_s / 8 * 1e9)
    a_nvl = args.nvlink_alpha_us * 1e-6
    a_ib = args.ib_alpha_us * 1e-6
    D = args.gpus_per_node
    models = [("ResNet-18", 11_689_512, 1.8 / 3.8), ("ResNet-50", 25_557_032, 1.0)]
    print("=" * 118)
    print("MODEL, not a measurement: projected step time of data-parallel ResNet training on H100s")
    print("=" * 118)
    print(f"per-GPU batch {args.batch}; compute per step C = batch / ({args.img_s:.0f} img/s x model factor); "
          f"{D} GPUs per node over NVLink ({args.nvlink_gbyte_s:.0f} GB/s each way, alpha {args.nvlink_alpha_us} us), "
          f"nodes over InfiniBand NDR ({args.ib_gbit_s:.0f} Gbit/s per GPU, alpha {args.ib_alpha_us} us); "
          f"fp32 gradients; {args.bucket_mb:g} MB buckets overlapped with backward (f_b = 2/3)")
    print("columns: efficiency = C / T (1.00 = perfect scaling) for")
    print("  flat      one ring over all GPUs (inter-node hops bound it: IB alpha and beta for every step)")
    print("  flat16    the same with bf16 gradients (half the bytes)")
    print("  hier1     dptrain's --devices design: ring inside the node, ring of the nodes over ONE NIC per node,")
    print("            broadcast inside the node")
    print("  hier2D    reduce-scatter in the node, each GPU's 1/8 shard allreduced over its own NIC, all-gather in the node")
    print("  hier2D16  the same with bf16 between nodes")
    print("  zero1     ZeRO-1 over hier2D16: shards reduce-scattered (overlapped), parameters all-gathered after the")
    print("            optimizer (exposed); saves optimizer memory, the MB column: SGD-momentum state per GPU, full -> ZeRO-1")
    header = (f"{'model':<10} {'GPUs':>5} {'nodes':>5} {'C_ms':>7} {'flat':>6} {'flat16':>6} {'hier1':>6} "
              f"{'hier2D':>6} {'hier2D16':>8} {'zero1':>6} {'T_best_ms':>9} {'best':>8} {'opt_MB/GPU':>14}")
    print(header)
    print("-" * len(header))
    for name, params, factor in models:
        grad = 4 * params
        C = args.batch / (args.img_s / factor)
        buckets = equal_buckets(grad, int(args.bucket_mb * 1024 * 1024))
        n_gpus = 8
        while n_gpus <= 1024:
            nodes = max(1, n_gpus // D)
            d = min(D, n_gpus)

            def flat(n, comp=1.0):
                if nodes == 1:
                    return ring_allreduce(comp * n, d, a_nvl, nvl_beta)
                return ring_allreduce(comp * n, n_gpus, a_ib, ib_beta)

            def hier1(n, idle=0.0):  # the projection has no token bucket: idle unused
                return (ring_allreduce(n, d, a_nvl, nvl_beta) + ring_allreduce(n, nodes, a_ib, ib_beta)
                        + a_nvl + n * nvl_beta)

            def hier2d(n, comp=1.0, zero=False):
                intra = ring_half(n, d, a_nvl, nvl_beta)
                shard = comp * n / d
                if zero:  # reduce-scatter only, across nodes too
                    return intra + ring_half(shard, nodes, a_ib, ib_beta)
                return 2 * intra + ring_allreduce(shard, nodes, a_ib, ib_beta)

            variants = {
                "flat": lambda n, idle=0.0: flat(n),
                "flat16": lambda n, idle=0.0: flat(n, 0.5),
                "hier1": hier1,
                "hier2D": lambda n, idle=0.0: hier2d(n),
                "hier2D16": lambda n, idle=0.0: hier2d(n, 0.5),
            }
            times = {k: step_time(C, buckets, f)[0] for k, f in variants.items()}
            # ZeRO-1: all-gather of the parameters (fp32) after the optimizer: in the node and across nodes.
            ag = ring_half(grad, d, a_nvl, nvl_beta) + ring_half(grad / d, nodes, a_ib, ib_beta)
            times["zero1"] = step_time(C, buckets, lambda n, idle=0.0: hier2d(n, 0.5, True), ag)[0]
            best = min(times, key=times.get)
            state_full = 4 * params / 1e6
            state_zero = state_full / n_gpus
            print(f"{name:<10} {n_gpus:>5} {nodes:>5} {C * 1e3:7.1f} "
                  + " ".join(f"{C / times[k]:{6 if k != 'hier2D16' else 8}.3f}" for k in
                             ["flat", "flat16", "hier1", "hier2D", "hier2D16", "zero1"])
                  + f" {times[best] * 1e3:9.1f} {best:>8} {state_full:6.0f}->{state_zero:6.2f}")
            n_gpus *= 2
    print("-" * len(header))
    print("Sources of the figures (published; the model's equations are in bench/README.md):")
    for key, (what, url) in SOURCES.items():
        print(f"  [{key}] {what}\n         {url}")
    print("Caveats: peak link figures (what NCCL reaches is below them), no congestion, no stragglers, no data-loading")
    print("stalls; backward assumed to produce gradient bytes uniformly; compute from an A100 figure (see [compute]).")


# ---------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit", help="fit alpha and beta to link_sweep JSON lines")
    f.add_argument("sweeps", nargs="+", help="NAME=FILE.jsonl (link_sweep --json output)")
    f.add_argument("--out", help="write the fits here (JSON)")
    f.add_argument("--append", action="store_true", help="keep the links already in --out")
    f.add_argument("--min-bytes", type=int, default=65536,
                   help="fit the sizes from this one up (the gradient buckets' range); smaller ones are reported")
    f.set_defaults(func=cmd_fit)

    p = sub.add_parser("predict", help="predict one configuration's step time")
    p.add_argument("--links", required=True, help="the JSON link_fit.sh wrote")
    p.add_argument("--link", required=True, help="which link of it (e.g. tbf-1gbit)")
    p.add_argument("--processes", type=int, required=True)
    p.add_argument("--devices", type=int, default=1, help="devices per process")
    p.add_argument("--compute-s", type=float, required=True,
                   help="one device's step time with its share of the batch, no communication")
    p.add_argument("--model", choices=sorted(MODELS), default="lenet")
    p.add_argument("--grad-bytes", type=int, help="instead of --model: gradient bytes (equal buckets)")
    p.add_argument("--bucket-mb", type=float, default=0)
    p.add_argument("--compression", choices=["none", "bf16"], default="none")
    p.add_argument("--zero", type=int, choices=[0, 1], default=0)
    p.add_argument("--f-b", type=float, default=2 / 3, help="fraction of the step that is backward")
    p.add_argument("--f-o", type=float, default=0.0, help="fraction of the step that is the optimizer")
    p.add_argument("--intra-alpha-us", type=float, help="memory-copy link inside a process (with --devices)")
    p.add_argument("--intra-gbyte-s", type=float, default=5.0)
    p.add_argument("--link-model", choices=["global", "local"], default="global",
                   help="global: the link's one alpha/beta; local: a tbf link's token bucket, the other "
                        "links' sweep at the same bytes per host")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)

    j = sub.add_parser("project", help="projection table for H100 clusters (a MODEL, not a measurement)")
    j.add_argument("--batch", type=int, default=256, help="per-GPU batch")
    j.add_argument("--img-s", type=float, default=2470.0, help="ResNet-50 training img/s per GPU [compute]")
    j.add_argument("--gpus-per-node", type=int, default=8)
    j.add_argument("--nvlink-gbyte-s", type=float, default=450.0, help="each way [nvlink]")
    j.add_argument("--nvlink-alpha-us", type=float, default=6.0, help="[alpha]")
    j.add_argument("--ib-gbit-s", type=float, default=400.0, help="per GPU [ib]")
    j.add_argument("--ib-alpha-us", type=float, default=6.0, help="[alpha]")
    j.add_argument("--bucket-mb", type=float, default=25.0, help="(PyTorch DDP's default bucket)")
    j.set_defaults(func=cmd_project)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    sys.exit(main())
