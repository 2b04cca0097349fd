#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where a call's time goes, CTA by CTA: one case's fprop or dgrad on a
diagnostic libkiln (`scripts/trial_build.sh OUT KILN_TIMELINE`: its sm90
GEMM kernels stamp each CTA's timeline into the buffer behind d_overflow,
templates/sm90_gemm.cuh), run on its own after a sync and then as the
last of a burst of back-to-back calls, each over its own copy of the
operands (no call finds its weights in the L2).

Per CTA, from its stamps (globaltimer, ns): setup (entry to the schedule
built and the cluster's barriers ready), ramp (to its first k-block's
bytes in shared memory), stream (to its last k-block's wgmma done), wait
and sum (to its cut tile's sum: the slowest piece of its cluster, then the
adds; for a k-cut cluster also in its parts), epilogue (to its stores done).  Printed: each phase's min, median and
max over the CTAs, the span from the first entry to the last exit, and the
weights' rate: the call's weight bytes over the median stream phase (the
streaming CTAs run at once) and over the span.

    KILN_LIBRARY=/tmp/tl/libkiln.so KILN_KERNEL=sm90_fprop_bf16_128x256_kc4 \\
        python/bench/timeline.py --cases bench/ep_decode.tsv --only mixtral_fc2_ep8_dec --op fprop
"""
import argparse
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from kiln import _lib  # noqa: E402
from steady import copies  # noqa: E402
import torch_peer  # noqa: E402

# templates/sm90_gemm.cuh's KILN_TL_* stamps, in order, and the buffer's layout
STAMPS = ["entry", "setup", "first_full", "main_end", "summed", "exit", "first_load", "last_load",
          "both_done", "written", "peers_in"]
ROW = len(STAMPS) + 1   # then (smid << 32 | cluster rank)
HEAD = 8                # 64 bytes: the overflow flag's
MAX_CTAS = 1024
PHASES = [("setup", "entry", "setup"), ("ramp", "setup", "first_full"),
          ("stream", "first_full", "main_end"), ("wait+sum", "main_end", "summed"),
          # a k-cut tile's sum, in its parts (kiln_kcut_finish): the other
          # warp group's main loop, every ring free and the parts sent, the
          # last of the parts it sums to land, the adds
          ("wg wait", "main_end", "both_done"), ("send", "both_done", "written"),
          ("arrive", "written", "peers_in"), ("adds", "peers_in", "summed"),
          ("epilogue", "summed", "exit")]


def rows_of(buf):
    """The CTAs' stamps ({name: ns}, smid, rank) that the last call wrote."""
    out = []
    for c in range(MAX_CTAS):
        r = buf[HEAD + c * ROW: HEAD + (c + 1) * ROW]
        if r[0] == 0:
            continue
        out.append(dict(zip(STAMPS, r[:len(STAMPS)]), cta=c, sm=r[-1] >> 32, rank=r[-1] & 0xFFFFFFFF))
    return out


def report(title, rows, weight_bytes):
    if not rows:
        print(f"{title}: no CTA stamped (not a timeline build, or not an sm90 GEMM kernel)")
        return
    t0 = min(r["entry"] for r in rows)
    span = max(r["exit"] for r in rows) - t0
    print(f"{title}: {len(rows)} CTAs on {len({r['sm'] for r in rows})} SMs, "
          f"first entry to last exit {span / 1e3:.2f} us")
    print(f"  {'phase':10s} {'min':>8s} {'median':>8s} {'max':>8s}   (us; CTAs with the stamps)")
    for name, a, b in PHASES:
        d = [(r[b] - r[a]) / 1e3 for r in rows if r[a] and r[b]]
        if d:
            print(f"  {name:10s} {min(d):8.2f} {statistics.median(d):8.2f} {max(d):8.2f}   ({len(d)})")
    print(f"  {'at':10s} {'min':>8s} {'median':>8s} {'max':>8s}   (us after the first entry)")
    for s in STAMPS:
        d = [(r[s] - t0) / 1e3 for r in rows if r[s]]
        if d:
            print(f"  {s:10s} {min(d):8.2f} {statistics.median(d):8.2f} {max(d):8.2f}")
    streams = [r["main_end"] - r["first_full"] for r in rows if r["first_full"] and r["main_end"]]
    if streams:
        med = statistics.median(streams)
        print(f"  weights {weight_bytes / 1e6:.1f} MB over the median stream phase: "
              f"{weight_bytes / med / 1e3:.2f} TB/s; over the span: {weight_bytes / span / 1e3:.2f} TB/s")
    ticks = sorted({r[s] % 1000 for r in rows for s in STAMPS if r[s]})
    print(f"  timer: {len(ticks)} distinct sub-microsecond parts among the stamps "
          f"(1: the timer ticks by the microsecond)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    torch_peer.case_args(ap)
    ap.add_argument("--only", required=True, help="the case's name")
    ap.add_argument("--op", default="fprop", choices=["fprop", "dgrad"])
    ap.add_argument("--burst", type=int, default=8, help="back-to-back calls; the last is reported")
    ap.add_argument("--dump", default="", help="also write every CTA's stamps to this file (tsv)")
    a = ap.parse_args()
    case = [c for c in torch_peer.load_cases(a.bench, a.cases) if c[0] == a.only]
    if not case:
        sys.exit(f"timeline.py: no case {a.only!r} in {a.cases}")
    name, K, N, sizes = case[0]
    G, T = len(sizes), sum(sizes)
    torch.manual_seed(0)
    offs, bounds, x, w, dy = torch_peer.case_operands(K, N, sizes)
    if a.op == "fprop":
        kop, src, shape = _lib.OP_FPROP, x, (T, N)
    else:
        kop, src, shape = _lib.OP_DGRAD, dy, (T, K)
    ref = torch_peer.reference(a.op, x, w, dy, bounds)
    buf = torch.zeros(HEAD + MAX_CTAS * ROW, dtype=torch.int64, device="cuda")
    ctx = _lib.Context(allowed_backends=1)
    out = torch.empty(shape, device="cuda", dtype=torch.bfloat16)
    calls = []
    for s, w_ in copies(src, w):
        p = _lib.new_problem(kop)
        p.a_type = p.b_type = p.out_type = _lib.DTYPE_BF16
        p.groups, p.n, p.k, p.capacity = G, N, K, T
        p.d_sizes, p.sizes_kind = offs.data_ptr(), _lib.SIZES_OFFSETS
        p.d_a, p.d_b, p.d_out, p.d_overflow = s.data_ptr(), w_.data_ptr(), out.data_ptr(), buf.data_ptr()
        ctx.prepare(p)
        calls.append(lambda p=p: ctx.gemm(p, torch.cuda.current_stream().cuda_stream))
    for fn in calls:   # each copy once: the kernel loaded, the copies touched
        fn()
    torch.cuda.synchronize()
    err = torch_peer.rel_err(out, ref)
    kernel = ctx.last_call()["kernel"]
    print(f"{name} {a.op}: G {G}, T {T}, N {N}, K {K}; kernel {kernel}; relative error {err:.1e}")
    if err > 1e-2:
        sys.exit("timeline.py: the output is wrong")
    if buf[HEAD:].abs().sum().item() == 0:
        sys.exit(f"timeline.py: {kernel} stamped nothing: KILN_LIBRARY must name a timeline build "
                 "(scripts/trial_build.sh OUT KILN_TIMELINE) and the kernel be an sm90 GEMM")
    weight_bytes = w.numel() * w.element_size()
    results = []
    for title, n in (("alone, after a sync", 1), (f"last of {a.burst} back to back", a.burst)):
        buf.zero_()
        torch.cuda.synchronize()
        for i in range(n):
            calls[(i + 1) % len(calls)]()
        torch.cuda.synchronize()
        rows = rows_of(buf.tolist())
        report(title, rows, weight_bytes)
        results.append((title, rows))
    if a.dump:
        with open(a.dump, "w") as f:
            f.write("run\tcta\tsm\trank\t" + "\t".join(STAMPS) + "\n")
            for title, rows in results:
                for r in rows:
                    f.write(f"{title}\t{r['cta']}\t{r['sm']}\t{r['rank']}\t" +
                            "\t".join(str(r[s]) for s in STAMPS) + "\n")


if __name__ == "__main__":
    main()
