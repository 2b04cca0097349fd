#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The host time kiln's Python side spends per call, with no GPU.

kiln_gemm and kiln_prepare are replaced by no-ops (returning KILN_OK; the
gemm zeroes a dense output), the
context by a stand-in, and the tensors are tiny CPU tensors (the package's
device check let through, as the emulated tests do), so what is timed is
the Python path from the call down to the C call: checks, the kiln_problem,
the output allocation, the stream.  The current stream is a stand-in too
(on a GPU, torch.cuda.current_stream(dev), which the package used before,
costs a few microseconds more than the raw-stream call it uses now: not
counted here).

Per kiln call (kt.launch: fprop with bias and row scale, dgrad, wgrad; the
public grouped_mm, fp8's scaled_grouped_mm and quantize_rows) and
per MoE MLP step (fc1 -> SwiGLU -> fc2 on GroupedLinear, forward and
backward, as python/bench/layer_bench.py runs it), in microseconds, with
the number of aten ops a step dispatches.

    python/bench/host_overhead.py                  # this checkout's python/
    python/bench/host_overhead.py --package DIR    # the kiln package in DIR (e.g.
                                                   # an older one, `git show`n there)
"""
import argparse
import ctypes
import os
import sys
import threading
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--package", help="the folder holding the kiln package to time "
                "(default: this checkout's python/)")
ap.add_argument("--iters", type=int, default=2000)
ap.add_argument("--refuse-dbias", action="store_true",
                help="the stubbed library refuses a fused bias gradient (KILN_ERROR_UNSUPPORTED), "
                "as one without the dbias kernels does: the package falls back to torch")
ap.add_argument("--json", action="store_true", help="one JSON line instead of the table")
args = ap.parse_args()
sys.path.insert(0, args.package or os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import kiln  # noqa: E402
import kiln.nn  # noqa: E402
from kiln import _lib  # noqa: E402
from kiln import _torch as kt  # noqa: E402


def _noop(*a):
    return 0


_ELEM = {0: 2, 1: 2, 2: 4}


def _gemm(ctx, p, stream):
    """Zeroes a dense output (so that the torch ops reading it time as on
    real data: uninitialised memory holds NaNs and denormals, slow on the
    CPU); a few hundred nanoseconds, in both packages alike."""
    if not isinstance(p, int):
        p = ctypes.addressof(p._obj)
    q = _lib.Problem.from_address(p)
    if q.d_out:
        rows = q.groups * q.n if q.op == _lib.OP_WGRAD else q.capacity
        ctypes.memset(q.d_out, 0, rows * q.ldd * _ELEM[q.out_type])
    return 0


def _prepare(ctx, p):
    if not args.refuse_dbias:
        return 0
    if not isinstance(p, int):
        p = ctypes.addressof(p._obj)
    has_dbias = getattr(_lib.Problem.from_address(p), "d_dbias", None)
    return 8 if has_dbias else 0  # KILN_ERROR_UNSUPPORTED


def stub_library():
    """No-op C calls, a stand-in context on 'device 0', CPU tensors let in."""
    _lib.kiln_gemm = _gemm
    _lib.kiln_prepare = _prepare
    _lib.kiln_quantize = _noop
    _lib.kiln_last_error = lambda h: b"no kernel computes the bias gradient yet"
    _lib.kiln_context_destroy = _noop  # the stand-in context has nothing to destroy
    kt._DEVICES = ("cuda", "meta", "cpu")
    ctx = object.__new__(_lib.Context)
    ctx._ctx, ctx.device, ctx._lock = ctypes.c_void_p(0x1000), 0, threading.Lock()
    ctx.prepared, ctx.no_dbias = set(), set()
    kt._contexts[0] = ctx
    torch.cuda.current_device = lambda: 0

    class _Stream:
        cuda_stream = 0

    torch.cuda.current_stream = lambda *a: _Stream()
    if hasattr(kt, "_raw_stream"):
        kt._raw_stream = lambda index: 0


def per_call_us(fn, iters):
    for _ in range(50):
        fn()
    runs = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        runs.append((time.perf_counter() - t0) / iters * 1e6)
    # The least of 7 runs: this measures code, on a machine others share.
    return min(runs)


class CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


def main():
    stub_library()
    torch.manual_seed(0)
    bf = torch.bfloat16
    G, K, N = 8, 64, 128
    counts = [3, 0, 1, 5, 2, 0, 4, 1]
    T = sum(counts)
    offs = torch.tensor(counts, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    x = torch.randn(T, K, dtype=bf)
    w = torch.randn(G, N, K, dtype=bf)
    bias = torch.randn(G, N, dtype=bf)
    s = torch.rand(T)
    dy = torch.randn(T, N, dtype=bf)
    calls = {
        "fprop+bias+scale": lambda: kt.launch(x, w.transpose(-2, -1), offs, bias=bias,
                                              row_scale=s, scale_bias=True),
        "dgrad+scale": lambda: kt.launch(dy, w, offs, row_scale=s),
        "wgrad": lambda: kt.launch(dy.t(), x, offs, out_dtype=bf),
        "grouped_mm (public)": lambda: kiln.grouped_mm(x, w.transpose(-2, -1), offs),
    }
    if hasattr(kiln, "scaled_grouped_mm"):
        # fp8 (a package from before it has none): the row-wise call and the
        # activations' quantizer
        e4 = torch.float8_e4m3fn
        xq, wq = x.to(e4), w.to(e4)
        sa, sb = torch.rand(T), torch.rand(G, N)
        calls["scaled_grouped_mm (public)"] = lambda: kiln.scaled_grouped_mm(
            xq, wq.transpose(-2, -1), sa, sb, offs, use_fast_accum=True)
        calls["quantize_rows (public)"] = lambda: kiln.quantize_rows(x, offs)
    res = {name: per_call_us(fn, args.iters) for name, fn in calls.items()}

    fc1 = kiln.nn.GroupedLinear(G, K, 2 * N, device="cpu")
    fc2 = kiln.nn.GroupedLinear(G, N, K, device="cpu")
    xs = torch.randn(T, K, dtype=bf, requires_grad=True)
    probs = torch.rand(T)
    dys = torch.randn(T, K, dtype=bf)
    params = list(fc1.parameters()) + list(fc2.parameters())

    def step():
        for p in params:
            p.grad = None
        xs.grad = None
        a, g = fc1(xs, offs, sizes="offsets").chunk(2, dim=-1)
        y = fc2(torch.nn.functional.silu(a) * g, offs, probs, sizes="offsets")
        y.backward(dys)

    res["layer step (fc1, fc2 fwd+bwd)"] = per_call_us(step, max(args.iters // 10, 20))
    with CountOps() as c:
        step()
    if args.json:
        import json
        print(json.dumps({"package": kiln.__file__, "us": res, "aten_ops_per_step": len(c.ops),
                          "ops": c.ops}))
        return
    print(f"# kiln Python host overhead, C calls stubbed ({kiln.__file__}), torch "
          f"{torch.__version__}, library {'refusing' if args.refuse_dbias else 'fusing'} dbias")
    for name, us in res.items():
        print(f"{name:32} {us:8.1f} us")
    print(f"{'aten ops per layer step':32} {len(c.ops):8d}")


if __name__ == "__main__":
    main()
