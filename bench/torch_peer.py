#!/usr/bin/env python3
"""Times torch._grouped_mm (CUTLASS's grouped kernels) on bench/cases.tsv, the
peer kiln's benchmark compares against in the same call.

Same method as bench/kiln_bench.c: bf16 random normal data, a correctness
check first, 5 warm-ups, then the median of N timed calls with CUDA events.
Prints one JSON object per line: {"case", "op", "ms", "tflops"}.
"""
import argparse
import json
import statistics
import sys

import torch


def load_cases(path):
    cases = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, g, tpg, k, n, dist = line.split("\t")
            cases.append((name, int(g), int(tpg), int(k), int(n), dist))
    return cases


def group_sizes(g, tpg, dist):
    """Must match kiln_bench.c's sizes exactly."""
    total = g * tpg
    if dist != "skew":
        return [tpg] * g
    w = [0.0 if i in (16, 17) else 1.0 / (i + 1) ** 1.2 for i in range(g)]
    s = sum(w)
    m = [int(total * wi / s) for wi in w]
    m[0] += total - sum(m)
    return m


def time_ms(fn, reps, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def rel_err(out, ref):
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="bench/cases.tsv")
    ap.add_argument("--ops", default="fprop,dgrad,wgrad")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    ops = args.ops.split(",")
    for name, g, tpg, k, n, dist in load_cases(args.cases):
        if args.only and name not in args.only.split(","):
            continue
        sizes = group_sizes(g, tpg, dist)
        t = sum(sizes)
        offs = torch.tensor(sizes, device=dev, dtype=torch.int32).cumsum(0).to(torch.int32)
        x = torch.randn(t, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(g, n, k, device=dev, dtype=torch.bfloat16) * 0.05
        dy = torch.randn(t, n, device=dev, dtype=torch.bfloat16)
        flops = 2.0 * t * n * k
        for op in ops:
            if op == "fprop":
                fn = lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
                g0 = sizes[0]
                ref = x[:g0].float() @ w[0].float().t()
                err = rel_err(fn()[:g0], ref)
            elif op == "dgrad":
                fn = lambda: torch._grouped_mm(dy, w, offs=offs)
                g0 = sizes[0]
                ref = dy[:g0].float() @ w[0].float()
                err = rel_err(fn()[:g0], ref)
            else:
                fn = lambda: torch._grouped_mm(dy.t(), x, offs=offs)
                g0 = sizes[0]
                ref = dy[:g0].float().t() @ x[:g0].float()
                err = rel_err(fn()[0], ref)
            if not err < 2e-2:
                print(json.dumps({"case": name, "op": op, "error": f"rel err {err:.3g}"}), flush=True)
                continue
            ms = time_ms(fn, args.reps)
            print(json.dumps({"case": name, "op": op, "ms": ms, "tflops": flops / ms / 1e9,
                              "rel_err": err}), flush=True)
        del x, w, dy
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
