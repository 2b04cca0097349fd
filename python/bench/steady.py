# SPDX-License-Identifier: Apache-2.0
"""Timing a kernel against its peer at the card's steady state, in one process.

Large GEMMs run an H200 into its 700 W power limit within a fraction of a
second, and its clocks then fall by 10-20% (docs/benchmarks.md, twelfth
session).  A side timed right after a pause runs faster than the same side
timed after the other one; timing each side once, one after the other,
measures the order as much as the kernels.  So `alternate` first warms the
card with both sides in turn for `warm_s` seconds, then times them in
`rounds` rounds, the order flipping each round, and gives each side the
median over all its timed calls.

Each round enqueues `reps` calls of a side back to back with a CUDA event
between consecutive calls and reads the events once at the end: a call's
time is the GPU's alone, not the host's launch work (with a synchronisation
per call, a 0.1 ms kernel would carry tens of microseconds of Python).
"""
import math
import statistics
import time

import torch

L2_SPAN = 2 * 50 * 2**20   # twice an H100's or H200's L2 (50 MiB)


def _burst(fn, reps):
    """reps back-to-back calls; the GPU time of each, in ms."""
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    ev[0].record()
    for i in range(reps):
        fn()
        ev[i + 1].record()
    ev[-1].synchronize()
    return [ev[i].elapsed_time(ev[i + 1]) for i in range(reps)]


def _named_burst(name, fn, reps):
    """_burst, an error in it naming the side: each burst ends in a
    synchronisation, so a fault it reports is that side's."""
    try:
        return _burst(fn, reps)
    except Exception as e:   # torch.AcceleratorError, among others
        raise RuntimeError(f"side {name!r}: {e}") from e


def alternate(sides, reps=20, rounds=3, warm_s=0.3):
    """sides: {name: fn}.  Returns {name: median ms} over rounds x reps calls
    each, the sides taking turns after warm_s seconds of taking turns."""
    names = list(sides)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warm_s:
        for n in names:
            _named_burst(n, sides[n], 2)
    times = {n: [] for n in names}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            times[n] += _named_burst(n, sides[n], reps)
    return {n: statistics.median(t) for n, t in times.items()}


def copies(*tensors):
    """[tensors, copy, ...]: the tensors and clones of them (strides kept)
    that together span at least L2_SPAN (16 sets at most), for graphed
    calls that take them in turn: no call then finds its operands in the
    L2 where the previous one left them."""
    size = sum(t.numel() * t.element_size() for t in tensors)
    n = max(1, min(16, math.ceil(L2_SPAN / size)))
    return [tuple(tensors)] + [tuple(t.clone() for t in tensors) for _ in range(n - 1)]


def graphed(fns, calls):
    """fns: callables of one side, each on its own copy of the operands.
    Returns a function that replays `calls` calls, fns taken in turn,
    captured once in a CUDA graph: its time over `calls` is a call's GPU
    time with no host work between calls, as a serving framework's decode
    step replays them, and the copies keep consecutive calls from reading
    the previous call's weights out of the L2.  Each fn runs once first,
    outside the capture, on a side stream as torch's graph notes ask (kiln
    resolves its kernels there)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in fns:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fns[i % len(fns)]()

    def replay():
        g.replay()
    # the graph reads and writes the tensors the fns hold, through raw
    # pointers: they live as long as it does
    replay.fns = fns
    return replay
