#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kiln's block-scaled fp8 kernels against DeepGEMM's, in one process.

DeepGEMM (github.com/deepseek-ai/DeepGEMM) is the reference for the block
recipe (1x128 activation scales, 128x128 weight scales, fp32 promotion):
issue 16's bar of 1200 TFLOP/s comes from its published figures, measured
on an H800 in short bursts.  This script runs its grouped kernel for the
contiguous layout (`m_grouped_fp8_gemm_nt_contiguous`) and kiln's block
recipe on the same fp8 bits and the same scales, fprop and dgrad, and
times them at the card's steady state in alternating rounds
(python/bench/steady.py): kiln as dispatched, and with --kernels each
named kiln kernel held to its op; with --alone S each side then runs alone
S seconds under nvidia-smi sampling (its clock, power and energy a call).

The operands are those of every benchmark over a case (torch_peer's
case_operands), quantized by fp8_bench's quantizers.  kiln takes the groups
packed; DeepGEMM wants each group's rows padded to its alignment (128 on
sm90) with -1 in the row's group index, so its operands are the same rows
copied into that layout (no copy where every group is a multiple of 128):
its padded rows are work it does in real use too.  TFLOP/s count the real
rows for both.  Each side's output is checked against the bf16 product
(the quantization's error, about 4e-2 relative) and kiln's against
DeepGEMM's on the real rows ("apart": 0 where both sum in the same
order); a side off by more (WRONG) is not timed.  DeepGEMM is not part of
kiln: the script runs where `import deep_gemm` works
(python/bench/deepgemm_build.py builds it from a checkout) and says so
where it does not.

    python3 python/bench/deepgemm_peer.py --only dsv3_fc1_ep8,dsv3_fc2_ep8 [--alone 2]
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import fp8_bench as fb  # noqa: E402  (quantizers, the Kiln wrapper)
from kiln import _lib  # noqa: E402
from steady import alternate  # noqa: E402
from torch_peer import case_args, case_operands, load_cases, rel_err  # noqa: E402


# Against the bf16 product the block recipe's quantization leaves about 4e-2
# of relative error (e4m3 keeps 3 mantissa bits); a wrong or unwritten row
# gives about 1 or NaN.
WRONG = 6e-2


def padded_rows(sizes, align):
    """DeepGEMM's layout of the groups: (the index there of each real row,
    in order, and the layout's row count)."""
    dst, start = [], 0
    for m in sizes:
        dst += range(start, start + m)
        start += (m + align - 1) // align * align
    return dst, start


def deepgemm_side(dg, a, sa, b, sb, sizes, out_cols):
    """A call of DeepGEMM's grouped kernel on kiln's quantized operands:
    a [T, R] e4m3 with sa [R/128, T] (kiln's k-block-major scales), b
    [G, out_cols, R] with sb [G, out_cols/128, R/128].  Returns (fn, the
    output's real rows)."""
    dev = a.device
    align = dg.get_mk_alignment_for_contiguous_layout()
    dst, rows = padded_rows(sizes, align)
    idx = torch.tensor(dst, device=dev, dtype=torch.long)
    group = torch.full((rows,), -1, device=dev, dtype=torch.int32)
    group[idx] = torch.repeat_interleave(torch.arange(len(sizes), device=dev, dtype=torch.int32),
                                         torch.tensor(sizes, device=dev))
    if rows == a.shape[0]:
        ap, sat = a, sa
    else:
        ap = torch.zeros(rows, a.shape[1], device=dev, dtype=a.dtype)
        ap[idx] = a
        sat = torch.ones(sa.shape[0], rows, device=dev, dtype=sa.dtype)
        sat[:, idx] = sa
    # [rows, R/128], MN-major: DeepGEMM's required layout for sm90's fp32 A
    # scales, so the call transforms nothing
    sfa = dg.get_mn_major_tma_aligned_tensor(sat.t())
    d = torch.empty(rows, out_cols, device=dev, dtype=torch.bfloat16)
    return (lambda: dg.m_grouped_fp8_gemm_nt_contiguous((ap, sfa), (b, sb), d, group)), \
        (lambda: d[idx])


def run_case(dg, kilns, name, K, N, sizes, ops, reps, rounds, alone):
    """kilns: [(side name, fp8_bench.Kiln)], the dispatched context first,
    then contexts held to one kernel (their op's only)."""
    G, T = len(sizes), sum(sizes)
    offs, bounds, x, w, dy = case_operands(K, N, sizes)
    flops = 2.0 * T * N * K
    for op in ops:
        if op == "fprop":
            a_src, b_src, out_cols = x, w, N
        else:
            a_src, b_src, out_cols = dy, w.transpose(1, 2).contiguous(), K
        aq, sa = fb.quant_blocks_1x128(a_src)
        bq, sb = fb.quant_blocks_128x128(b_src)
        ref = torch.cat([a_src[s:e].float() @ b_src[g].float().t() for g, (s, e) in enumerate(bounds)])
        d_fn, d_rows = deepgemm_side(dg, aq, sa, bq, sb, sizes, out_cols)
        d_fn()   # the first call compiles DeepGEMM's kernel
        torch.cuda.synchronize()
        sides, checks = {}, {}
        for side, kl in kilns:
            if side != "kiln" and op not in side:
                continue
            out = torch.full((T, out_cols), float("nan"), device="cuda", dtype=torch.bfloat16)
            fn = kl.run(_lib.OP_FPROP if op == "fprop" else _lib.OP_DGRAD, _lib.FP8_BLOCK, 1,
                        aq, bq, out, sa, sb, offs, G, N, K)
            fn()
            torch.cuda.synchronize()
            err, apart = rel_err(out, ref), rel_err(out, d_rows().float())
            if not err < WRONG or not apart < WRONG:   # NaN (an unwritten row) fails too
                print(f"  {name} {op} {side}: WRONG, relative error {err:.2e}, {apart:.2e} from "
                      f"DeepGEMM's ({kl.kernel()})", flush=True)
                continue
            sides[side] = fn
            checks[side] = (err, apart, kl.kernel())
        sides["deepgemm"] = d_fn
        ms = alternate(sides, reps, rounds)
        dg_ms = ms["deepgemm"]
        print(f"  {name:16s} {op}  deepgemm {dg_ms:8.4f} ms {flops / dg_ms / 1e9:7.1f} TFLOP/s  "
              f"err {rel_err(d_rows(), ref):.1e}", flush=True)
        for side, (err, apart, served) in checks.items():
            print(f"  {name:16s} {op}  {side:44s} {ms[side]:8.4f} ms {flops / ms[side] / 1e9:7.1f} "
                  f"TFLOP/s  x{dg_ms / ms[side]:5.3f} of deepgemm's speed  err {err:.1e} "
                  f"apart {apart:.1e}  {served}", flush=True)
        if alone > 0:
            from power_clock import print_held_alone
            print_held_alone(sides, alone)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    case_args(ap)
    ap.add_argument("--only", default="dsv3_fc1_ep8,dsv3_fc2_ep8", help="comma-separated case names")
    ap.add_argument("--ops", default="fprop,dgrad")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kernels", default="",
                    help="comma-separated kiln kernels to time as well, each held to its op "
                         "(KILN_KERNEL)")
    ap.add_argument("--alone", type=float, default=0.0,
                    help="then hold each side alone this many seconds (clock, power, energy)")
    a = ap.parse_args()
    try:
        import deep_gemm as dg
    except ImportError as e:
        sys.exit(f"deepgemm_peer.py: DeepGEMM is not importable here ({e}); nothing to compare")
    only = set(a.only.split(","))
    kilns = [("kiln", fb.Kiln())] + [(k, fb.Kiln(only_kernel=k)) for k in a.kernels.split(",") if k]
    print(f"device: {torch.cuda.get_device_name()}; deep_gemm {getattr(dg, '__version__', '?')}; "
          f"{a.rounds} rounds of {a.reps} calls a side", flush=True)
    for name, K, N, sizes in load_cases(a.bench, a.cases):
        if name in only:
            run_case(dg, kilns, name, K, N, sizes, a.ops.split(","), a.reps, a.rounds, a.alone)


if __name__ == "__main__":
    main()
