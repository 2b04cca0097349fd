#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The SM clock and board power while kiln's wgrad runs back to back,
overwriting bf16 dW and accumulating into an fp32 main grad, on the same
case in one process: whether accumulating costs time because of its extra
bytes or because they push the card into its power limit.

For each case and mode: the output is checked against an fp32 product
(relative Frobenius error, 1e-2 for bf16, 1e-4 for the f32 accumulation,
whose old value is random), then the call runs back to back for --seconds
while nvidia-smi samples clocks.sm and power.draw every 20 ms; the row
gives the call's median time (CUDA events around batches of 10 calls), the
median clock and power over the samples of the run's second half (after
the ramp), and the time the call would take at the overwrite run's clock
if it scaled with the clock alone.

    python/bench/power_clock.py --bench build/bench/kiln_bench --only balanced32,mixtral_fc1
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import kiln  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(HERE, ".."))
    import kiln  # noqa: F401
from kiln import _torch as kt  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from torch_peer import case_args, load_cases, reference, rel_err  # noqa: E402


def sample_while(fn, seconds):
    """Runs fn in batches for `seconds` under nvidia-smi sampling; returns
    (median ms per call, median MHz, median W) over the second half."""
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                            "--format=csv,noheader,nounits", "-lms", "20"],
                           stdout=subprocess.PIPE, text=True)
    t0 = time.time()
    times = []
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    while time.time() - t0 < seconds:
        ev[0].record()
        for _ in range(10):
            fn()
        ev[1].record()
        ev[1].synchronize()
        times.append((time.time() - t0, ev[0].elapsed_time(ev[1]) / 10))
    smi.terminate()
    out, _ = smi.communicate()
    samples = []
    for line in out.splitlines():
        try:
            mhz, w = (float(v) for v in line.split(","))
            samples.append((mhz, w))
        except ValueError:
            continue
    half = samples[len(samples) // 2:] or samples
    late = [ms for t, ms in times if t > seconds / 2] or [ms for _, ms in times]
    return (statistics.median(late), statistics.median(m for m, _ in half),
            statistics.median(w for _, w in half))


def print_held_alone(sides, seconds):
    """Each side ({name: fn}) alone for `seconds` under sample_while: a line
    per side with its time, clock, power and energy a call at steady state."""
    for name, fn in sides.items():
        ms, mhz, watts = sample_while(fn, seconds)
        print(f"  {name:12s} alone for {seconds:g} s: {ms:8.4f} ms at {mhz:.0f} MHz,"
              f" {watts:.0f} W: {watts * ms:.0f} mJ a call", flush=True)


def run_case(name, K, N, sizes, seconds):
    dev = "cuda"
    G, T = len(sizes), sum(sizes)
    offs = torch.tensor(sizes, device=dev, dtype=torch.int32).cumsum(0).to(torch.int32)
    ends = offs.tolist()
    bounds = list(zip([0] + ends[:-1], ends))
    x = torch.randn(T, K, device=dev, dtype=torch.bfloat16)
    dy = torch.randn(T, N, device=dev, dtype=torch.bfloat16)
    ref = reference("wgrad", x, None, dy, bounds)
    out = torch.empty(G, N, K, device=dev, dtype=torch.bfloat16)
    acc = torch.randn(G, N, K, device=dev, dtype=torch.float32)
    old = acc.clone()

    def over():
        kt.launch(dy.t(), x, offs, out=out)

    def accum():
        kt.launch(dy.t(), x, offs, out=acc, out_dtype=torch.float32, accumulate=True)

    over()
    accum()
    e_over, e_acc = rel_err(out, ref), rel_err(acc - old, ref)
    del ref, old
    if not (e_over < 1e-2 and e_acc < 1e-4):
        print(f"{name:16s} WRONG: relative error overwrite {e_over:.2e}, accumulate {e_acc:.2e}")
        return False
    rows = {}
    for mode, fn in (("overwrite", over), ("accumulate", accum)):
        rows[mode] = sample_while(fn, seconds)
    ms0, mhz0, _ = rows["overwrite"]
    for mode, (ms, mhz, w) in rows.items():
        print(f"{name:16s} {mode:10s} {ms:8.4f} ms {mhz:6.0f} MHz {w:6.1f} W"
              f"  at the overwrite clock: {ms * mhz / mhz0:8.4f} ms"
              f" ({ms * mhz / mhz0 / ms0 - 1:+.1%} over overwrite; {ms / ms0 - 1:+.1%} as run)",
              flush=True)
    del x, dy, out, acc
    torch.cuda.empty_cache()
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    case_args(ap)
    ap.add_argument("--only", default="balanced32,mixtral_fc1")
    ap.add_argument("--seconds", type=float, default=4.0)
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}; {a.seconds} s a mode, nvidia-smi every 20 ms")
    ok = True
    for name, K, N, sizes in load_cases(a.bench, a.cases):
        if name in only:
            ok = run_case(name, K, N, sizes, a.seconds) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
