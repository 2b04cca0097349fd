#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kiln's fp8 grouped GEMMs against torch._scaled_grouped_mm, in one process.

For each case of bench/cases.tsv (the group sizes come from
`kiln_bench --sizes`, as for every other benchmark) and each row below:

  fprop row   kiln (fp8.recipe row, fast accumulation) vs torch with
              use_fast_accum=True (the stronger peer); A [T,K] e4m3 with a
              scale per row, W [G,N,K] e4m3 with a scale per (group, column)
  fprop row+p kiln with fp32 promotion vs torch without fast accumulation
  fprop row+s (--epilogue) kiln with the rows scaled in its epilogue (routing
              weights) vs torch's product times the scale, fast accumulation
  fprop block kiln 1x128 / 128x128 block scales with promotion (DeepGEMM's
              recipe; torch has no grouped peer for it: TFLOP/s only)
  dgrad row   kiln dgrad (dY [T,N] e4m3, W transposed [G,K,N] e4m3) vs torch
              on the same operands
  dgrad block kiln dgrad with block scales

Both sides take the same quantized tensors; outputs are compared before
timing (relative Frobenius error, both against a bf16 product of the
dequantized operands).  Timing: 5 warm-ups, then the median of --reps
CUDA-event timings of one call, torch's then kiln's; with --steady, both
warmed in turn and timed in alternating rounds (python/bench/steady.py:
the large cases run the card at its power limit, where the side timed
first from a cool card has the edge).  The fp8 ceiling is torch._scaled_mm on
8192^3 (fast accumulation, per-tensor scales) measured in the same process;
each row gives kiln's fraction of it.  Prints one table; --json writes the
rows.  --variants NAME=TABLE ... times row-wise fprop (with --variants-ops
fprop,dgrad also dgrad) served by one-kernel tuning tables instead
(variant_bench.py's method, for fp8), and --sample S then runs each side
alone for S seconds under nvidia-smi sampling; with --alone S the table's
rows (with --compare, every side) are each also run alone for S seconds,
and dgrad's time against fprop's is given from those runs.  --libs
TAG=PATH loads another build of libkiln beside the default one
(lib_copies.py), and a --compare side NAME#TAG runs on it: a template
change against the tree in one process.  --package
makes every kiln call through kiln.scaled_grouped_mm (the Python package)
instead of a prepared ctypes problem: the same kernels, plus what the
package costs a call.
"""
import argparse
import json
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))
from kiln import _lib  # noqa: E402
import torch_peer  # noqa: E402  (load_cases: the benchmark's sizes)
sys.path.insert(0, str(ROOT / "python" / "bench"))
from steady import alternate  # noqa: E402
from environment import environment  # noqa: E402

FP8 = torch.float8_e4m3fn
FMAX = 448.0


CHUNK = 1 << 28   # elements: the quantizers below work on slices of about 1 GB in fp32


def chunks(n, per):
    """Slices of range(n), `per` at a time (at least one each)."""
    per = max(1, per)
    return [slice(i, min(n, i + per)) for i in range(0, n, per)]


def quant_rows(x):
    """x [R, C] → (e4m3, scale [R]) with s = amax / 448 per row (1 when 0)."""
    qs, ss = [], []
    for c in chunks(x.shape[0], CHUNK // x.shape[1]):
        xc = x[c].float()
        amax = xc.abs().amax(dim=1)
        s = torch.where(amax > 0, amax / FMAX, torch.ones_like(amax))
        qs.append((xc / s[:, None]).clamp(-FMAX, FMAX).to(FP8))
        ss.append(s)
    return torch.cat(qs), torch.cat(ss).contiguous()


def quant_blocks_1x128(x):
    """x [R, C] → (e4m3, scale [ceil(C/128), R]) per row and 128 columns
    (k-block major, kiln.h's KILN_FP8_BLOCK scale_a)."""
    R, C = x.shape
    nb = (C + 127) // 128
    qs, ss = [], []
    for c in chunks(R, CHUNK // (nb * 128)):
        xp = torch.nn.functional.pad(x[c].float(), (0, nb * 128 - C)).view(-1, nb, 128)
        amax = xp.abs().amax(dim=2)
        s = torch.where(amax > 0, amax / FMAX, torch.ones_like(amax))
        qs.append((xp / s[:, :, None]).clamp(-FMAX, FMAX).view(-1, nb * 128)[:, :C].to(FP8))
        ss.append(s)
    return torch.cat(qs).contiguous(), torch.cat(ss).t().contiguous()


def quant_blocks_128x128(w):
    """w [G, R, C] → (e4m3, scale [G, ceil(R/128), ceil(C/128)])."""
    G, R, C = w.shape
    rb, cb = (R + 127) // 128, (C + 127) // 128
    qs, ss = [], []
    for c in chunks(G, CHUNK // (rb * 128 * cb * 128)):
        wp = torch.nn.functional.pad(w[c].float(), (0, cb * 128 - C, 0, rb * 128 - R))
        wp = wp.view(-1, rb, 128, cb, 128)
        amax = wp.abs().amax(dim=(2, 4))
        s = torch.where(amax > 0, amax / FMAX, torch.ones_like(amax))
        q = (wp / s[:, :, None, :, None]).clamp(-FMAX, FMAX).view(-1, rb * 128, cb * 128)
        qs.append(q[:, :R, :C].to(FP8))
        ss.append(s)
    return torch.cat(qs).contiguous(), torch.cat(ss).contiguous()


def deq_rows(q, s):
    return q.float() * s[:, None]


timed = torch_peer.time_ms   # the median of reps calls after 5 to warm up
rel_err = torch_peer.rel_err   # in chunks: the largest corpus shapes


STEADY = False   # --steady: both sides timed by steady.alternate
ALONE = 0.0      # --alone S: kiln's side then run alone S seconds under sampling
ROUNDS = 3       # --rounds: steady.alternate's rounds (--variants: 4 unless given)
EPILOGUE = False  # --epilogue: the fprop row+s rows
JOINT = False    # --joint: --compare's sides of both ops in one set of rounds


def checked(fn, ref, what):
    """fn (torch) if it runs, after checking its result; None (printed) when
    torch refuses the case."""
    try:
        err = rel_err(fn(), ref)
    except RuntimeError as e:
        print(f"  {what}: torch refused: {str(e).splitlines()[0][:160]}")
        return None
    if err > 2e-2:
        print(f"  {what}: torch's relative error {err:.2e}")
    return fn


def pair_ms(fn, tfn, ref, reps, what):
    """(kiln's ms, torch's ms or None, kiln alone or None): torch checked
    first; then each timed in its turn (a burst each, torch first), or with
    --steady both warmed and timed in alternating rounds
    (python/bench/steady.py); with --alone S, kiln's call then runs back to
    back for S seconds under nvidia-smi sampling (power_clock.py): (ms, MHz,
    W) over the run's second half, the card held at its power limit."""
    tfn = checked(tfn, ref, what) if tfn else None
    if STEADY:
        ms = alternate({"kiln": fn, "torch": tfn} if tfn else {"kiln": fn}, reps, ROUNDS)
        kms, tms = ms["kiln"], ms.get("torch")
    else:
        tms = timed(tfn, reps) if tfn else None
        kms = timed(fn, reps)
    alone = None
    if ALONE > 0:
        from power_clock import sample_while
        alone = sample_while(fn, ALONE)
    return kms, tms, alone


class Kiln:
    def __init__(self, only_kernel=None, tuning_table=None, cache_dir=None, env=None, lib=None):
        # KILN_KERNEL (and env, {NAME: VALUE}) are read when a context is
        # made: one context per kernel and setting.  lib: another build's
        # ctypes layer (lib_copies.load), whose problems this side makes.
        self.lib = lib or _lib
        env = dict(env or {})
        env["KILN_KERNEL"] = only_kernel
        with environment({k: v or None for k, v in env.items()}):   # empty: unset
            self.ctx = self.lib.Context(allowed_backends=1, cache_dir=cache_dir,
                                        tuning_tables=[tuning_table] if tuning_table else None)

    def run(self, op, recipe, promote, a, b, out, sa, sb, offs, G, n, k, ld_sa=0,
            row_scale=None):
        p = self.lib.new_problem(op)
        p.a_type = p.b_type = _lib.DTYPE_E4M3
        p.out_type = _lib.DTYPE_BF16
        p.groups, p.n, p.k, p.capacity = G, n, k, a.shape[0]
        p.d_sizes, p.sizes_kind = offs.data_ptr(), _lib.SIZES_OFFSETS
        p.d_a, p.d_out = a.data_ptr(), out.data_ptr()
        if op == _lib.OP_FPROP:
            p.d_b = b.data_ptr()
        else:
            p.fp8.d_bt = b.data_ptr()
        p.fp8.recipe, p.fp8.promote = recipe, promote
        p.fp8.d_scale_a, p.fp8.d_scale_b = sa.data_ptr(), sb.data_ptr()
        p.fp8.ld_scale_a = ld_sa
        if row_scale is not None:
            p.epilogue.d_row_scale = row_scale.data_ptr()
        stream = torch.cuda.current_stream().cuda_stream
        self.ctx.prepare(p)
        return lambda: self.ctx.gemm(p, stream)

    def last_call(self):
        return self.ctx.last_call()

    def kernel(self):
        return self.last_call()["kernel"]

    def reason(self):
        return self.last_call()["reason"]


class Package(Kiln):
    """The same calls through kiln.scaled_grouped_mm, the Python package (its
    checks, call cache and ctypes call on every call): what a torch user
    gets, against the same peer."""

    def __init__(self):
        import kiln
        from kiln import _torch as kt
        self.kiln, self.kt = kiln, kt

    def run(self, op, recipe, promote, a, b, out, sa, sb, offs, G, n, k, ld_sa=0,
            row_scale=None):
        if recipe == _lib.FP8_BLOCK:
            sa = sa.view(-1, ld_sa or a.shape[0]).t()   # [T, ceil(K/128)], k-block major
        bt, what = b.transpose(-2, -1), "fprop" if op == _lib.OP_FPROP else "dgrad"
        return lambda: self.kiln.scaled_grouped_mm(a, bt, sa, sb, offs, out=out,
                                                   use_fast_accum=not promote, op=what,
                                                   row_scale=row_scale)

    def last_call(self):
        return self.kt.context(torch.device("cuda")).last_call()


def ceiling(reps):
    n = 8192
    a = torch.randn(n, n, device="cuda").to(FP8)
    b = torch.randn(n, n, device="cuda").to(FP8).t()
    one = torch.ones((), device="cuda")
    ms = timed(lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16,
                                        use_fast_accum=True), reps)
    return 2 * n ** 3 / ms / 1e9


def run_case(kl, name, K, N, sizes, reps, ceil, rows):
    G, T = len(sizes), sum(sizes)
    dev = "cuda"
    offs, bounds, x, w, dy = torch_peer.case_operands(K, N, sizes, dev)
    flops = 2.0 * T * N * K

    def row(op, what, kms, tms, alone, err):
        tf = flops / kms / 1e9
        rows.append({"case": name, "op": op, "what": what, "kiln_ms": kms, "torch_ms": tms,
                     "ratio": (tms / kms) if tms else None, "tflops": tf,
                     "of_ceiling": tf / ceil, "err": err, "kernel": kl.kernel(),
                     "alone": alone})
        print(f"  {name:16s} {op:5s} {what:9s} kiln {kms:8.4f} ms"
              + (f"  torch {tms:8.4f} ms  x{tms / kms:5.3f}" if tms else " " * 31)
              + f"  {tf:7.1f} TFLOP/s  {tf / ceil:5.3f} of ceiling  err {err:.1e}  {kl.kernel()}",
              flush=True)
        if alone:
            ams, mhz, watts = alone
            print(f"  {name:16s} {op:5s} {what:9s} alone {ams:8.4f} ms  {flops / ams / 1e9:7.1f}"
                  f" TFLOP/s at {mhz:.0f} MHz, {watts:.0f} W", flush=True)

    # fprop, row-wise
    xq, xs = quant_rows(x)
    wq, ws = quant_rows(w.view(G * N, K))
    wq, ws = wq.view(G, N, K), ws.view(G, N)
    ref = torch.cat([deq_rows(xq[a:b], xs[a:b]) @ deq_rows(wq[g], ws[g]).t()
                     for g, (a, b) in enumerate(bounds)])
    y = torch.empty(T, N, device=dev, dtype=torch.bfloat16)
    for promote, what in ((0, "row"), (1, "row+p")):
        fn = kl.run(_lib.OP_FPROP, _lib.FP8_ROW, promote, xq, wq, y, xs, ws, offs, G, N, K)
        fn()
        torch.cuda.synchronize()
        err = rel_err(y, ref)
        tfn = lambda: torch._scaled_grouped_mm(xq, wq.transpose(-2, -1), xs, ws, offs=offs,
                                               out_dtype=torch.bfloat16,
                                               use_fast_accum=not promote)
        if err > 2e-2:
            print(f"  {name} fprop {what}: kiln's relative error {err:.2e}")
        row("fprop", what, *pair_ms(fn, tfn, ref, reps, f"{name} fprop {what}"), err)

    if EPILOGUE:
        # fprop row-wise with the rows scaled (an MoE layer's routing
        # weights): kiln fused in the epilogue, torch an elementwise pass after
        p = torch.rand(T, device=dev) + 0.5
        fn = kl.run(_lib.OP_FPROP, _lib.FP8_ROW, 0, xq, wq, y, xs, ws, offs, G, N, K,
                    row_scale=p)
        fn()
        torch.cuda.synchronize()
        refs = ref * p[:, None]
        tfn = lambda: torch._scaled_grouped_mm(xq, wq.transpose(-2, -1), xs, ws, offs=offs,
                                               out_dtype=torch.bfloat16,
                                               use_fast_accum=True) * p[:, None].bfloat16()
        row("fprop", "row+s", *pair_ms(fn, tfn, refs, reps, f"{name} fprop row+s"),
            rel_err(y, refs))
        del p, refs

    # each stage frees its operands: the largest corpus shapes' weights take
    # 15 GB in bf16
    del fn, xq, xs, wq, ws, ref

    # fprop, blocks
    xb, xbs = quant_blocks_1x128(x)
    wb, wbs = quant_blocks_128x128(w)
    fn = kl.run(_lib.OP_FPROP, _lib.FP8_BLOCK, 1, xb, wb, y, xbs, wbs, offs, G, N, K)
    fn()
    torch.cuda.synchronize()
    ref_b = x.float()  # the quantization error is small against the product's size
    refb = torch.cat([ref_b[a:b] @ w[g].float().t()
                      for g, (a, b) in enumerate(bounds)])
    row("fprop", "block", *pair_ms(fn, None, None, reps, None), rel_err(y, refb))

    del fn, xb, xbs, wb, wbs, ref_b, refb

    # dgrad, row-wise: dX = dY · W, W transposed [G, K, N] quantized per (g, k)
    dq, ds = quant_rows(dy)
    wt = w.transpose(1, 2).contiguous()
    wtq, wts = quant_rows(wt.view(G * K, N))
    wtq, wts = wtq.view(G, K, N), wts.view(G, K)
    dx = torch.empty(T, K, device=dev, dtype=torch.bfloat16)
    refd = torch.cat([deq_rows(dq[a:b], ds[a:b]) @ deq_rows(wtq[g], wts[g]).t()
                      for g, (a, b) in enumerate(bounds)])
    fn = kl.run(_lib.OP_DGRAD, _lib.FP8_ROW, 0, dq, wtq, dx, ds, wts, offs, G, N, K)
    fn()
    torch.cuda.synchronize()
    err = rel_err(dx, refd)
    tfn = lambda: torch._scaled_grouped_mm(dq, wtq.transpose(-2, -1), ds, wts, offs=offs,
                                           out_dtype=torch.bfloat16, use_fast_accum=True)
    row("dgrad", "row", *pair_ms(fn, tfn, refd, reps, f"{name} dgrad row"), err)

    del fn, tfn, dq, ds, wtq, wts, refd

    # dgrad, blocks
    db, dbs = quant_blocks_1x128(dy)
    wtb, wtbs = quant_blocks_128x128(wt)
    fn = kl.run(_lib.OP_DGRAD, _lib.FP8_BLOCK, 1, db, wtb, dx, dbs, wtbs, offs, G, N, K)
    fn()
    torch.cuda.synchronize()
    refdb = torch.cat([dy[a:b].float() @ w[g].float()
                       for g, (a, b) in enumerate(bounds)])
    row("dgrad", "block", *pair_ms(fn, None, None, reps, None), rel_err(dx, refdb))


def compare_case(kernels, name, K, N, sizes, reps, ceil):
    """Times each named kernel (KILN_KERNEL) on the case: its op and recipe
    from its name (sm90_{fprop,dgrad}_e4m3_{row,block,...}).  A name ending
    in "+s" is called with a row scale (routing weights) in its epilogue;
    "fprop@table" / "dgrad@table" (row-wise, fast; "fprop@table_block" the
    block recipe) are the shipped tables' choice, so "fprop@table+s" is
    what dispatch serves such a call with.
    With --steady the kernels of one op are timed in alternating rounds
    (python/bench/steady.py) and each is given against the op's first (with
    --joint the sides of both ops in one set of rounds, each against the
    first side named: dgrad against fprop with the card in one state, where
    rounds of one op after the other's put them at different points of its
    heating, which at the power limit moves a call's time); with
    --alone S each then runs alone S seconds under nvidia-smi sampling (its
    time, clock and energy a call held at the power limit)."""
    G, T = len(sizes), sum(sizes)
    dev = "cuda"
    offs, bounds, x, w, dy = torch_peer.case_operands(K, N, sizes, dev)
    flops = 2.0 * T * N * K
    wt = w.transpose(1, 2).contiguous()
    p = torch.rand(T, device=dev) + 0.5
    operands, refs, sides = {}, {}, {"fprop": {}, "dgrad": {}}
    for kname, kl in kernels:
        base = kname.partition(":")[0].partition("#")[0]   # without its :ENV=VALUE, #TAG
        scaled = base.endswith("+s")
        dgrad = "dgrad" in base   # sm90_dgrad_* defaults, dgrad_* sweep kernels, dgrad@table
        block = "_block" in base
        if (dgrad, block) not in operands:
            a_src = x if not dgrad else dy
            b_src = w if not dgrad else wt
            if block:
                aq, sa = quant_blocks_1x128(a_src)
                bq, sb = quant_blocks_128x128(b_src)
            else:
                aq, sa = quant_rows(a_src)
                bq, sb = quant_rows(b_src.reshape(-1, b_src.shape[-1]))
                bq, sb = bq.view(b_src.shape), sb.view(G, -1)
            operands[(dgrad, block)] = (aq, bq, sa, sb)
            # the unquantized product: the quantization error is small against it
            if dgrad not in refs:
                refs[dgrad] = torch.cat([a_src[a:b].float() @ b_src[g].float().t()
                                         for g, (a, b) in enumerate(bounds)])
        aq, bq, sa, sb = operands[(dgrad, block)]
        out = torch.empty(T, K if dgrad else N, device=dev, dtype=torch.bfloat16)
        try:
            fn = kl.run(_lib.OP_DGRAD if dgrad else _lib.OP_FPROP,
                        _lib.FP8_BLOCK if block else _lib.FP8_ROW, int(block or "promote" in base),
                        aq, bq, out, sa, sb, offs, G, N, K, row_scale=p if scaled else None)
            fn()
            torch.cuda.synchronize()
        except _lib.KilnError as e:
            print(f"  {name:16s} {kname}: {str(e)[:120]}")
            continue
        ref = refs[dgrad] * p[:, None] if scaled else refs[dgrad]
        sides["dgrad" if dgrad else "fprop"][kname] = (fn, rel_err(out, ref), kl.kernel())
    if JOINT:   # one set of rounds for both ops' sides, fprop's first
        sides = {"fprop+dgrad": {**sides["fprop"], **sides["dgrad"]}}
    for op, got in sides.items():
        if not got:
            continue
        if STEADY:
            ms = alternate({k: v[0] for k, v in got.items()}, reps, ROUNDS)
        else:
            ms = {k: timed(v[0], reps) for k, v in got.items()}
        first = next(iter(ms.values()))
        for kname, (fn, err, served) in got.items():
            tf = flops / ms[kname] / 1e9
            print(f"  {name:16s} {kname:40s} {ms[kname]:8.4f} ms {tf:7.1f} TFLOP/s  "
                  f"{tf / ceil:5.3f} of ceiling  x{ms[kname] / first:5.3f} of the first  "
                  f"err {err:.1e}  {served}", flush=True)
        if ALONE > 0:
            from power_clock import print_held_alone
            print(f"  {name} {op}: each side alone", flush=True)
            print_held_alone({k: v[0] for k, v in got.items()}, ALONE)


def variants_case(variants, tables, name, K, N, sizes, ceil, sample, op="fprop"):
    """Row-wise fprop (or dgrad) on the case, served by each variant's
    context (a one-kernel tuning table, as in variant_bench.py) and by torch
    (fast accumulation), timed at steady state in alternating rounds; with
    sample > 0 each side then runs alone under nvidia-smi sampling.  A side
    whose table did not serve its kernel is left out (variant_sides.not_served)."""
    from variant_sides import not_served
    G, T = len(sizes), sum(sizes)
    offs, bounds, x, w, dy = torch_peer.case_operands(K, N, sizes)
    # fprop: X [T,K] by W [G,N,K]; dgrad: dY [T,N] by the transposed W [G,K,N]
    a_src, b_src = (x, w) if op == "fprop" else (dy, w.transpose(1, 2).contiguous())
    del x, w, dy
    n_out, k_red = b_src.shape[1], b_src.shape[2]
    aq, sa = quant_rows(a_src)
    bq, sb = quant_rows(b_src.reshape(G * n_out, k_red))
    bq, sb = bq.view(G, n_out, k_red), sb.view(G, n_out)
    del a_src, b_src
    ref = torch.cat([deq_rows(aq[a:b], sa[a:b]) @ deq_rows(bq[g], sb[g]).t()
                     for g, (a, b) in enumerate(bounds)])
    y = torch.empty(T, n_out, device="cuda", dtype=torch.bfloat16)
    kop = _lib.OP_FPROP if op == "fprop" else _lib.OP_DGRAD
    sides, served = {}, {}
    for vname, kl in variants:
        fn = kl.run(kop, _lib.FP8_ROW, 0, aq, bq, y, sa, sb, offs, G, N, K)
        y.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        err = rel_err(y, ref)
        served[vname] = kl.kernel()
        if err > 2e-2:
            print(f"  {name} {vname}: WRONG, relative error {err:.2e} ({served[vname]})")
            continue
        why = not_served(tables.get(vname), served[vname], kl.reason())
        if why:
            print(f"  {name} {vname}: NOT THE VARIANT'S KERNEL, left out: {why}")
            continue
        sides[vname] = fn
    sides["torch"] = lambda: torch._scaled_grouped_mm(aq, bq.transpose(-2, -1), sa, sb,
                                                      offs=offs, out_dtype=torch.bfloat16,
                                                      use_fast_accum=True)
    del ref
    ms = alternate(sides, 20, ROUNDS, 0.5)
    flops = 2.0 * T * N * K
    first = next(iter(ms))
    print(f"{name} {op} row: torch {ms['torch']:.4f} ms ({flops / ms['torch'] / 1e9:.1f} TFLOP/s)")
    for v in ms:
        if v != "torch":
            tf = flops / ms[v] / 1e9
            print(f"  {v:12s} {ms[v]:8.4f} ms  {tf:7.1f} TFLOP/s  {tf / ceil:5.3f} of ceiling"
                  f"  x{ms['torch'] / ms[v]:5.3f} torch  {ms[v] / ms[first]:6.4f} of {first}"
                  f"  {served[v]}", flush=True)
    if sample > 0:
        from power_clock import print_held_alone
        print_held_alone({v: sides[v] for v in ms}, sample)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    torch_peer.case_args(ap)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json")
    ap.add_argument("--steady", action="store_true",
                    help="time kiln and torch at the card's steady state, in alternating "
                         "rounds after a warm-up (python/bench/steady.py)")
    ap.add_argument("--rounds", type=int,
                    help="rounds of alternation (each side reps calls a round): with --steady "
                         "(3 by default) or --variants (4 by default)")
    ap.add_argument("--alone", type=float, default=0.0,
                    help="then run each kiln row (with --compare: each side) alone this many "
                         "seconds under nvidia-smi sampling: its time held at the power limit, "
                         "and dgrad over fprop so")
    ap.add_argument("--compare", default="",
                    help="comma-separated kernel names: time each (KILN_KERNEL) on the cases "
                         "instead of the table against torch; NAME+s with a row scale in its "
                         "epilogue, fprop@table / dgrad@table (fprop@table_block ...) what "
                         "the tables serve; NAME:ENV=VALUE from a context made under that "
                         "setting (fprop@table_block:KILN_SPLIT=0); NAME#TAG through the "
                         "library --libs names TAG")
    ap.add_argument("--joint", action="store_true",
                    help="with --compare: time the sides of both ops in one set of alternating "
                         "rounds, each against the first named (fprop@table,dgrad@table: dgrad "
                         "over fprop at one state of the card)")
    ap.add_argument("--libs", default="",
                    help="TAG=PATH,...: other builds of libkiln, loaded beside the default one "
                         "(python/bench/lib_copies.py), for --compare sides NAME#TAG")
    ap.add_argument("--variants", nargs="*", default=[],
                    help="NAME=TUNING_TABLE (NAME= for the shipped tables): row-wise fprop "
                         "(--variants-ops: or dgrad) served by each, against torch, at steady "
                         "state (variant_bench.py's method)")
    ap.add_argument("--variants-ops", default="fprop",
                    help="with --variants: the ops, fprop and/or dgrad (comma-separated)")
    ap.add_argument("--cache-dir", help="where the variants' kernels are")
    ap.add_argument("--sample", type=float, default=0.0,
                    help="with --variants: each side alone this many seconds under nvidia-smi "
                         "sampling")
    ap.add_argument("--epilogue", action="store_true",
                    help="also fprop row-wise with a row scale (routing weights): kiln's fused "
                         "epilogue against torch's product times the scale")
    ap.add_argument("--package", action="store_true",
                    help="call kiln through the Python package (kiln.scaled_grouped_mm) "
                         "instead of its ctypes problem")
    a = ap.parse_args()
    global STEADY, ALONE, EPILOGUE, ROUNDS, JOINT
    STEADY, ALONE, EPILOGUE, JOINT = a.steady, a.alone, a.epilogue, a.joint
    ROUNDS = a.rounds or (4 if a.variants else 3)
    only = set(filter(None, a.only.split(",")))
    torch.manual_seed(0)
    ceil = ceiling(a.reps)
    print(f"fp8 ceiling: torch._scaled_mm 8192^3, fast accumulation: {ceil:.1f} TFLOP/s", flush=True)
    cases = [c for c in torch_peer.load_cases(a.bench, a.cases) if not only or c[0] in only]
    if a.variants:
        from variant_sides import variant_tables
        tables = dict(variant_tables(a.variants, "fp8_bench.py"))
        variants = [(vname, Kiln(tuning_table=table, cache_dir=a.cache_dir))
                    for vname, table in tables.items()]
        for name, K, N, sizes in cases:
            for op in a.variants_ops.split(","):
                variants_case(variants, tables, name, K, N, sizes, ceil, a.sample, op)
            torch.cuda.empty_cache()
        return
    if a.compare:
        from lib_copies import parse, split_side
        libs = parse(a.libs, "fp8_bench.py")

        def side(k):   # NAME[+s][:ENV=VALUE][#TAG]
            rest, lib = split_side(k, libs, "fp8_bench.py")
            name, _, env = rest.partition(":")
            env = dict([env.split("=", 1)]) if env else None
            return k, Kiln(None if "@table" in name else name.removesuffix("+s"), env=env, lib=lib)
        kernels = [side(k) for k in a.compare.split(",")]
        for name, K, N, sizes in cases:
            compare_case(kernels, name, K, N, sizes, a.reps, ceil)
        return
    kl = Package() if a.package else Kiln()
    rows = []
    for name, K, N, sizes in cases:
        run_case(kl, name, K, N, sizes, a.reps, ceil, rows)
        torch.cuda.empty_cache()   # the next case's large tensors in one piece
    ratios = [r["ratio"] for r in rows if r["ratio"] and r["what"] == "row"]
    fr = [r["ratio"] for r in rows if r["ratio"] and r["op"] == "fprop" and r["what"] == "row"]
    if fr:
        g = 1.0
        for x in fr:
            g *= x
        print(f"fprop row-wise vs torch (fast): geomean x{g ** (1 / len(fr)):.3f}, "
              f"min x{min(fr):.3f} over {len(fr)} cases")
    if ratios:
        print(f"all row-wise rows: min x{min(ratios):.3f}")
    alone = {(r["case"], r["op"], r["what"]): r["alone"][0] for r in rows if r["alone"]}
    for what in ("row", "block"):
        q = [(c, alone[(c, "fprop", w)] / alone[(c, "dgrad", w)]) for (c, op, w) in alone
             if op == "dgrad" and w == what and (c, "fprop", w) in alone]
        if q:
            print(f"dgrad against fprop ({what}), each alone at the power limit: "
                  + ", ".join(f"{c} {v:.3f}" for c, v in q)
                  + f"; within 5% on {sum(v >= 0.95 for _, v in q)} of {len(q)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"ceiling_tflops": ceil, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
