#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Is the fp8 block recipe's gap to row-wise promotion the kernel or the data?

Times two kernels of the same tile and schedule (by default
sm90_fprop_e4m3_row_promote_128x128, 6 stages, and the tables' 128x128
cooperative block kernel, 5 stages: the 6-stage block default this script
was written for left the catalog in the thirtieth session; or the
comma-separated names given) on the dsv3_fc1/fc2 shapes: first on the
same fp8 bits (row-quantized, every scale 1, so both compute the same sums and
their outputs are compared), then each on its own recipe's quantized data.
Three alternating rounds of 20 CUDA-event timings, the median; then the SM
clock and board power (nvidia-smi, median of 50 ms samples) while each runs
for 1.5 s.  A kernel that is slower on the same bits at the same clock is
slower by its code, not by what its data costs in power (docs/fp8.md).
PROBE_NCU=1 only runs each call twice (for ncu).
"""
import os
import pathlib
import statistics
import subprocess
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "python" / "bench"))
sys.path.insert(0, str(ROOT / "bench"))
import fp8_bench as fb  # noqa: E402  (quantizers, the Kiln wrapper, timed)
from kiln import _lib  # noqa: E402

CASES = {"dsv3_fc1_ep8": (7168, 4096), "dsv3_fc2_ep8": (2048, 7168)}   # K, N; 32 x 1024 rows
DEFAULT = ["sm90_fprop_e4m3_row_promote_128x128",
           "fprop_sm90_e4m3_block__m128_n128_k128_s5_c1x1_rgroup_cooperative"]


def clock_power(fn, secs=1.5):
    """Median SM clock (MHz) and board power (W) while fn runs back to back."""
    p = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                          "--format=csv,noheader,nounits", "-lms", "50"],
                         stdout=subprocess.PIPE, text=True)
    t0 = time.time()
    while time.time() - t0 < secs:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    p.terminate()
    samples = [line.split(",") for line in p.communicate()[0].strip().splitlines()[3:]
               if "," in line]
    if not samples:
        return 0.0, 0.0
    return (statistics.median(float(c) for c, _ in samples),
            statistics.median(float(w) for _, w in samples))


def calls(kernels, K, N):
    """{label: call} for each kernel on the same bits and on its own data, and
    each kernel's same-bits output."""
    G, T = 32, 32 * 1024
    offs = torch.arange(1, G + 1, device="cuda", dtype=torch.int32) * 1024
    x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16) * 0.05
    xq, xs = fb.quant_rows(x)
    wq, ws = fb.quant_rows(w.view(G * N, K))
    wq, ws = wq.view(G, N, K), ws.view(G, N)
    xb, xbs = fb.quant_blocks_1x128(x)
    wb, wbs = fb.quant_blocks_128x128(w)
    nkb, nnb = (K + 127) // 128, (N + 127) // 128
    ones_row = (torch.ones(T, device="cuda"), torch.ones(G, N, device="cuda"))
    ones_block = (torch.ones(nkb, T, device="cuda"), torch.ones(G, nnb, nkb, device="cuda"))
    fns, outs, keep = {}, {}, []
    for k in kernels:
        kl = fb.Kiln(k)
        keep.append(kl)
        block = "_block" in k
        recipe = _lib.FP8_BLOCK if block else _lib.FP8_ROW
        same = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
        own = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
        sa, sb = ones_block if block else ones_row
        fns[k + " same-bits"] = kl.run(_lib.OP_FPROP, recipe, 1, xq, wq, same, sa, sb, offs, G, N, K)
        if block:
            fns[k + " own-data"] = kl.run(_lib.OP_FPROP, recipe, 1, xb, wb, own, xbs, wbs, offs,
                                          G, N, K)
        else:
            fns[k + " own-data"] = kl.run(_lib.OP_FPROP, recipe, 1, xq, wq, own, xs, ws, offs,
                                          G, N, K)
        outs[k] = same
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    return fns, outs, keep, 2.0 * T * N * K


def main():
    kernels = sys.argv[1].split(",") if len(sys.argv) > 1 else DEFAULT
    torch.manual_seed(0)
    for name, (K, N) in CASES.items():
        fns, outs, _keep, flops = calls(kernels, K, N)
        if os.environ.get("PROBE_NCU"):
            for fn in fns.values():
                fn()
                fn()
            torch.cuda.synchronize()
            return
        if len(kernels) > 1:
            a, b = outs[kernels[0]].float(), outs[kernels[1]].float()
            print(f"{name}: same-bits outputs rel diff {((a - b).norm() / a.norm()).item():.2e}")
        times = {k: [] for k in fns}
        for rnd in range(3):
            for k in (list(fns) if rnd % 2 == 0 else list(reversed(list(fns)))):
                times[k].append(fb.timed(fns[k], 20))
        for k, ts in times.items():
            ms = statistics.median(ts)
            clk, pw = clock_power(fns[k])
            print(f"{name:14s} {k:55s} {ms:8.4f} ms {flops / ms / 1e9:7.1f} TFLOP/s  "
                  f"sm {clk:5.0f} MHz  {pw:5.0f} W", flush=True)


if __name__ == "__main__":
    main()
