# SPDX-License-Identifier: Apache-2.0
"""fp8 from torch: kiln.scaled_grouped_mm, torch._scaled_grouped_mm on kiln's
fp8 kernels (the row-wise, 1x128/128x128 block and per-tensor recipes of
kiln.h's kiln_fp8), and the quantizers that feed it (kiln_quantize):
kiln.quantize_rows for activations and gradients, kiln.quantize_weights for
the weights and their transposed copy.

As in kiln._torch: every check on shapes, dtypes, devices and strides is made
before any launch and names the argument; a checked call kind is kept, so a
later call of the same kind only writes its pointers and calls kiln_gemm.
"""
import ctypes
import threading
from typing import List, Optional

import torch

from . import _lib
from . import _torch as kt

_FP8_DTYPES = {torch.float8_e4m3fn: _lib.DTYPE_E4M3, torch.float8_e5m2: _lib.DTYPE_E5M2}
_WHO = "kiln.scaled_grouped_mm"
_OPS = {"fprop": _lib.OP_FPROP, "dgrad": _lib.OP_DGRAD}
_LAYOUTS = ("scale_a [T] and scale_b [G,N] (row-wise, torch._scaled_grouped_mm's), "
            "scale_a [T,ceil(K/128)] k-block major and scale_b [G,ceil(N/128),ceil(K/128)] "
            "(1x128 and 128x128 blocks), or scale_a of one element and scale_b [G] (per tensor)")


def _fail(msg, exc=ValueError):
    kt._fail(msg, exc)


def _check_fp8(name, t):
    if t.dtype not in _FP8_DTYPES:
        _fail(f"{name} is {t.dtype}; kiln's fp8 GEMMs take float8_e4m3fn or float8_e5m2",
              TypeError)


def _check_scale(name, t, device, dims, need):
    kt._check_tensor(name, t)
    kt._check_device(name, t, device)
    if t.dtype != torch.float32:
        _fail(f"{name} is {t.dtype}; kiln's fp8 scales are float32", TypeError)
    if t.dim() not in dims:
        _fail(f"{name} has shape {tuple(t.shape)}; kiln needs {need}")


def _dense(name, t, need):
    if not t.is_contiguous():
        _fail(f"{name} has strides {tuple(t.stride())}; kiln needs {need}, contiguous")


class _Plan:
    """What one call needs, from shapes and strides alone (the fake
    implementation checks the same)."""
    __slots__ = ("op", "groups", "n", "k", "capacity", "lda", "ldb", "ldd", "out_shape",
                 "out_dtype", "ld_bias", "recipe", "ld_scale_a", "promote", "a_type", "b_type")


def _recipe(pl, scale_a, scale_b, device, red, cols, use_fast_accum):
    """The scaling recipe the scales' shapes say (the three layouts of
    _LAYOUTS), checked against the call; sets pl.recipe, ld_scale_a, promote."""
    G, T = pl.groups, pl.capacity
    kt._check_tensor("scale_a", scale_a)
    kt._check_tensor("scale_b", scale_b)
    pl.ld_scale_a = 0
    if scale_a.numel() == 1 and scale_b.dim() == 1:
        pl.recipe = _lib.FP8_TENSOR
        _check_scale("scale_a", scale_a, device, (0, 1), "one element (per tensor)")
        _check_scale("scale_b", scale_b, device, (1,), "[G]")
        if scale_b.shape[0] != G:
            _fail(f"scale_b is {tuple(scale_b.shape)}; the per-tensor recipe needs [G] = [{G}]")
        _dense("scale_b", scale_b, "[G]")
    elif scale_a.dim() == 1:
        pl.recipe = _lib.FP8_ROW
        _check_scale("scale_a", scale_a, device, (1,), "[T]")
        if scale_a.shape[0] < T:
            _fail(f"scale_a has {scale_a.shape[0]} entries; the row-wise recipe needs one per "
                  f"row of mat_a ({T})")
        _dense("scale_a", scale_a, "[T]")
        _check_scale("scale_b", scale_b, device, (2,), "[G,N] (one scale per group and "
                     "output column)")
        if tuple(scale_b.shape) != (G, cols):
            _fail(f"scale_b is {tuple(scale_b.shape)}; the row-wise recipe needs [G,N] = "
                  f"[{G},{cols}]")
        _dense("scale_b", scale_b, "[G,N]")
    elif scale_a.dim() == 2:
        pl.recipe = _lib.FP8_BLOCK
        kb, nb = -(-red // 128), -(-cols // 128)
        _check_scale("scale_a", scale_a, device, (2,), "[T,ceil(K/128)]")
        rows = scale_a.shape[0]
        if rows < T or scale_a.shape[1] != kb:
            _fail(f"scale_a is {tuple(scale_a.shape)}; the block recipe needs [T,ceil(K/128)] "
                  f"= [{T},{kb}] (at least T rows)")
        if rows > 1 and scale_a.stride(0) != 1:
            _fail(f"scale_a has strides {tuple(scale_a.stride())}; the block recipe needs it "
                  "k-block major (stride(0) == 1: s.t() of a [ceil(K/128),T] tensor, as "
                  "kiln.quantize_rows(..., block=True) returns it)")
        pl.ld_scale_a = scale_a.stride(1) if kb > 1 else rows
        if pl.ld_scale_a < rows:
            _fail(f"scale_a has strides {tuple(scale_a.stride())}; its k-blocks overlap "
                  f"(stride(1) < {rows} rows)")
        _check_scale("scale_b", scale_b, device, (3,), "[G,ceil(N/128),ceil(K/128)]")
        if tuple(scale_b.shape) != (G, nb, kb):
            _fail(f"scale_b is {tuple(scale_b.shape)}; the block recipe needs "
                  f"[G,ceil(N/128),ceil(K/128)] = [{G},{nb},{kb}]")
        _dense("scale_b", scale_b, "[G,ceil(N/128),ceil(K/128)]")
        if use_fast_accum:
            _fail("use_fast_accum=True, but the block recipe always promotes the sums to fp32 "
                  "every 128 of K (its scales change there)")
    else:
        _fail(f"scale_a {tuple(scale_a.shape)} and scale_b {tuple(scale_b.shape)} match no "
              f"recipe; kiln takes {_LAYOUTS}")
    pl.promote = int(pl.recipe == _lib.FP8_BLOCK or not use_fast_accum)


@kt.renamed(_WHO)
def plan(mat_a, mat_b, scale_a, scale_b, offs, out_dtype=None, bias=None, row_scale=None,
         out=None, use_fast_accum=False, op="fprop"):
    """Checks a scaled_grouped_mm call and returns its _Plan; raises before
    any launch, naming the argument."""
    kt._check_tensor("mat_a", mat_a, 2)
    kt._check_tensor("mat_b", mat_b, 3)
    kt._check_tensor("offs", offs, 1)
    if op not in _OPS:
        _fail(f"op is {op!r}; kiln takes 'fprop' (Y = X·Wᵀ) or 'dgrad' (dX = dY·W): which "
              "tuning tables dispatch reads")
    device = mat_a.device
    if device.type not in kt._DEVICES:
        _fail(f"mat_a is on {device}; kiln runs on CUDA devices")
    kt._check_device("mat_b", mat_b, device)
    kt._check_device("offs", offs, device)
    _check_fp8("mat_a", mat_a)
    _check_fp8("mat_b", mat_b)
    G = kt.check_offs(offs, "torch._scaled_grouped_mm")
    T, red, cols = kt.shapes_2d3d(mat_a, mat_b, G)
    pl = _Plan()
    pl.groups, pl.capacity = G, T
    pl.a_type, pl.b_type = _FP8_DTYPES[mat_a.dtype], _FP8_DTYPES[mat_b.dtype]
    pl.lda = kt._row_ld("mat_a", mat_a, red, mat_a.dtype, "row-major rows (stride(1) == 1)")
    # 8-bit wgmma reads K-major operands only: mat_b must be the transpose of
    # a row-major [G,N,K] (dgrad: of the transposed weights [G,K,N]).
    need = ("mat_b [G,K,N] as w.transpose(-2,-1) of a row-major [G,N,K] w (stride(1) == 1; "
            "fp8 tensor cores read K-major operands only)")
    if not kt.is_fprop_layout(mat_b):
        _fail(f"mat_b has strides {tuple(mat_b.stride())}; kiln needs {need}")
    wt = mat_b.transpose(-2, -1)
    pl.ldb = kt._row_ld("mat_b", wt, red, mat_b.dtype, need)
    kt._group_stride_ok("mat_b", mat_b, cols, pl.ldb, need)
    pl.op = _OPS[op]
    # kiln's n and k are the weight's [G,N,K]: fprop reduces over k, dgrad over n.
    pl.n, pl.k = (cols, red) if pl.op == _lib.OP_FPROP else (red, cols)
    if out is not None:
        kt._check_tensor("out", out, 2)
        kt._check_device("out", out, device)
        out_dtype = kt._out_dtype("out_dtype", out_dtype, out.dtype)
        if out.dtype != out_dtype:
            _fail(f"out is {out.dtype} but out_dtype is {out_dtype}", TypeError)
    pl.out_dtype = kt._out_dtype("out_dtype", out_dtype, torch.bfloat16)
    pl.out_shape = (T, cols)
    pl.ldd = 0
    if out is not None:
        if tuple(out.shape) != pl.out_shape:
            _fail(f"out is {tuple(out.shape)}; this call writes {list(pl.out_shape)}")
        pl.ldd = kt._row_ld("out", out, cols, pl.out_dtype, "row-major rows (stride(-1) == 1)")
    _recipe(pl, scale_a, scale_b, device, red, cols, use_fast_accum)
    pl.ld_bias = 0
    if bias is not None:
        kt._check_per_group("bias", bias, G, cols, device)
        pl.ld_bias = kt._row_ld("bias", bias, cols, pl.out_dtype, "row-major [G,N] rows")
    if row_scale is not None:
        kt._check_tensor("row_scale", row_scale, 1)
        kt._check_device("row_scale", row_scale, device)
        if row_scale.numel() < T:
            _fail(f"row_scale has {row_scale.numel()} entries; kiln needs one per row of "
                  f"mat_a ({T})")
        if row_scale.numel() > 1 and row_scale.stride(0) != 1:
            _fail(f"row_scale has stride {row_scale.stride(0)}; kiln needs it contiguous")
    return pl


# --- launching ----------------------------------------------------------------------
_tls = threading.local()


class _Call:
    """A checked call kind: its plan, kiln_problem (data pointers left to each
    call) and context."""
    __slots__ = ("pl", "p", "addr", "ctx", "handle", "index", "device")


def _calls():
    calls = getattr(_tls, "calls", None)
    if calls is None:
        calls = _tls.calls = {}
    return calls


def _signature(mat_a, mat_b, scale_a, scale_b, offs, out, out_dtype, bias, row_scale,
               scale_bias, alpha, use_fast_accum, op):
    s = kt._sig
    return (s(mat_a), s(mat_b), s(scale_a), s(scale_b), s(offs), s(out), out_dtype, s(bias),
            s(row_scale), scale_bias, alpha, use_fast_accum, op)


def _new_call(pl, device, bias, row_scale, scale_bias, alpha):
    c = _Call()
    c.pl, c.device = pl, device
    c.index = device.index if device.index is not None else 0
    c.ctx = kt.context(device)
    c.handle = c.ctx._ctx.value
    p = _lib.new_problem(pl.op)
    p.a_type, p.b_type = pl.a_type, pl.b_type
    p.out_type = kt._KILN_DTYPE[pl.out_dtype]
    p.groups, p.n, p.k, p.capacity = pl.groups, pl.n, pl.k, pl.capacity
    p.sizes_kind = _lib.SIZES_OFFSETS
    p.lda, p.ldb, p.ldd = pl.lda, pl.ldb, pl.ldd
    f = p.fp8
    f.recipe, f.ld_scale_a, f.promote = pl.recipe, pl.ld_scale_a, pl.promote
    e = p.epilogue
    e.ld_bias, e.scale_bias, e.alpha = pl.ld_bias, int(bool(scale_bias)), float(alpha)
    c.p = p
    c.addr = ctypes.addressof(p)
    key = ("fp8", pl.op, pl.a_type, pl.b_type, p.out_type, pl.groups, pl.n, pl.k, pl.capacity,
           pl.lda, pl.ldb, pl.ldd, pl.recipe, pl.ld_scale_a, pl.promote, bias is not None,
           pl.ld_bias, row_scale is not None, bool(scale_bias), float(alpha) != 1.0)
    return c, key


@kt.renamed(_WHO)
def _check_aligned(**tensors):
    for name, t in tensors.items():
        if t is not None:
            kt._check_aligned(name, t)


def _set_pointers(c, mat_a, mat_b, scale_a, scale_b, offs, out, bias, row_scale):
    """Every data pointer of c's problem from this call's tensors, with the
    16-byte alignment the kernels need checked."""
    p = c.p
    pa, pb, po = mat_a.data_ptr(), mat_b.data_ptr(), out.data_ptr()
    pbias = 0 if bias is None else bias.data_ptr()
    if (pa | pb | po | pbias) & 15:
        _check_aligned(mat_a=mat_a, mat_b=mat_b, out=out, bias=bias)
    p.d_sizes = offs.data_ptr()
    p.d_a = pa
    if c.pl.op == _lib.OP_FPROP:
        p.d_b = pb
    else:
        p.fp8.d_bt = pb
    p.d_out = po
    p.fp8.d_scale_a = scale_a.data_ptr()
    p.fp8.d_scale_b = scale_b.data_ptr()
    p.epilogue.d_bias = pbias
    p.epilogue.d_row_scale = 0 if row_scale is None else row_scale.data_ptr()


def launch(mat_a, mat_b, scale_a, scale_b, offs, out=None, out_dtype=None, bias=None,
           row_scale=None, scale_bias=False, alpha=1.0, use_fast_accum=False, op="fprop",
           prepare_only=False):
    """Checks, allocates the output if needed and runs one fp8 grouped GEMM on
    the current stream; returns the output."""
    calls = None
    if not prepare_only and not isinstance(mat_a, kt._FakeTensor):
        calls = _calls()
        sig = _signature(mat_a, mat_b, scale_a, scale_b, offs, out, out_dtype, bias, row_scale,
                         scale_bias, alpha, use_fast_accum, op)
        c = calls.get(sig)
        if c is not None:
            bias, row_scale = kt._epilogue_operands(c.pl, bias, row_scale)
            if out is None:
                out = torch.empty(c.pl.out_shape, dtype=c.pl.out_dtype, device=c.device)
            _set_pointers(c, mat_a, mat_b, scale_a, scale_b, offs, out, bias, row_scale)
            st = _lib.kiln_gemm(c.handle, c.addr, kt._raw_stream(c.index))
            if st:
                c.ctx._check(st, "kiln_gemm")
            return out
    pl = plan(mat_a, mat_b, scale_a, scale_b, offs, out_dtype, bias, row_scale, out,
              use_fast_accum, op)
    bias, row_scale = kt._epilogue_operands(pl, bias, row_scale)
    if out is None:
        out = mat_a.new_empty(pl.out_shape, dtype=pl.out_dtype)
    if kt._is_fake(mat_a) or pl.capacity == 0:
        # Tracing: shapes only.  No rows: nothing to compute.
        return out
    c, key = _new_call(pl, mat_a.device, bias, row_scale, scale_bias, alpha)
    _set_pointers(c, mat_a, mat_b, scale_a, scale_b, offs, out, bias, row_scale)
    kt._run(c.ctx, c.p, key, kt._raw_stream(c.index), prepare_only)
    if calls is not None:
        if len(calls) >= kt._MAX_CALLS:
            calls.clear()
        calls[sig] = c
    return out


# --- the custom ops (torch.compile sees these) ----------------------------------------
@torch.library.custom_op("kiln::scaled_grouped_mm", mutates_args=(), tags=kt._TAGS)
def _scaled_op(mat_a: torch.Tensor, mat_b: torch.Tensor, scale_a: torch.Tensor,
               scale_b: torch.Tensor, offs: torch.Tensor, bias: Optional[torch.Tensor],
               row_scale: Optional[torch.Tensor], scale_bias: bool, alpha: float,
               out_dtype: Optional[torch.dtype], use_fast_accum: bool, op: str) -> torch.Tensor:
    return launch(mat_a, mat_b, scale_a, scale_b, offs, None, out_dtype, bias, row_scale,
                  scale_bias, alpha, use_fast_accum, op)


@_scaled_op.register_fake
def _scaled_fake(mat_a, mat_b, scale_a, scale_b, offs, bias, row_scale, scale_bias, alpha,
                 out_dtype, use_fast_accum, op):
    pl = plan(mat_a, mat_b, scale_a, scale_b, offs, out_dtype, bias, row_scale, None,
              use_fast_accum, op)
    return mat_a.new_empty(pl.out_shape, dtype=pl.out_dtype)


@torch.library.custom_op("kiln::scaled_grouped_mm_out", mutates_args=("out",), tags=kt._TAGS)
def _scaled_out_op(mat_a: torch.Tensor, mat_b: torch.Tensor, scale_a: torch.Tensor,
                   scale_b: torch.Tensor, offs: torch.Tensor, out: torch.Tensor,
                   bias: Optional[torch.Tensor], row_scale: Optional[torch.Tensor],
                   scale_bias: bool, alpha: float, use_fast_accum: bool, op: str) -> None:
    launch(mat_a, mat_b, scale_a, scale_b, offs, out, out.dtype, bias, row_scale, scale_bias,
           alpha, use_fast_accum, op)


@_scaled_out_op.register_fake
def _scaled_out_fake(mat_a, mat_b, scale_a, scale_b, offs, out, bias, row_scale, scale_bias,
                     alpha, use_fast_accum, op):
    plan(mat_a, mat_b, scale_a, scale_b, offs, out.dtype, bias, row_scale, out, use_fast_accum,
         op)


def scaled_grouped_mm(mat_a, mat_b, scale_a, scale_b, offs, *, out=None, out_dtype=None,
                      use_fast_accum=False, bias=None, row_scale=None, scale_bias=False,
                      alpha=1.0, op="fprop"):
    """torch._scaled_grouped_mm(mat_a, mat_b, scale_a, scale_b, offs,
    out_dtype=..., use_fast_accum=...) (2d x 3d) with kiln, for three recipes
    and with kiln.grouped_mm's fused epilogue:
    out[r] = row_scale[r]·alpha·(deq(mat_a)·deq(mat_b))[r] +
    (row_scale[r] if scale_bias else 1)·bias[g].

    mat_a [T,K] e4m3/e5m2 row-major; mat_b [G,K,N] the transpose of a
    row-major [G,N,K] (fp8 tensor cores read K-major operands only; for
    dgrad, of the transposed weights [G,K,N]); offs int32 [G] cumulative row
    ends, on the device.  The recipe follows from the scales' shapes:
    row-wise scale_a [T], scale_b [G,N]; blocks scale_a [T,ceil(K/128)]
    k-block major, scale_b [G,ceil(N/128),ceil(K/128)] (always promoted);
    per tensor scale_a of one element, scale_b [G].  use_fast_accum=False
    promotes the sums to fp32 every 128 of K.  op ('fprop' or 'dgrad')
    names the tuning tables dispatch reads; the result is the same.  Only
    the rows [0, offs[-1]) of the output are written."""
    if torch.compiler.is_compiling():
        # The casts happen here, where tracing sees them (as grouped_mm's).
        pl = plan(mat_a, mat_b, scale_a, scale_b, offs, out_dtype, bias, row_scale, out,
                  use_fast_accum, op)
        bias, row_scale = kt._epilogue_operands(pl, bias, row_scale)
        if out is not None:
            torch.ops.kiln.scaled_grouped_mm_out(mat_a, mat_b, scale_a, scale_b, offs, out, bias,
                                                 row_scale, bool(scale_bias), float(alpha),
                                                 bool(use_fast_accum), op)
            return out
        return torch.ops.kiln.scaled_grouped_mm(mat_a, mat_b, scale_a, scale_b, offs, bias,
                                                row_scale, bool(scale_bias), float(alpha),
                                                out_dtype, bool(use_fast_accum), op)
    return launch(mat_a, mat_b, scale_a, scale_b, offs, out, out_dtype, bias, row_scale,
                  scale_bias, alpha, use_fast_accum, op)


def prepare_scaled(mat_a, mat_b, scale_a, scale_b, offs, *, out=None, out_dtype=None,
                   use_fast_accum=False, bias=None, row_scale=None, scale_bias=False,
                   alpha=1.0, op="fprop"):
    """Resolves and loads the kernel scaled_grouped_mm(...) would use, launching
    nothing: call it before capturing a CUDA graph."""
    launch(mat_a, mat_b, scale_a, scale_b, offs, out, out_dtype, bias, row_scale, scale_bias,
           alpha, use_fast_accum, op, prepare_only=True)


# --- quantizers ---------------------------------------------------------------------
_IN_TYPES = {torch.bfloat16: _lib.DTYPE_BF16, torch.float16: _lib.DTYPE_F16}


def _quant_input(name, x, ndim, dtype):
    """The checks both quantizers make of their input; its row stride."""
    kt._check_tensor(name, x, ndim)
    if x.device.type not in kt._DEVICES:
        _fail(f"{name} is on {x.device}; kiln quantizes on CUDA devices")
    if x.dtype not in _IN_TYPES:
        _fail(f"{name} is {x.dtype}; kiln quantizes bfloat16 or float16", TypeError)
    if dtype not in _FP8_DTYPES:
        _fail(f"dtype is {dtype}; kiln quantizes to float8_e4m3fn or float8_e5m2", TypeError)
    cols = x.shape[-1]
    if cols % 16 or cols == 0:
        _fail(f"{name} has {cols} columns; kiln needs a positive multiple of 16 "
              "(16-byte rows of fp8)")
    ld = kt._row_ld(name, x, cols, x.dtype, "row-major rows (stride(-1) == 1)")
    kt._check_aligned(name, x)
    return ld


def _quantize(x, q):
    ctx = kt.context(x.device)
    idx = x.device.index if x.device.index is not None else 0
    ctx.quantize(q, kt._raw_stream(idx))


def _rows_outputs(x, dtype, block):
    """quantize_rows' q and scale, empty (scale k-block major with block)."""
    T, C = x.shape
    q = x.new_empty((T, C), dtype=dtype)
    scale = (x.new_empty((-(-C // 128), T), dtype=torch.float32).t() if block
             else x.new_empty((T,), dtype=torch.float32))
    return q, scale


@kt.renamed("kiln.quantize_rows")
def _check_rows(x, offs, dtype):
    ld = _quant_input("x", x, 2, dtype)
    if offs is not None:
        kt._check_tensor("offs", offs, 1)
        kt._check_device("offs", offs, x.device)
        kt.check_offs(offs, "kiln.scaled_grouped_mm")
    return ld


def _quantize_rows(x, offs, dtype, block):
    ld = _check_rows(x, offs, dtype)
    T, C = x.shape
    q, scale = _rows_outputs(x, dtype, block)
    quant = _lib.new_quant(_lib.QUANT_ROWS_1X128 if block else _lib.QUANT_ROWS)
    quant.in_type, quant.out_type = _IN_TYPES[x.dtype], _FP8_DTYPES[dtype]
    if T == 0 or kt._is_fake(x):
        return q, scale
    quant.rows, quant.cols = T, C
    if offs is not None:
        quant.groups, quant.d_sizes = offs.numel(), offs.data_ptr()
        quant.sizes_kind = _lib.SIZES_OFFSETS
    quant.d_in, quant.ld_in = x.data_ptr(), ld
    quant.d_out, quant.d_scale = q.data_ptr(), scale.data_ptr()
    quant.ld_scale = T if block else 0
    _quantize(x, quant)
    return q, scale


def _weights_outputs(w, dtype, recipe, transposed):
    """quantize_weights' outputs, empty: q, scale (and q_t, scale_t)."""
    G, N, K = w.shape
    nb, kb = -(-N // 128), -(-K // 128)
    block = recipe == "block"
    out = [w.new_empty((G, N, K), dtype=dtype),
           w.new_empty((G, nb, kb) if block else (G,), dtype=torch.float32)]
    if transposed:
        out += [w.new_empty((G, K, N), dtype=dtype),
                w.new_empty((G, kb, nb) if block else (G,), dtype=torch.float32)]
    return out


@kt.renamed("kiln.quantize_weights")
def _check_weights(w, dtype, recipe, transposed):
    ld = _quant_input("w", w, 3, dtype)
    if recipe not in ("block", "tensor"):
        _fail(f"recipe is {recipe!r}; kiln's weight quantizers are 'block' (128x128) and "
              "'tensor' (one scale per group)")
    G, N, K = w.shape
    kt._group_stride_ok("w", w, N, ld, "[G,N,K] row-major")
    if transposed and N % 16:
        _fail(f"w has N = {N} rows; the transposed copy needs a multiple of 16 (its rows "
              "are 16-byte rows of fp8)")
    if not 1 <= G <= _lib.MAX_GROUPS:
        _fail(f"w has {G} groups; kiln takes 1 .. {_lib.MAX_GROUPS}")
    return ld


def _quantize_weights(w, dtype, recipe, transposed):
    ld = _check_weights(w, dtype, recipe, transposed)
    G, N, K = w.shape
    out = _weights_outputs(w, dtype, recipe, transposed)
    if N == 0 or kt._is_fake(w):
        return out
    kind = _lib.QUANT_WEIGHTS_128X128 if recipe == "block" else _lib.QUANT_WEIGHTS_TENSOR
    quant = _lib.new_quant(kind)
    quant.in_type, quant.out_type = _IN_TYPES[w.dtype], _FP8_DTYPES[dtype]
    quant.groups, quant.rows, quant.cols = G, N, K
    quant.d_in, quant.ld_in = w.data_ptr(), ld
    quant.d_out, quant.d_scale = out[0].data_ptr(), out[1].data_ptr()
    if transposed:
        quant.d_out_t, quant.d_scale_t = out[2].data_ptr(), out[3].data_ptr()
    _quantize(w, quant)
    return out


@torch.library.custom_op("kiln::quantize_rows", mutates_args=())
def _rows_op(x: torch.Tensor, offs: Optional[torch.Tensor], dtype: torch.dtype,
             block: bool) -> List[torch.Tensor]:
    return list(_quantize_rows(x, offs, dtype, block))


@_rows_op.register_fake
def _rows_fake(x, offs, dtype, block):
    _check_rows(x, offs, dtype)
    return list(_rows_outputs(x, dtype, block))


@torch.library.custom_op("kiln::quantize_weights", mutates_args=())
def _weights_op(w: torch.Tensor, dtype: torch.dtype, recipe: str,
                transposed: bool) -> List[torch.Tensor]:
    return _quantize_weights(w, dtype, recipe, transposed)


@_weights_op.register_fake
def _weights_fake(w, dtype, recipe, transposed):
    _check_weights(w, dtype, recipe, transposed)
    return _weights_outputs(w, dtype, recipe, transposed)


def quantize_rows(x, offs=None, *, dtype=torch.float8_e4m3fn, block=False):
    """x [T,C] bf16/fp16 (activations or gradients) -> (q [T,C] fp8, scale):
    one fp32 scale per row, scale [T] (scaled_grouped_mm's row-wise
    scale_a), or with block=True one per row and 128 columns, scale
    [T,ceil(C/128)] k-block major (its block scale_a).  s = amax/FMAX,
    q = RNE(x·(FMAX/amax)) saturated (kiln.h, kiln_quantize).  With offs
    (int32 cumulative row ends on the device, as scaled_grouped_mm's): only
    the rows [0, offs[-1]) are read and written, graph-safe."""
    if torch.compiler.is_compiling():
        return tuple(torch.ops.kiln.quantize_rows(x, offs, dtype, bool(block)))
    return _quantize_rows(x, offs, dtype, block)


def quantize_weights(w, *, dtype=torch.float8_e4m3fn, recipe="block", transposed=False):
    """w [G,N,K] bf16/fp16 (an expert's weights a group; rows may be padded)
    -> (q [G,N,K] fp8, scale), and with transposed=True also (q_t [G,K,N],
    scale_t), written in the same pass.  recipe 'block': one fp32 scale per
    128x128 block, scale [G,ceil(N/128),ceil(K/128)] and scale_t
    [G,ceil(K/128),ceil(N/128)] (scaled_grouped_mm's block scale_b for fprop
    with q, for dgrad with q_t); 'tensor': one per group, scale [G] (scale_t
    the same values).  For scaled_grouped_mm pass q.transpose(-2,-1) (fprop)
    or q_t.transpose(-2,-1) (dgrad) as mat_b."""
    if torch.compiler.is_compiling():
        return tuple(torch.ops.kiln.quantize_weights(w, dtype, recipe, bool(transposed)))
    return tuple(_quantize_weights(w, dtype, recipe, transposed))
