#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kiln's bf16 grouped GEMMs against torch._grouped_mm, in one process, at
the card's steady state.

For each case of bench/cases.tsv (the group sizes from `kiln_bench --sizes`,
as for every benchmark) and each op, kiln.grouped_mm and
torch._grouped_mm take the same tensors in torch._grouped_mm's own form:

  fprop  x [T,K] @ w[g]ᵀ      torch._grouped_mm(x, w.transpose(-2, -1), offs)
  dgrad  dy [T,N] @ w[g]      torch._grouped_mm(dy, w, offs)
  wgrad  dy_gᵀ @ x_g          torch._grouped_mm(dy.t(), x, offs)

and, with --ops fprop_s or dgrad_s, fprop or dgrad with each row scaled (an
MoE layer's routing weights, in [0.5, 1.5)): kiln's epilogue
(kiln.grouped_mm(..., row_scale=p)) against torch's product times p.

Both outputs are checked first against an fp32 product on every group
(relative Frobenius error, 1e-2: a bf16 output rounds each element by
2^-9).  Then the two are timed by steady.alternate: the card warmed
with both in turn, then rounds of back-to-back calls, the order flipping
each round (steady.py says why kiln_bench's separate-process peer cannot
settle a power-limited case).  Each row gives kiln's and torch's median,
torch/kiln, and kiln's fraction of the case's floor (bench/torch_peer.py's
floor_ms: FLOPs at 800 TFLOP/s or compulsory bytes at 4.3 TB/s).

With --graph N, each side's time is that of N calls captured in one CUDA
graph, divided by N, the calls taking turns over copies of the operands
that together span at least twice the L2 (steady.copies): a call's GPU time, with
no host work between calls and the weights read from HBM.  Small decode
calls take less GPU time than a Python call's host work, so timed eagerly
they measure the host; serving frameworks replay them from graphs.  With
--stream as well, a third side moves each call's bytes in one launch and
does nothing else (stream_peer.py): what any one kernel takes for them,
and kiln's time against it.

    python/bench/bf16_bench.py --bench build/bench/kiln_bench [--only a,b] [--json F] [--kernels]
                               [--graph N [--stream]]
"""
import argparse
import importlib.util
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import kiln
except ImportError:
    # Not installed: the package of this checkout (python/), which finds
    # build/runtime/libkiln.so by itself (or $KILN_BUILD_DIR's).
    sys.path.insert(0, os.path.join(HERE, ".."))
    import kiln
from kiln import _torch as kiln_torch  # noqa: E402  (kiln_torch.context: the calls' context)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from steady import alternate, copies, graphed  # noqa: E402
from torch_peer import case_args, case_operands, floor_ms, load_cases, rel_errs_by_group  # noqa: E402

TOL = 1e-2


def operands(op, x, w, dy):
    """(mat_a, mat_b) of torch._grouped_mm for op."""
    if op == "fprop":
        return x, w.transpose(-2, -1)
    if op == "dgrad":
        return dy, w
    return dy.t(), x


def sides_graphed(a, b, offs, out, calls, stream=False):
    """{kiln, torch}: graph replays of `calls` calls over copies of (a, b)
    (steady.copies, steady.graphed); with stream, also one launch a call
    that moves the same bytes and does nothing else (stream_peer.py)."""
    sets = copies(a, b)
    kf = [lambda a=a, b=b: kiln.grouped_mm(a, b, offs, out=out) for a, b in sets]
    tf = [lambda a=a, b=b: torch._grouped_mm(a, b, offs=offs) for a, b in sets]
    sides = {"kiln": graphed(kf, calls), "torch": graphed(tf, calls)}
    if stream:
        from stream_peer import stream_fn
        sink = torch.empty_like(out)
        sides["stream"] = graphed([stream_fn(a, b, sink) for a, b in sets], calls)
    return sides


def run_case(name, K, N, sizes, ops, reps, rounds, warm_s, rows, kernels=False, graph=0, stream=False):
    G, T = len(sizes), sum(sizes)
    offs, bounds, x, w, dy = case_operands(K, N, sizes)
    for op in ops:
        base = op[:-2] if op.endswith("_s") else op
        a, b = operands(base, x, w, dy)
        out = torch.empty_like(torch._grouped_mm(a, b, offs=offs))
        kfn = lambda: kiln.grouped_mm(a, b, offs, out=out)  # noqa: E731
        tfn = lambda: torch._grouped_mm(a, b, offs=offs)  # noqa: E731
        p = None
        if base != op:
            p = torch.rand(T, device=x.device) + 0.5
            kfn = lambda: kiln.grouped_mm(a, b, offs, out=out, row_scale=p)  # noqa: E731
            tfn = lambda: torch._grouped_mm(a, b, offs=offs) * p[:, None].to(a.dtype)  # noqa: E731
        kfn()
        served = kiln_torch.context(out.device).last_call() if kernels else None
        kerr, terr = rel_errs_by_group(base, [out, tfn()], x, w, dy, bounds, p)
        if not (kerr < TOL and terr < TOL):
            print(f"  {name:16s} {op:5s} WRONG: relative error kiln {kerr:.2e}, torch {terr:.2e}",
                  flush=True)
            rows.append({"case": name, "op": op, "error": [kerr, terr]})
            continue
        if graph and base == op:
            sides = sides_graphed(a, b, offs, out, graph, stream)
            ms = {k: v / graph for k, v in alternate(sides, reps, rounds, warm_s).items()}
            del sides
        else:
            ms = alternate({"kiln": kfn, "torch": tfn}, reps, rounds, warm_s)
        fl = floor_ms(base, G, T, K, N)
        r = {"case": name, "op": op, "kiln_ms": ms["kiln"], "torch_ms": ms["torch"],
             "ratio": ms["torch"] / ms["kiln"], "floor_ms": fl, "kiln_of_floor": fl / ms["kiln"],
             "torch_of_floor": fl / ms["torch"], "err": kerr}
        rows.append(r)
        print(f"  {name:16s} {op:5s} kiln {r['kiln_ms']:8.4f} ms  torch {r['torch_ms']:8.4f} ms"
              f"  x{r['ratio']:5.3f}  floor {fl:7.4f} ms: kiln {r['kiln_of_floor']:4.2f},"
              f" torch {r['torch_of_floor']:4.2f}  err {kerr:.1e}", flush=True)
        if "stream" in ms:
            r["stream_ms"] = ms["stream"]
            r["kiln_of_stream"] = ms["stream"] / ms["kiln"]
            print(f"    stream {ms['stream']:8.4f} ms ({fl / ms['stream']:4.2f} of the floor):"
                  f" kiln at {r['kiln_of_stream']:4.2f} of its speed", flush=True)
        if served:
            r["served"] = served
            print(f"    served: {served['backend']} {served['kernel']} ({served['reason']})",
                  flush=True)
    del x, w, dy
    torch.cuda.empty_cache()


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    case_args(ap)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--ops", default="fprop,dgrad,wgrad")
    ap.add_argument("--reps", type=int, default=20, help="timed calls per side and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm", type=float, default=0.3, help="seconds of warm-up per op")
    ap.add_argument("--json")
    ap.add_argument("--graph", type=int, default=0, metavar="N",
                    help="time N calls replayed from a CUDA graph (per call), over copies of the"
                         " operands that exceed the L2; ops ending _s are timed eagerly")
    ap.add_argument("--stream", action="store_true",
                    help="with --graph: also time one launch a call that moves the call's bytes"
                         " and nothing else (stream_peer.py), and kiln's time against it")
    ap.add_argument("--kernels", action="store_true",
                    help="print the kernel kiln served each row, and why (kiln_last_call)")
    a = ap.parse_args()
    if a.stream and not a.graph:
        ap.error("--stream times graph replays: give --graph N too")
    if a.stream and importlib.util.find_spec("triton") is None:
        ap.error("--stream: its side is a Triton kernel, and triton is not installed")
    only = set(filter(None, a.only.split(",")))
    ops = a.ops.split(",")
    torch.manual_seed(0)
    what = f"graph replays of {a.graph} calls" if a.graph else "calls"
    print(f"device: {torch.cuda.get_device_name()}; {a.rounds} rounds of {a.reps} {what} a side,"
          f" after {a.warm} s of warm-up; ratio = torch / kiln", flush=True)
    rows = []
    for name, K, N, sizes in load_cases(a.bench, a.cases):
        if not only or name in only:
            run_case(name, K, N, sizes, ops, a.reps, a.rounds, a.warm, rows, a.kernels, a.graph,
                     a.stream)
    bad = [r for r in rows if "error" in r]
    for op in ops:
        v = [r["ratio"] for r in rows if r["op"] == op and "ratio" in r]
        fl = [r["kiln_of_floor"] for r in rows if r["op"] == op and "ratio" in r]
        if v:
            print(f"{op}: kiln vs torch geomean x{geomean(v):.3f}, lowest x{min(v):.3f} over"
                  f" {len(v)} cases; kiln's fraction of the floor {min(fl):.2f}-{max(fl):.2f}")
        st = [r for r in rows if r["op"] == op and "stream_ms" in r]
        if st:
            sf = [r["floor_ms"] / r["stream_ms"] for r in st]
            ks = [r["kiln_of_stream"] for r in st]
            print(f"{op}: one launch moving the bytes reaches {min(sf):.2f}-{max(sf):.2f} of the"
                  f" floor; kiln {min(ks):.2f}-{max(ks):.2f} of its speed, geomean {geomean(ks):.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
