#!/usr/bin/env python3
"""Times torch._grouped_mm (CUTLASS's grouped kernels) on bench/cases.tsv, the
peer kiln's benchmark compares against in the same call.

Same method and the same cases as bench/kiln_bench.c (whose --sizes gives
each case's group sizes): bf16 random normal data, a correctness check first, 5 warm-ups, then the median of N timed calls with CUDA events.
Prints one JSON object per line: {"case", "op", "ms", "tflops"}.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import torch


def load_cases(bench, path):
    """(name, K, N, sizes) of each case, from `kiln_bench --sizes`: the C
    code that reads the cases file and makes the group sizes for the
    benchmark and `kiln tune` makes them here too, so all time the same
    problems."""
    try:
        out = subprocess.run([bench, "--sizes", "--cases", path], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"torch_peer.py: cannot get the cases from {bench} --sizes: {e}")
    cases = []
    for line in out.splitlines():
        name, k, n, sizes = line.split("\t")
        cases.append((name, int(k), int(n), [int(m) for m in sizes.split(",")]))
    return cases


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
    ap.add_argument("--bench", default=os.environ.get("KILN_BENCH", "build/bench/kiln_bench"),
                    help="the kiln_bench binary (for the cases' group sizes)")
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    ops = args.ops.split(",")
    for name, k, n, sizes in load_cases(args.bench, args.cases):
        if args.only and name not in args.only.split(","):
            continue
        g = len(sizes)
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
