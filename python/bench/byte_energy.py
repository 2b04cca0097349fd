#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What moving bytes through HBM costs in energy, held alone.

At the H200's 700 W limit a GEMM's time is its energy a call over the
power it may draw, so the bytes a call must move cost time through their
energy even when the tensor cores are the busier unit.  This probe gives
the card's figure for that cost, the same day as the GEMMs it explains:
three memory-bound kernels (a fill that only writes, a sum that only
reads, a copy that does both) each run back to back for --seconds under
nvidia-smi sampling (power_clock.sample_while), after the idle card's
power is sampled with nothing running.  Each line gives the rate, the
power, the energy a call, and the energy a GB moved above the idle
card's draw (the part the bytes add; the idle draw is spent whatever
runs).  docs/fp8.md ("Sixty-eighth session") uses it for the difference
between fp8 dgrad and fprop on shapes whose dgrad writes the wider
output.

    python/bench/byte_energy.py [--gib 2] [--seconds 2]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from power_clock import sample_while  # noqa: E402


def idle_watts(seconds):
    """The median board power over `seconds` with no kernel running."""
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=power.draw",
                            "--format=csv,noheader,nounits", "-lms", "20"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(seconds)
    smi.terminate()
    out, _ = smi.communicate()
    watts = []
    for line in out.splitlines():
        try:
            watts.append(float(line))
        except ValueError:
            continue
    return statistics.median(watts) if watts else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=2.0, help="bytes a call reads or writes, GiB")
    ap.add_argument("--seconds", type=float, default=2.0, help="each kernel back to back")
    a = ap.parse_args()
    n = int(a.gib * 2**30) // 2        # bf16 elements
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    acc = torch.empty((), device="cuda", dtype=torch.float32)
    gb = n * 2 / 1e9
    # the sum must read every element: checked against a float64 sum of the
    # same data (its rounding is far below this bound on random data)
    want = src.double().sum().item()
    torch.sum(src, dim=0, dtype=torch.float32, out=acc)
    if abs(acc.item() - want) > 1e-3 * max(1.0, src.double().abs().sum().item()):
        print(f"sum WRONG: {acc.item()} against {want}")
        return 1
    dst.copy_(src)
    if not torch.equal(dst, src):
        print("copy WRONG")
        return 1
    kernels = {
        "write (fill)": (lambda: dst.fill_(1.0), gb, 0.0),
        "read (sum)": (lambda: torch.sum(src, dim=0, dtype=torch.float32, out=acc), 0.0, gb),
        "copy": (lambda: dst.copy_(src), gb, gb),
    }
    for _, (fn, _, _) in kernels.items():
        fn()
    torch.cuda.synchronize()
    time.sleep(1.0)
    w0 = idle_watts(1.0)
    print(f"device: {torch.cuda.get_device_name()}; {a.gib:g} GiB a call; idle {w0:.0f} W")
    for name, (fn, wr, rd) in kernels.items():
        ms, mhz, watts = sample_while(fn, a.seconds)
        moved = wr + rd
        mj = watts * ms
        above = (watts - w0) * ms
        print(f"  {name:13s} {ms:8.4f} ms  {moved / ms:6.3f} TB/s  at {mhz:.0f} MHz, {watts:.0f} W:"
              f" {mj:6.1f} mJ a call, {mj / moved:6.1f} mJ/GB, {above / moved:6.1f} mJ/GB above idle"
              f"  (written {wr:.2f} GB, read {rd:.2f} GB)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
