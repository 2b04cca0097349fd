#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Kernels of one op against each other and against torch._grouped_mm, at
the card's steady state, in one process.

`kiln tune` times a sweep's kernels one after the other in bursts: it ranks
them on a cool card, and on a hot one by their place in the order
(docs/tuning.md, "Order matters on a hot card").  This script times
candidates the way bf16_bench.py times kiln against torch: every side
warmed, then rounds of back-to-back calls, the order flipping each round
(steady.alternate), all sides in one process.

Each candidate is a tuning table (`kiln tune` over a spec of that one
kernel writes it) and the cache its kernel was compiled into: a kiln
context made with that table serves the case's class with that kernel.  The
sides are the contexts and torch; each output is checked against an fp32
product first, and the kernel each context served is printed (a table that
does not reach the case shows there).  With --sample, each side then runs
alone for a few seconds under nvidia-smi sampling (power_clock.py): its
clock and power at the 700 W limit, and its energy per call.  On shapes
that reach the power limit, rank candidates by these held-alone lines:
alternating among many sides moved the same code by 5.6% (twenty-eighth
session, docs/tuning.md), held alone by 0.3%.

    python/bench/variant_bench.py --only mixtral_fc1 --op dgrad --cache-dir C \\
        shipped= c2x1=T1.tuning [...]

(NAME= with no table: the shipped tables alone; NAME=@KERNEL: a context
made under KILN_KERNEL=KERNEL, served by that kernel alone, as a caller's
kiln would be with the variable set: a default or a kernel a table entry
serves, not an entry's runner-up, which the bundle also holds.)  With
--dbias (wgrad), every side also runs computing the bias gradient into an
fp32 [G,N] buffer, as a side NAME+db checked against the groups' sums of
dY: what db costs each kernel, in one process.  With --scale (fprop,
dgrad) likewise each side also scales the output's rows in its epilogue
(routing weights), as a side NAME+s: what the epilogue costs, and which
kernel dispatch serves such a call with.  With --ptrs, fprop and
dgrad also run with the weights as G separate tensors through a pointer
table (as kiln.nn.GroupedLinear passes per-expert weights), on the
shipped tables: issue 15's pointer weights against contiguous ones.
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import kiln  # noqa: E402
from kiln import _lib, _torch  # noqa: E402
from bf16_bench import TOL, operands  # noqa: E402
from power_clock import print_held_alone  # noqa: E402
from environment import environment  # noqa: E402
from steady import alternate  # noqa: E402
from torch_peer import case_args, case_operands, floor_ms, load_cases, reference, rel_err  # noqa: E402
from variant_sides import not_served, variant_tables  # noqa: E402


def side(ctx, call):
    """call() served by ctx: the package's context of the device, and its
    thread's cache of call kinds (each of which holds the context it was
    made on), are this side's own during the call."""
    dev = torch.cuda.current_device()
    calls = {}

    def fn():
        _torch._contexts[dev] = ctx
        _torch._tls.calls = calls
        call()
    return fn


def pointer_weights(op, w):
    """fprop/dgrad's mat_b for per-expert weights, as kiln.nn.GroupedLinear
    passes them (a meta [G,N,K] shape and a device table of G separate
    [N,K] tensors' addresses), and the table."""
    copies = [w[g].clone() for g in range(w.shape[0])]
    meta = torch.empty(w.shape, dtype=w.dtype, device="meta")
    return (meta.transpose(-2, -1) if op == "fprop" else meta), \
        _torch.pointer_table(copies, w.device)


def variant_context(dev, cache_dir, table):
    """The kiln context of one variant: its tuning table on top of the
    shipped ones, or for "@KERNEL" the shipped ones with only KERNEL
    allowed (the context reads KILN_KERNEL when it is made)."""
    if table and table.startswith("@"):
        with environment({"KILN_KERNEL": table[1:]}):
            return _lib.Context(device=dev, cache_dir=cache_dir)
    return _lib.Context(device=dev, cache_dir=cache_dir, tuning_tables=[table] if table else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    case_args(ap)
    ap.add_argument("--only", required=True, help="comma-separated case names")
    ap.add_argument("--op", default="fprop", choices=["fprop", "dgrad", "wgrad"])
    ap.add_argument("--cache-dir", required=True, help="where the candidates' kernels are")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--warm", type=float, default=0.5)
    ap.add_argument("--sample", type=float, default=0.0,
                    help="then run each side back to back this many seconds under nvidia-smi "
                         "sampling: its SM clock and board power at steady state")
    ap.add_argument("--ptrs", action="store_true",
                    help="fprop/dgrad: one more side, the shipped tables with the weights given "
                         "as G separate tensors (a pointer table), against the contiguous ones")
    ap.add_argument("--dbias", action="store_true",
                    help="wgrad: each side also computing db (fp32 [G,N]), as a side NAME+db")
    ap.add_argument("--scale", action="store_true",
                    help="fprop/dgrad: each side also scaling the output's rows (routing "
                         "weights) in its epilogue, as a side NAME+s")
    ap.add_argument("variants", nargs="+", help="NAME=TUNING_TABLE, or NAME= for the shipped tables")
    a = ap.parse_args()
    only = set(a.only.split(","))
    dev = torch.cuda.current_device()
    _torch.context(dev)   # torch's primary context current, as the package makes it
    tables = dict(variant_tables(a.variants, "variant_bench.py"))
    ctxs = {name: _torch.attach(variant_context(dev, a.cache_dir, table))
            for name, table in tables.items()}
    if a.dbias and a.op != "wgrad":
        sys.exit("variant_bench.py: --dbias is for --op wgrad")
    if a.scale and a.op == "wgrad":
        sys.exit("variant_bench.py: --scale is for --op fprop or dgrad")
    ptrs_ctx = _torch.attach(_lib.Context(device=dev)) if a.ptrs else None
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}; op {a.op}; {a.rounds} rounds of {a.reps}"
          f" calls a side after {a.warm} s of warm-up; ratio = torch / side", flush=True)
    for case, K, N, sizes in load_cases(a.bench, a.cases):
        if case not in only:
            continue
        G, T = len(sizes), sum(sizes)
        offs, bounds, x, w, dy = case_operands(K, N, sizes)
        mat_a, mat_b = operands(a.op, x, w, dy)
        ref = reference(a.op, x, w, dy, bounds)
        out = torch.empty_like(ref, dtype=torch.bfloat16)
        calls = {name: (ctx, lambda: kiln.grouped_mm(mat_a, mat_b, offs, out=out))
                 for name, ctx in ctxs.items()}
        if a.dbias:
            db = torch.empty(G, N, device=x.device, dtype=torch.float32)
            db_ref = torch.stack([dy[s:e].float().sum(0) for s, e in bounds])
            for name, ctx in ctxs.items():
                calls[name + "+db"] = (ctx, lambda: _torch.launch(mat_a, mat_b, offs, out=out,
                                                                  dbias=db))
        if a.scale:
            p = torch.rand(T, device=x.device) + 0.5
            ref_s = ref * p[:, None]
            for name, ctx in ctxs.items():
                calls[name + "+s"] = (ctx, lambda: kiln.grouped_mm(mat_a, mat_b, offs, out=out,
                                                                   row_scale=p))
        if a.ptrs and a.op != "wgrad":
            pb, table = pointer_weights(a.op, w)
            calls["ptrs"] = (ptrs_ctx, lambda: _torch.launch(mat_a, pb, offs, out=out,
                                                             weight_ptrs=table))
        sides, served = {}, {}
        for name, (ctx, call) in calls.items():
            fn = side(ctx, call)
            with_db = name.endswith("+db")
            out.fill_(float("nan"))
            if with_db:
                db.fill_(float("nan"))
            fn()
            err = max(rel_err(out, ref_s if name.endswith("+s") else ref),
                      rel_err(db, db_ref) if with_db else 0.0)
            call_report = ctx.last_call()
            served[name] = call_report["kernel"]
            if with_db and ctx.no_dbias:
                served[name] += " (db by torch: the kernel refused it)"
            if not err < TOL:
                print(f"  {case} {name}: WRONG, relative error {err:.2e} ({served[name]})")
                continue
            # the plain calls only: with terms the twin rule may serve another kernel
            why = not_served(tables[name], served[name], call_report["reason"]) \
                if name in tables else None
            if why:
                print(f"  {case} {name}: NOT THE VARIANT'S KERNEL, left out: {why}")
                continue
            sides[name] = fn
        sides["torch"] = lambda: torch._grouped_mm(mat_a, mat_b, offs=offs)  # noqa: E731
        del ref
        if a.scale:
            del ref_s
        ms = alternate(sides, a.reps, a.rounds, a.warm)
        fl = floor_ms(a.op, G, T, K, N)
        first = next(iter(ms))
        print(f"{case} {a.op}: torch {ms['torch']:.4f} ms, floor {fl:.4f} ms")
        for name in ms:
            if name == "torch":
                continue
            print(f"  {name:12s} {ms[name]:8.4f} ms  x{ms['torch'] / ms[name]:5.3f} torch"
                  f"  {ms[name] / ms[first]:6.4f} of {first}  {fl / ms[name]:4.2f} of floor"
                  f"  {served[name]}", flush=True)
        if a.sample > 0:
            print_held_alone({name: sides[name] for name in ms}, a.sample)
        del x, w, dy, out, calls, sides
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
