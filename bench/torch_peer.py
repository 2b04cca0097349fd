#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times torch._grouped_mm (CUTLASS's grouped kernels) on bench/cases.tsv, the
peer kiln's benchmark compares against in the same call.

Same method and the same cases as bench/kiln_bench.c (whose --sizes gives
each case's group sizes): bf16 random normal data, a correctness check first, 5 warm-ups, then the median of N timed calls with CUDA events.
Prints one JSON object per line: {"case", "op", "ms", "tflops"}.

--table KILN_JSON PEER_JSONL (no GPU, no torch needed): the per-case table
of kiln (kiln_bench --json) against this peer's results from the same call,
with each case's floor = max(FLOPs / 800 TFLOP/s, compulsory bytes /
4.3 TB/s) (docs/benchmarks.md; bytes: each operand read once, the output
written once) and the fraction of it each reaches (floor / time); for wgrad
also kiln's fraction of the write floor (dW written once at the write-only
bandwidth kiln_bench measured in the same call, a memset's, which on an
H200 is about 3.3 TB/s against 4.2 for copies).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

try:
    import torch
except ImportError:  # --table needs no torch
    torch = None


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def case_args(ap):
    """--bench (the kiln_bench whose --sizes gives the group sizes) and
    --cases, defaulting to this checkout's build and bench/cases.tsv: the
    arguments every benchmark script over the cases takes."""
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "kiln_bench"))
    ap.add_argument("--cases", default=os.path.join(ROOT, "bench", "cases.tsv"))


def case_operands(K, N, sizes, dev="cuda"):
    """The operands every benchmark over a case draws, in this order (so
    that one seed gives the same data everywhere): offs (int32 cumulative
    row ends), the groups' [start, end) row bounds, x [T,K], w [G,N,K]
    (scaled by 0.05) and dy [T,N], bf16 random normal."""
    G, T = len(sizes), sum(sizes)
    offs = torch.tensor(sizes, device=dev, dtype=torch.int32).cumsum(0).to(torch.int32)
    ends = offs.tolist()
    bounds = list(zip([0] + ends[:-1], ends))
    x = torch.randn(T, K, device=dev, dtype=torch.bfloat16)
    w = torch.randn(G, N, K, device=dev, dtype=torch.bfloat16) * 0.05
    dy = torch.randn(T, N, device=dev, dtype=torch.bfloat16)
    return offs, bounds, x, w, dy


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


def rel_err(out, ref, chunk=1 << 26):
    """||out - ref|| / ||ref|| over every element, in chunks of `chunk`
    elements: the whole tensors in fp32 at once would not fit beside the
    operands of the largest corpus shapes (dsv3's 256 experts' dW)."""
    o, r = out.reshape(-1), ref.reshape(-1)
    num = den = 0.0
    for i in range(0, o.numel(), chunk):
        oc, rc = o[i:i + chunk].float(), r[i:i + chunk].float()
        num += (oc - rc).square().sum().item()
        den += rc.square().sum().item()
    return (num / max(den, 1e-60)) ** 0.5


def group_product(op, x, w, dy, g, s, e):
    """Group g's fp32 product in the op's output layout (its rows [s, e) of
    Y or dX; its dW [N,K] for wgrad): what every benchmark checks against."""
    if op == "fprop":
        return x[s:e].float() @ w[g].float().t()
    if op == "dgrad":
        return dy[s:e].float() @ w[g].float()
    return dy[s:e].float().t() @ x[s:e].float()


def reference(op, x, w, dy, bounds):
    """The whole call's fp32 product (wgrad: [G,N,K]); rel_errs_by_group
    holds one group's at a time instead."""
    parts = [group_product(op, x, w, dy, g, s, e) for g, (s, e) in enumerate(bounds)]
    return torch.stack(parts) if op == "wgrad" else torch.cat(parts)


def rel_errs_by_group(op, outs, x, w, dy, bounds, row_scale=None):
    """rel_err of each output in `outs` against the op's fp32 product,
    summed group by group: only one group's product is held at a time (the
    whole fp32 dW of DeepSeek-V3 fc1's 256 experts is 30 GB, more than an
    H100 has beside the operands).  fprop and dgrad outputs are [T, *]
    with group g in rows bounds[g]; wgrad outputs are [G, N, K].  With
    row_scale, each fprop/dgrad row's product is scaled by it."""
    num, den = [0.0] * len(outs), 0.0
    for g, (s, e) in enumerate(bounds):
        ref = group_product(op, x, w, dy, g, s, e)
        if row_scale is not None:
            ref *= row_scale[s:e, None]
        den += ref.square().sum().item()
        for i, o in enumerate(outs):
            part = o[g] if op == "wgrad" else o[s:e]
            num[i] += (part.float() - ref).square().sum().item()
        del ref
    return [(n / max(den, 1e-60)) ** 0.5 for n in num]


FLOP_CEIL = 800e12
BYTES_CEIL = 4.3e12


def floor_ms(op, g, t, k, n):
    """The larger of compute and compulsory-traffic time, bf16 operands."""
    flops = 2.0 * t * n * k
    if op in ("wgrad", "wgrad_acc"):
        out = g * n * k * (8 if op == "wgrad_acc" else 2)  # fp32 read + written when accumulating
        nbytes = 2 * t * n + 2 * t * k + out
    else:
        nbytes = 2 * t * k + 2 * g * n * k + 2 * t * n
    return max(flops / FLOP_CEIL, nbytes / BYTES_CEIL) * 1e3


def table(bench, cases_path, kiln_json, peer_jsonl):
    cases = {c[0]: c for c in load_cases(bench, cases_path)}
    with open(kiln_json) as f:
        doc = json.load(f)
    kiln = doc["rows"]
    write_bw = doc.get("write_bandwidth_GBps", 0) * 1e9
    peer = {}
    with open(peer_jsonl) as f:
        for line in f:
            r = json.loads(line)
            if "ms" in r:
                peer[(r["case"], r["op"])] = r["ms"]
    print(f"{'case':16} {'op':9} {'kiln_ms':>8} {'torch_ms':>8} {'ratio':>6} {'floor_ms':>8} "
          f"{'kiln/fl':>7} {'trch/fl':>7} {'kiln/wfl':>8}  kernel")
    ratios = []
    for r in kiln:
        name, op = r["case"], r["op"]
        _, k, n, sizes = cases[name]
        fl = floor_ms(op, len(sizes), sum(sizes), k, n)
        km, tm = r["kiln_ms"], peer.get((name, op))
        ratio = tm / km if tm else float("nan")
        if tm:
            ratios.append(ratio)
        wfl = float("nan")
        if op == "wgrad" and write_bw > 0:
            wfl = len(sizes) * n * k * 2 / write_bw * 1e3 / km
        print(f"{name:16} {op:9} {km:8.3f} {tm or float('nan'):8.3f} {ratio:6.2f} {fl:8.3f} "
              f"{fl / km:7.2f} {(fl / tm) if tm else float('nan'):7.2f} {wfl:8.2f}  {r['kernel']}")
    if ratios:
        print(f"geometric mean kiln speed-up over torch: "
              f"{math.exp(sum(math.log(x) for x in ratios) / len(ratios)):.3f} "
              f"over {len(ratios)} cases; lowest {min(ratios):.2f}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="bench/cases.tsv")
    ap.add_argument("--ops", default="fprop,dgrad,wgrad")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--only", default="")
    ap.add_argument("--bench", default=os.environ.get("KILN_BENCH", "build/bench/kiln_bench"),
                    help="the kiln_bench binary (for the cases' group sizes)")
    ap.add_argument("--table", nargs=2, metavar=("KILN_JSON", "PEER_JSONL"))
    args = ap.parse_args()
    if args.table:
        return table(args.bench, args.cases, *args.table)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    ops = args.ops.split(",")
    for name, k, n, sizes in load_cases(args.bench, args.cases):
        if args.only and name not in args.only.split(","):
            continue
        t = sum(sizes)
        offs, _, x, w, dy = case_operands(k, n, sizes, dev)
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
