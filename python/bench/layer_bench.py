#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One MoE MLP training step (fc1 -> SwiGLU -> fc2, forward and backward) on
kiln.nn.GroupedLinear against the same layer on torch._grouped_mm, with the
bias added and the routing probabilities applied as separate torch ops (as
torch users write it), in the same process, on bench/cases.tsv.

Per case (groups G, K, N, group sizes from `kiln_bench --sizes`, the C code
that makes them for the kernel benchmark): x [T,K]; fc1: K -> N (with bias);
SwiGLU halves N; fc2: N/2 -> K (with bias, each row scaled by its routing
probability, the bias too).  bf16 data, a correctness check of the outputs
and gradients first, 5 warm-ups, then the median of --reps timed steps with
CUDA events.  Prints a table (and --json: one object per case), the
geometric mean of the ratio torch/kiln and the slowest case.

    python/bench/layer_bench.py --bench build/bench/kiln_bench --cases bench/cases.tsv
"""
import argparse
import json
import math
import os
import sys

import torch

try:
    import kiln
except ImportError:
    # Not installed: the package of this source checkout (python/), which
    # finds build/runtime/libkiln.so by itself (or $KILN_BUILD_DIR's).
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import kiln
import kiln.nn  # noqa: E402

# The kernel benchmark's torch peer: the same cases (from kiln_bench --sizes)
# and the same timing (warm-ups, then the median of CUDA-event times).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench"))
from torch_peer import load_cases, time_ms  # noqa: E402


DEV = "cuda"


class TorchLayer(torch.nn.Module):
    """The same grouped linear layer written with torch._grouped_mm."""

    def __init__(self, kl):
        super().__init__()
        self.weight = torch.nn.Parameter(kl.weight.detach().clone())
        self.bias = torch.nn.Parameter(kl.bias.detach().clone())

    def forward(self, x, offs, counts, probs=None, exact_bias=False):
        y = torch._grouped_mm(x, self.weight.transpose(-2, -1), offs)
        if exact_bias:
            # The correctness reference only: the bias added in fp32, so its
            # gradient (repeat_interleave's backward, an index_add over each
            # group's rows) sums in fp32.  Summed in bf16 it is off by about
            # sqrt(rows per group) * 2^-9 (7e-2 at 10k rows), which would
            # measure torch's rounding, not kiln's.
            b = torch.repeat_interleave(self.bias.float(), counts, dim=0, output_size=x.shape[0])
            y = (y.float() + b).to(y.dtype)
        else:
            y = y + torch.repeat_interleave(self.bias, counts, dim=0, output_size=x.shape[0])
        if probs is not None:
            y = y * probs[:, None].to(y.dtype)
        return y


def swiglu(h):
    a, g = h.chunk(2, dim=-1)
    return torch.nn.functional.silu(a) * g


def make_step(fc1, fc2, x, probs, dy, kiln_layers, offs, counts, exact_bias=False):
    params = list(fc1.parameters()) + list(fc2.parameters())

    def step():
        for p in params:
            p.grad = None
        x.grad = None
        if kiln_layers:
            y = fc2(swiglu(fc1(x, offs, sizes="offsets")), offs, probs, sizes="offsets")
        else:
            h = swiglu(fc1(x, offs, counts, exact_bias=exact_bias))
            y = fc2(h, offs, counts, probs, exact_bias=exact_bias)
        y.backward(dy)
        return y

    return step, params


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12)).item()


def run_case(name, K, N, sizes, reps, probs_grad):
    G, T = len(sizes), sum(sizes)
    dev = DEV
    torch.manual_seed(0)
    fc1 = kiln.nn.GroupedLinear(G, K, N, device=dev)
    fc2 = kiln.nn.GroupedLinear(G, N // 2, K, device=dev)
    t1, t2 = TorchLayer(fc1), TorchLayer(fc2)
    x = torch.randn(T, K, device=dev, dtype=torch.bfloat16, requires_grad=True)
    probs = torch.rand(T, device=dev, requires_grad=probs_grad)
    dy = torch.randn(T, K, device=dev, dtype=torch.bfloat16)
    counts = torch.tensor(sizes, dtype=torch.int32, device=dev)
    offs = counts.cumsum(0, dtype=torch.int32)
    k_step, k_params = make_step(fc1, fc2, x, probs, dy, True, offs, counts)
    t_step, t_params = make_step(t1, t2, x, probs, dy, False, offs, counts)
    ref_step, _ = make_step(t1, t2, x, probs, dy, False, offs, counts, exact_bias=True)

    # Correctness first: outputs and every gradient, kiln against torch.
    yk = k_step()
    gk = [x.grad.clone()] + [p.grad.clone() for p in k_params]
    pk = probs.grad.clone() if probs_grad else None
    probs.grad = None
    yt = ref_step()
    gt = [x.grad.clone()] + [p.grad.clone() for p in t_params]
    errs = {"y": rel(yk, yt), "dx": rel(gk[0], gt[0])}
    names = [f"fc1.{n}" for n, _ in fc1.named_parameters()] + \
            [f"fc2.{n}" for n, _ in fc2.named_parameters()]
    for pname, a, b in zip(names, gk[1:], gt[1:]):
        errs[pname] = rel(a, b)
    if probs_grad:
        errs["dprobs"] = rel(pk, probs.grad)
    worst_t = max(errs, key=errs.get)
    err = errs[worst_t]
    del yk, yt, gk, gt
    ms_k = time_ms(k_step, reps)
    ms_t = time_ms(t_step, reps)
    return {"case": name, "groups": G, "tokens": T, "K": K, "N": N, "kiln_ms": ms_k,
            "torch_ms": ms_t, "ratio": ms_t / ms_k, "max_rel_err": err, "worst": worst_t}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default="build/bench/kiln_bench",
                    help="kiln_bench, for --sizes (default %(default)s)")
    ap.add_argument("--cases", default="bench/cases.tsv")
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--probs-grad", action="store_true",
                    help="routing probabilities require grad (kiln recomputes the unscaled "
                         "fc2 product for their gradient)")
    ap.add_argument("--json", help="write one JSON object per case to this file")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("layer_bench.py: no CUDA GPU")
    cases = load_cases(a.bench, a.cases)
    if a.only:
        keep = set(a.only.split(","))
        cases = [c for c in cases if c[0] in keep]
    print(f"# kiln {kiln.__version__} ({kiln.library_path}), torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}; probs grad: {a.probs_grad}")
    print(f"{'case':18} {'G':>5} {'T':>7} {'K':>6} {'N':>6} {'kiln ms':>9} {'torch ms':>9} "
          f"{'ratio':>6} {'max rel err':>11}  of")
    rows = []
    for name, K, N, sizes in cases:
        r = run_case(name, K, N, sizes, a.reps, a.probs_grad)
        rows.append(r)
        print(f"{r['case']:18} {r['groups']:5d} {r['tokens']:7d} {K:6d} {N:6d} "
              f"{r['kiln_ms']:9.3f} {r['torch_ms']:9.3f} {r['ratio']:6.3f} "
              f"{r['max_rel_err']:11.2e}  {r['worst']}", flush=True)
        torch.cuda.empty_cache()
    geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    worst = min(rows, key=lambda r: r["ratio"])
    print(f"# geometric mean torch/kiln: {geo:.3f}; slowest case: {worst['case']} "
          f"({worst['ratio']:.3f})")
    if a.json:
        with open(a.json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    bad = [r["case"] for r in rows if r["max_rel_err"] > 5e-2]
    if bad:
        sys.exit(f"layer_bench.py: kiln and torch disagree on {', '.join(bad)}")


if __name__ == "__main__":
    main()
