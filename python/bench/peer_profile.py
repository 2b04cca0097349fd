#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One call each of kiln's bf16 grouped GEMM and torch._grouped_mm's, on
the same tensors, inside a profiler window, for `ncu --profile-from-start
off`: both kernels of a case and op profiled in one process, so that what
ncu reports (bytes from DRAM, L2 hit rate, clocks) compares the two on the
same problem.  The operands are those of bf16_bench.py.

    ncu --clock-control none --profile-from-start off -k regex:'kiln_|device_kernel' \\
        --section SpeedOfLight --section MemoryWorkloadAnalysis -o rep \\
        python3 python/bench/peer_profile.py --only mixtral_fc1 --ops fprop,dgrad
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
from bf16_bench import operands  # noqa: E402
from torch_peer import case_args, case_operands, load_cases  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    case_args(ap)
    ap.add_argument("--only", required=True, help="comma-separated case names")
    ap.add_argument("--ops", default="fprop,dgrad")
    ap.add_argument("--warm", type=int, default=20, help="calls of each side before the window")
    a = ap.parse_args()
    only = set(a.only.split(","))
    torch.manual_seed(0)
    for name, K, N, sizes in load_cases(a.bench, a.cases):
        if name not in only:
            continue
        offs, _, x, w, dy = case_operands(K, N, sizes)
        for op in a.ops.split(","):
            mat_a, mat_b = operands(op, x, w, dy)
            out = torch.empty_like(torch._grouped_mm(mat_a, mat_b, offs=offs))
            for _ in range(a.warm):
                kiln.grouped_mm(mat_a, mat_b, offs, out=out)
                torch._grouped_mm(mat_a, mat_b, offs=offs)
            torch.cuda.synchronize()
            print(f"{name} {op}: kiln, then torch", flush=True)
            torch.cuda.profiler.start()
            kiln.grouped_mm(mat_a, mat_b, offs, out=out)
            torch._grouped_mm(mat_a, mat_b, offs=offs)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        del x, w, dy
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
