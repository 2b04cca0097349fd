#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kiln's bf16 fprop, dgrad and wgrad from contexts made under different environment
settings, against each other and torch._grouped_mm, in one process at the
card's steady state.

Each side is a kiln context made with one setting (NAME=VALUE, e.g.
KILN_SPLIT=0: no split of the last wave), called through the ctypes layer on
the same tensors; the first side is made as the environment is.  A null
side (the first setting again) gives the method's own spread.  Outputs are
checked against an fp32 product first, group by group (relative error
1e-2).  Times are steady.alternate's medians; each row gives every side's
time over the first's.  With --alone S every side (torch too) then runs
alone S seconds under nvidia-smi sampling (power_clock.print_held_alone):
its time, clock and energy a call held at the power limit, where
alternating rounds of the power-limited shapes spread by several percent.
With --libs TAG=PATH a side SETTING#TAG runs on another build of libkiln
loaded in the same process (lib_copies.py): a template change against the
tree, side by side.
A template change must come as such a build (its built-in catalog made from
the changed templates): the runtime finds a kernel in a bundle by the id of
its built-in catalog source, so a bundle of trial templates named in
KILN_BUNDLE_PATH beside the tree's libkiln is never matched and every side
runs the tree's kernels (the eighty-fifth session's null A/B).
With --graph N each side's time is that of N calls replayed from a CUDA
graph over copies of the operands (steady.copies, steady.graphed), per
call: decode-sized calls timed eagerly measure Python's host work.

    python/bench/context_ab.py --bench build/bench/kiln_bench \
        --against KILN_SPLIT=1,KILN_SPLIT=0 [--only a,b] [--ops fprop,dgrad] [--alone 2]
    python/bench/context_ab.py --libs new=/tmp/new/libkiln.so \
        --against "#new,KILN_SPLIT=1,KILN_SPLIT=1#new" --alone 2   (each build twice)
    python/bench/context_ab.py --cases bench/ep_decode.tsv --against KILN_SPLIT=0 --graph 20
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from kiln import _lib  # noqa: E402
from steady import alternate, copies, graphed  # noqa: E402
from lib_copies import parse, split_side  # noqa: E402
from environment import environment  # noqa: E402
import torch_peer  # noqa: E402


def context(setting, lib):
    """A generated-only context of lib (a _lib module) made under setting
    ("NAME=VALUE", or "" for the environment as it is)."""
    name, _, value = setting.partition("=")
    with environment({name: value} if name else {}):
        return lib.Context(allowed_backends=1)


def call(ctx, lib, op, a, b, out, offs, G, N, K, kind=""):
    """A prepared call of a [T,*] by b (W [G,N,K]; wgrad: X [T,K], a dY).
    kind "acc": dW [G,N,K] fp32, accumulated into; "discrete": out is a
    device array of G pointers to bf16 [N,K] tensors (per-expert dW)."""
    p = lib.new_problem(op)   # the problem of the library that runs it
    p.a_type = p.b_type = p.out_type = _lib.DTYPE_BF16
    p.groups, p.n, p.k, p.capacity = G, N, K, a.shape[0]
    p.d_sizes, p.sizes_kind = offs.data_ptr(), _lib.SIZES_OFFSETS
    p.d_a, p.d_b = a.data_ptr(), b.data_ptr()
    if kind == "acc":
        p.out_type, p.accumulate = _lib.DTYPE_F32, 1
    if kind == "discrete":
        p.wgrad_output, p.d_out_ptrs = _lib.WGRAD_DISCRETE, out.data_ptr()
    else:
        p.d_out = out.data_ptr()
    ctx.prepare(p)
    # the stream current at each call: a graph's capture runs on its own;
    # the tensors ride along, so that a graph of these calls keeps what it
    # reads and writes (steady.graphed)
    return lambda a=a, b=b, out=out, offs=offs: ctx.gemm(p, torch.cuda.current_stream().cuda_stream)


class _Delta:
    """What an accumulating call added, group by group (out[g] - before[g]),
    for torch_peer.rel_errs_by_group: no third whole-size fp32 tensor."""

    def __init__(self, out, before):
        self.out, self.before = out, before

    def __getitem__(self, g):
        return self.out[g] - self.before[g]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    torch_peer.case_args(ap)
    ap.add_argument("--against", required=True,
                    help="comma-separated NAME=VALUE settings, each with #TAG to run on the "
                         "library --libs names TAG (#TAG alone: the environment as it is)")
    ap.add_argument("--libs", default="",
                    help="TAG=PATH,...: other builds of libkiln, loaded beside the default one "
                         "(python/bench/lib_copies.py)")
    ap.add_argument("--only", default="")
    ap.add_argument("--ops", default="fprop,dgrad",
                    help="comma-separated: fprop, dgrad, wgrad (overwriting bf16 dW), wgrad_acc"
                         " (accumulating into fp32 dW), wgrad_discrete (bf16 dW, a tensor an"
                         " expert)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--graph", type=int, default=0, metavar="N",
                    help="time N calls replayed from a CUDA graph (per call), over copies of the"
                         " operands that exceed the L2")
    ap.add_argument("--alone", type=float, default=0.0,
                    help="then run each side alone this many seconds under nvidia-smi sampling")
    a = ap.parse_args()
    if a.graph and a.alone:
        ap.error("--alone holds one call a side, --graph replays N: give one of them")
    only = set(filter(None, a.only.split(",")))
    libs = parse(a.libs, "context_ab.py")
    ctxs = []
    for s in [""] + a.against.split(","):
        setting, lib = split_side(s, libs, "context_ab.py")
        lib = lib or _lib   # no #TAG: the default build
        ctxs.append((s or "as is", context(setting, lib), lib))
    torch.manual_seed(0)
    print(f"sides: {', '.join(n for n, _, _ in ctxs)}, torch; time over the first's", flush=True)
    for name, K, N, sizes in torch_peer.load_cases(a.bench, a.cases):
        if only and name not in only:
            continue
        G, T = len(sizes), sum(sizes)
        offs, bounds, x, w, dy = torch_peer.case_operands(K, N, sizes)
        for op in a.ops.split(","):
            if op == "fprop":
                kop, src, wk, shape = _lib.OP_FPROP, x, w, (T, N)
                tfn = lambda x=x, w=w: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
            elif op == "dgrad":
                kop, src, wk, shape = _lib.OP_DGRAD, dy, w, (T, K)
                tfn = lambda dy=dy, w=w: torch._grouped_mm(dy, w, offs=offs)
            elif op in ("wgrad", "wgrad_acc", "wgrad_discrete"):   # dW_g [N,K] = dY_gᵀ X_g
                kop, src, wk, shape = _lib.OP_WGRAD, dy, x, (G, N, K)
                # torch's peer of every kind: the bf16 product of one tensor
                tfn = lambda dy=dy, x=x: torch._grouped_mm(dy.t(), x, offs=offs)
            else:
                sys.exit(f"context_ab.py: --ops {op!r}: expected fprop, dgrad, wgrad, wgrad_acc"
                         " or wgrad_discrete")
            kind = op[len("wgrad_"):] if op.startswith("wgrad_") else ""
            sets = copies(src, wk) if a.graph else [(src, wk)]
            sides, served, keep = {}, {}, []
            for sname, ctx, lib in ctxs:
                if kind == "acc":   # accumulated into: the first call's sum less what was there
                    out = torch.randn(shape, device="cuda", dtype=torch.float32)
                    before = out.clone()
                elif kind == "discrete":   # the experts' dW apart, reached through pointers
                    parts = [torch.empty(shape[1:], device="cuda", dtype=torch.bfloat16)
                             for _ in range(G)]
                    out = torch.tensor([t.data_ptr() for t in parts], device="cuda",
                                       dtype=torch.int64)
                    keep.append(parts)   # alive while this op's graphs replay
                else:
                    out = torch.empty(shape, device="cuda", dtype=torch.bfloat16)
                fn = call(ctx, lib, kop, src, wk, out, offs, G, N, K, kind)
                fn()
                torch.cuda.synchronize()
                # checked one group at a time: no whole-call fp32 product
                # (DeepSeek-V3 fc1's dW is 30 GB in fp32)
                got = (_Delta(out, before) if kind == "acc" else
                       parts if kind == "discrete" else out)
                err = torch_peer.rel_errs_by_group("wgrad" if kind else op, [got], x, w, dy,
                                                   bounds)[0]
                del got
                if kind == "acc":
                    del before
                if err > 1e-2:
                    print(f"  {name} {op} {sname}: WRONG, relative error {err:.2e}", flush=True)
                    continue
                served[sname] = ctx.last_call()["kernel"]
                sides[sname] = graphed([call(ctx, lib, kop, s, w_, out, offs, G, N, K, kind)
                                        for s, w_ in sets], a.graph) if a.graph else fn
            sides["torch"] = graphed([lambda s=s, w_=w_: tfn(s, w_) for s, w_ in sets],
                                     a.graph) if a.graph else tfn
            ms = alternate(sides, a.reps, a.rounds)
            if a.graph:
                ms = {k: v / a.graph for k, v in ms.items()}
            first = ms[ctxs[0][0]]
            flops = 2.0 * T * N * K
            cells = "  ".join(f"{s} {ms[s]:.4f} ms x{ms[s] / first:.3f}" for s in ms)
            print(f"  {name:16s} {op:5s} {flops / first / 1e9:7.1f} TFLOP/s  {cells}  "
                  f"{served.get(ctxs[0][0], '?')}", flush=True)
            if a.alone > 0:
                from power_clock import print_held_alone
                print_held_alone(sides, a.alone)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
