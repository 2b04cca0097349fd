# SPDX-License-Identifier: Apache-2.0
"""What one launch takes to move a call's compulsory bytes, and nothing else.

A case's floor (bench/torch_peer.py's floor_ms) prices its bytes at the
copy bandwidth, 4.3 TB/s, as if a launch streamed at that rate from its
first nanosecond to its last.  A short call cannot: a launch starts its
CTAs, waits for the first loads to come back, and drains its last stores,
and a graph still spaces its kernels.  For decode-sized calls (a few MB
to ~100 MB of weights, 10-60 us) that fixed part is a large share of the
floor.  This side measures it: one Triton launch that reads every element
of the call's operands and writes every element of its output, with no
arithmetic beyond a sum that keeps the loads live, timed the same way as
kiln and torch (the same operand copies, N calls a graph).  Its
time is what any one kernel needs for those bytes on the day; kiln's time
over it is what kiln's own work costs (bf16_bench.py --stream).
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024    # elements a program moves per step
STEPS = 8       # steps a program: 16 KiB of bf16 each


@triton.jit
def _read(src, n, first, sink, pid, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    base = first.to(tl.int64) * (BLOCK * STEPS)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in tl.static_range(STEPS):
        offs = base + s * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(src + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(sink + pid, tl.sum(acc, axis=0))


@triton.jit
def _stream(a, na, b, nb, out, nout, sink, pa, pb, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    """Programs [0, pa) read a, [pa, pa + pb) read b, the rest write out;
    a reader's sum goes to sink[pid] so its loads are not dropped."""
    pid = tl.program_id(0)
    if pid < pa:
        _read(a, na, pid, sink, pid, BLOCK, STEPS)
    elif pid < pa + pb:
        _read(b, nb, pid - pa, sink, pid, BLOCK, STEPS)
    else:
        base = (pid - pa - pb).to(tl.int64) * (BLOCK * STEPS)
        for s in tl.static_range(STEPS):
            offs = base + s * BLOCK + tl.arange(0, BLOCK)
            tl.store(out + offs, tl.zeros([BLOCK], dtype=out.dtype.element_ty), mask=offs < nout)


def flat(t):
    """t's elements as a 1-D view of its storage: t, or t with its last two
    dimensions swapped, must be contiguous (a transposed weight is)."""
    for v in (t, t.transpose(-2, -1) if t.dim() >= 2 else t):
        if v.is_contiguous():
            return v.reshape(-1)
    raise ValueError(f"stream_peer: a tensor of shape {tuple(t.shape)} and strides {t.stride()}"
                     " is not a contiguous block")


def stream_fn(a, b, out):
    """A callable that makes one launch reading all of a and b and writing
    all of out."""
    fa, fb, fo = flat(a), flat(b), flat(out)
    chunk = BLOCK * STEPS
    pa, pb, po = (-(-x.numel() // chunk) for x in (fa, fb, fo))
    sink = torch.empty(pa + pb, dtype=torch.float32, device=a.device)

    def launch():
        _stream[(pa + pb + po,)](fa, fa.numel(), fb, fb.numel(), fo, fo.numel(), sink, pa, pb,
                                 BLOCK=BLOCK, STEPS=STEPS)
    launch.sink = sink
    return launch
