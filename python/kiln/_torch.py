# SPDX-License-Identifier: Apache-2.0
"""The torch-facing half of kiln: tensors to kiln_problem, one context per
device, the current stream, the custom ops (kiln::grouped_mm and
kiln::grouped_mm_out) with their fake implementations and autograd.

Every check that can be made on shapes, dtypes, devices and strides is made
here, before any launch, naming the argument; kiln's own refusals come back
as KilnError with kiln_last_error's text.
"""
import ctypes
import threading
from typing import Optional, Tuple

import torch

from . import _lib
from ._lib import KilnError

_KILN_DTYPE = {torch.bfloat16: _lib.DTYPE_BF16, torch.float16: _lib.DTYPE_F16,
               torch.float32: _lib.DTYPE_F32}
_IN_DTYPES = (torch.bfloat16, torch.float16)
# Where plan() accepts operands: CUDA, and meta for tracing.  (The emulated
# tests add "cpu", with kiln's GEMM replaced by a reference.)
_DEVICES = ("cuda", "meta")

# --- contexts: one per device, made on first use ---------------------------------
_contexts = {}
_contexts_lock = threading.Lock()


def context(device):
    """The kiln.Context of a CUDA device (a torch.device or an index), created
    on first use; thread-safe."""
    idx = device.index if isinstance(device, torch.device) else device
    if idx is None:
        idx = torch.cuda.current_device()
    ctx = _contexts.get(idx)
    if ctx is not None:
        return ctx
    with _contexts_lock:
        ctx = _contexts.get(idx)
        if ctx is None:
            # torch's primary context made current first, so kiln uses it.
            with torch.cuda.device(idx):
                torch.cuda.init()
                torch.cuda.current_stream(idx)
                ctx = _lib.Context(device=idx)
            _contexts[idx] = attach(ctx)
    return ctx


def attach(ctx):
    """Adds what this module remembers per context: the problem kinds already
    prepared, and the kinds of wgrad whose fused bias gradient the library
    refused (KILN_ERROR_UNSUPPORTED: asked once, then computed with torch)."""
    ctx.prepared = set()
    ctx.no_dbias = set()
    return ctx


def _stream_of(index):
    return torch.cuda.current_stream(index).cuda_stream


# The current stream's CUstream as an int, without making a torch.cuda.Stream
# object per call (what inductor's generated code uses); the public call where
# torch lacks it.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or _stream_of


def _run(ctx, p, key, stream, prepare_only=False):
    """kiln_prepare on the first call of each problem kind (so that a later
    capture of the same kind loads nothing), then kiln_gemm."""
    if key not in ctx.prepared:
        ctx.prepare(p)
        if len(ctx.prepared) > 4096:
            # Token counts that change every step (dropless MoE) make new
            # keys: keep the set bounded (a forgotten key only costs one
            # more kiln_prepare, which finds the kernel loaded).
            ctx.prepared.clear()
        ctx.prepared.add(key)
    if not prepare_only:
        ctx.gemm(p, stream)


# --- argument checks ----------------------------------------------------------------
_WHO = "kiln.grouped_mm"


def _fail(msg, exc=ValueError):
    raise exc(f"{_WHO}: " + msg)


def renamed(who):
    """A decorator: the checks above, run inside the function, name `who`
    (another public function, as kiln.scaled_grouped_mm) instead of
    kiln.grouped_mm in their messages."""
    def wrap(f):
        def g(*args, **kwargs):
            try:
                return f(*args, **kwargs)
            except (ValueError, TypeError) as e:
                msg = str(e)
                if not msg.startswith(_WHO + ": "):
                    raise
                raise type(e)(who + msg[len(_WHO):]) from None
        return g
    return wrap


def _rows_of_16_bytes(dtype, **dims):
    """Fails unless every named dimension is a positive multiple of 16-byte rows
    of dtype; shared by the 2d x 3d and 2d x 2d checks, which name their dims in
    that order."""
    per = 16 // dtype.itemsize
    for nm, v in dims.items():
        if v % per or v == 0:
            _fail(f"{nm} = {v} is not a positive multiple of {per} (16-byte rows)")


def shapes_2d3d(mat_a, mat_b, G):
    """T, K, N of a 2d x 3d call (mat_a [T,K], mat_b [G,K,N]), checked against
    each other and offs' G; K and N whole 16-byte rows of the inputs."""
    T, K = mat_a.shape
    Gb, Kb, N = mat_b.shape
    if Gb != G:
        _fail(f"mat_b has {Gb} groups (shape {tuple(mat_b.shape)}) but offs has {G}")
    if Kb != K:
        _fail(f"mat_a is [T,K] = {tuple(mat_a.shape)} and mat_b [G,K,N] = "
              f"{tuple(mat_b.shape)}: K differs")
    _rows_of_16_bytes(mat_a.dtype, K=K, N=N)
    return T, K, N


def _check_tensor(name, t, ndim=None):
    if not isinstance(t, torch.Tensor):
        _fail(f"{name} must be a torch.Tensor, got {type(t).__name__}", TypeError)
    if ndim is not None and t.dim() != ndim:
        _fail(f"{name} must be {ndim}-d, got shape {tuple(t.shape)}")


def _check_device(name, t, device):
    # A meta mat_b stands for a pointer-array weight (shapes only; launch
    # reads the pointers from weight_ptrs).
    if t.device != device and not (name == "mat_b" and t.device.type == "meta"):
        if t.device.type == "cpu" and name == "offs":
            _fail("offs is on the host (cpu): kiln reads the group offsets on the device "
                  f"(graph-safe); pass offs.to({str(device)!r})")
        _fail(f"{name} is on {t.device}, mat_a on {device} (every tensor must be on "
              "mat_a's CUDA device)")


def _check_aligned(name, t):
    # Fake and meta tensors have no address to check.
    if _is_fake(t):
        return
    if t.data_ptr() % 16:
        _fail(f"{name}'s data pointer (0x{t.data_ptr():x}) is not 16-byte aligned "
              "(kiln reads 16-byte vectors and uses TMA): start it at an aligned offset, "
              "e.g. with .contiguous()")


def _is_fake(t):
    return isinstance(t, torch._subclasses.fake_tensor.FakeTensor) or t.device.type == "meta"


def check_offs(offs, peer):
    """offs as the kernels read it: int32 cumulative row ends (`peer`'s offs),
    contiguous, 1 .. MAX_GROUPS of them; returns their number, G."""
    if offs.dtype != torch.int32:
        _fail(f"offs is {offs.dtype}; kiln takes int32 cumulative end offsets ({peer}'s offs)",
              TypeError)
    if offs.numel() > 1 and offs.stride(0) != 1:
        _fail(f"offs has stride {offs.stride(0)}; kiln needs it contiguous")
    G = offs.numel()
    if not 1 <= G <= _lib.MAX_GROUPS:
        _fail(f"offs has {G} entries (groups); kiln takes 1 .. {_lib.MAX_GROUPS}")
    return G


def _check_per_group(name, t, G, N, device):
    """A [G,N] per-group operand (the bias, the bias gradient) on `device`."""
    _check_tensor(name, t, 2)
    _check_device(name, t, device)
    if tuple(t.shape) != (G, N):
        _fail(f"{name} is {tuple(t.shape)}; kiln needs [G,N] = [{G},{N}]")


def _row_ld(name, t, cols, dtype, need):
    """The leading dimension of a row-major 2-d view: stride(-1) must be 1,
    stride(-2) at least cols and 16-byte aligned."""
    rows = t.shape[-2]
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        _fail(f"{name} has strides {tuple(t.stride())}; kiln needs {need}")
    ld = t.stride(-2) if rows > 1 else cols
    per16 = 16 // dtype.itemsize
    if ld < cols or ld % per16:
        _fail(f"{name} has strides {tuple(t.stride())}; kiln needs {need}, with a row "
              f"stride >= {cols} and a multiple of {per16} (16-byte rows)")
    return ld


def _group_stride_ok(name, t, rows, ld, need):
    if t.shape[0] > 1 and t.stride(0) != rows * ld:
        _fail(f"{name} has strides {tuple(t.stride())}; kiln needs {need}, the groups "
              f"{rows}*{ld} elements apart (stride(0) == {rows * ld})")


def _out_dtype(name, out_dtype, default):
    dt = default if out_dtype is None else out_dtype
    if dt not in _KILN_DTYPE:
        _fail(f"{name} {dt} is not supported (bfloat16, float16 or float32)", TypeError)
    return dt


class _Plan:
    """What one call needs, worked out from shapes and strides alone (so that
    the fake implementation checks the same things the real one does)."""
    __slots__ = ("op", "groups", "n", "k", "capacity", "lda", "ldb", "ldd", "out_shape",
                 "out_dtype", "ld_bias", "ld_dbias", "weight_ptrs")


def plan(mat_a, mat_b, offs, out_dtype=None, bias=None, row_scale=None, alpha=1.0, out=None,
         dbias=None):
    """Checks a grouped_mm call and returns its _Plan; raises before any
    launch, naming the argument.  dbias (wgrad only, not part of the public
    grouped_mm): the [G,N] buffer the same call writes the bias gradient to."""
    _check_tensor("mat_a", mat_a)
    _check_tensor("mat_b", mat_b)
    _check_tensor("offs", offs, 1)
    device = mat_a.device
    if device.type not in _DEVICES:
        _fail(f"mat_a is on {device}; kiln runs on CUDA devices")
    for name, t in (("mat_b", mat_b), ("offs", offs)):
        _check_device(name, t, device)
    if mat_a.dtype not in _IN_DTYPES:
        _fail(f"mat_a is {mat_a.dtype}; kiln takes bfloat16 or float16 inputs", TypeError)
    if mat_b.dtype != mat_a.dtype:
        _fail(f"mat_b is {mat_b.dtype} but mat_a is {mat_a.dtype} (mixed inputs are not "
              "supported)", TypeError)
    G = check_offs(offs, "torch._grouped_mm")
    pl = _Plan()
    pl.groups = G
    pl.weight_ptrs = False
    pl.ld_dbias = 0
    if out is not None:
        _check_tensor("out", out)
        _check_device("out", out, device)
        out_dtype = _out_dtype("out_dtype", out_dtype, out.dtype)
        if out.dtype != out_dtype:
            _fail(f"out is {out.dtype} but out_dtype is {out_dtype}", TypeError)
    pl.out_dtype = _out_dtype("out_dtype", out_dtype, mat_a.dtype)
    ea = mat_a.dtype

    if mat_a.dim() == 2 and mat_b.dim() == 3:
        T, K, N = shapes_2d3d(mat_a, mat_b, G)
        pl.lda = _row_ld("mat_a", mat_a, K, ea, "row-major rows (stride(1) == 1)")
        need_t = "mat_b [G,K,N] as w.transpose(-2,-1) of a row-major [G,N,K] w (stride(1) == 1)"
        need_r = "mat_b [G,K,N] row-major (stride(2) == 1)"
        if is_fprop_layout(mat_b):
            # Y = X · Wᵀ with W = mat_bᵀ [G,N,K]: kiln's fprop.
            wt = mat_b.transpose(-2, -1)
            pl.op, pl.n, pl.k = _lib.OP_FPROP, N, K
            pl.ldb = _row_ld("mat_b", wt, K, ea, need_t + " or " + need_r)
            _group_stride_ok("mat_b", mat_b, N, pl.ldb, need_t)
        elif mat_b.stride(2) == 1:
            # Y = X · B with B [K,N] row-major: kiln's dgrad with W = B, read
            # as [G,n=K,k=N].
            pl.op, pl.n, pl.k = _lib.OP_DGRAD, K, N
            pl.ldb = _row_ld("mat_b", mat_b, N, ea, need_r)
            _group_stride_ok("mat_b", mat_b, K, pl.ldb, need_r)
        else:
            _fail(f"mat_b has strides {tuple(mat_b.stride())}; kiln needs {need_t} or {need_r}")
        pl.capacity = T
        pl.out_shape = (T, N)
        pl.ld_bias = 0
        if bias is not None:
            _check_per_group("bias", bias, G, N, device)
            pl.ld_bias = _row_ld("bias", bias, N, pl.out_dtype, "row-major [G,N] rows")
        if row_scale is not None:
            _check_tensor("row_scale", row_scale, 1)
            _check_device("row_scale", row_scale, device)
            if row_scale.numel() < T:
                _fail(f"row_scale has {row_scale.numel()} entries; kiln needs one per row "
                      f"of mat_a ({T})")
            if row_scale.numel() > 1 and row_scale.stride(0) != 1:
                _fail(f"row_scale has stride {row_scale.stride(0)}; kiln needs it contiguous")
        if dbias is not None:
            _fail("dbias is for 2d x 2d (wgrad)")
    elif mat_a.dim() == 2 and mat_b.dim() == 2:
        N, T = mat_a.shape
        Tb, K = mat_b.shape
        if Tb != T:
            _fail(f"mat_a is [N,T] = {tuple(mat_a.shape)} and mat_b [T,K] = "
                  f"{tuple(mat_b.shape)}: T differs")
        _rows_of_16_bytes(ea, N=N, K=K)
        if bias is not None or row_scale is not None or alpha != 1.0:
            _fail("bias, row_scale and alpha are for 2d x 3d (fprop/dgrad); 2d x 2d "
                  "(wgrad) has no epilogue")
        pl.op, pl.n, pl.k, pl.capacity = _lib.OP_WGRAD, N, K, T
        # dY [T,N] row-major is read; mat_a is its transpose.
        pl.lda = _row_ld("mat_a", mat_a.t(), N, ea,
                         "mat_a [N,T] as dy.t() of a row-major [T,N] dy (stride(0) == 1)")
        pl.ldb = _row_ld("mat_b", mat_b, K, ea, "row-major rows (stride(1) == 1)")
        pl.out_shape = (G, N, K)
        pl.ld_bias = 0
        if dbias is not None:
            _check_per_group("dbias", dbias, G, N, device)
            if dbias.dtype not in (torch.float32, pl.out_dtype):
                _fail(f"dbias is {dbias.dtype}; kiln writes it in float32 or the output type "
                      f"({pl.out_dtype})", TypeError)
            pl.ld_dbias = _row_ld("dbias", dbias, N, dbias.dtype, "row-major [G,N] rows")
    else:
        _fail(f"kiln takes 2d x 3d (fprop/dgrad) or 2d x 2d (wgrad); got mat_a "
              f"{mat_a.dim()}d and mat_b {mat_b.dim()}d")

    pl.ldd = 0
    if out is not None:
        if tuple(out.shape) != pl.out_shape:
            _fail(f"out is {tuple(out.shape)}; this call writes {list(pl.out_shape)}")
        cols = pl.out_shape[-1]
        need = "row-major rows (stride(-1) == 1)"
        pl.ldd = _row_ld("out", out, cols, pl.out_dtype, need)
        if out.dim() == 3:
            _group_stride_ok("out", out, pl.out_shape[1], pl.ldd, need)
    return pl


# --- launching ----------------------------------------------------------------------
# What a call costs on the host is paid once per call kind: the checks of
# plan(), the kiln_problem and its kiln_prepare are kept per signature (every
# shape, stride, dtype and device plan() reads, and the flags), and a call
# whose signature was seen only patches the struct's pointers and calls
# kiln_gemm.  The cache is per thread (a struct is patched, then passed), and
# bounded: token counts that change every step make new signatures.
_FakeTensor = torch._subclasses.fake_tensor.FakeTensor
_tls = threading.local()
_MAX_CALLS = 4096


def _sig(t):
    return None if t is None else (t.shape, t.stride(), t.dtype, t.device)


def _signature(mat_a, mat_b, offs, out, out_dtype, bias, row_scale, scale_bias, alpha,
               accumulate, out_ptrs, weight_ptrs, dbias):
    return (mat_a.shape, mat_a.stride(), mat_a.dtype, mat_a.device,
            mat_b.shape, mat_b.stride(), mat_b.dtype, mat_b.device,
            offs.shape, offs.stride(), offs.dtype, offs.device,
            _sig(out), out_dtype, _sig(bias), _sig(row_scale), _sig(dbias), scale_bias, alpha,
            accumulate, out_ptrs is None, weight_ptrs is None)


def _calls():
    calls = getattr(_tls, "calls", None)
    if calls is None:
        calls = _tls.calls = {}
    return calls


class _Call:
    """A checked call kind: its plan, its kiln_problem (everything but the
    data pointers), the context, and whether kiln computes dbias in it."""
    __slots__ = ("pl", "p", "epilogue", "addr", "ctx", "handle", "index", "device",
                 "fused_dbias", "cast_bias", "cast_scale")


def _problem(pl, a_dtype, bias, row_scale, scale_bias, alpha, accumulate, out_ptrs,
             weight_ptrs, dbias):
    """The kiln_problem of a plan, its data pointers left NULL (_set_pointers
    fills them), and its key for kiln_prepare."""
    p = _lib.new_problem(pl.op)
    p.a_type = p.b_type = _KILN_DTYPE[a_dtype]
    p.out_type = _KILN_DTYPE[pl.out_dtype]
    p.groups, p.n, p.k, p.capacity = pl.groups, pl.n, pl.k, pl.capacity
    p.sizes_kind = _lib.SIZES_OFFSETS
    p.lda, p.ldb, p.ldd = pl.lda, pl.ldb, pl.ldd
    if out_ptrs is not None:
        p.wgrad_output = _lib.WGRAD_DISCRETE
    p.accumulate = int(bool(accumulate))
    if dbias is not None:
        p.ld_dbias, p.dbias_type = pl.ld_dbias, _KILN_DTYPE[dbias.dtype]
    e = p.epilogue
    e.ld_bias = pl.ld_bias
    e.scale_bias = int(bool(scale_bias))
    e.alpha = float(alpha)
    key = (pl.op, p.a_type, p.out_type, pl.groups, pl.n, pl.k, pl.capacity, pl.lda, pl.ldb,
           pl.ldd, weight_ptrs is not None, out_ptrs is not None, bool(accumulate),
           bias is not None, pl.ld_bias, row_scale is not None, bool(scale_bias),
           float(alpha) != 1.0, None if dbias is None else (p.dbias_type, pl.ld_dbias))
    return p, key


def _set_pointers(c, mat_a, mat_b, offs, out, bias, row_scale, out_ptrs, weight_ptrs, dbias):
    """Every data pointer of c's problem, from this call's tensors (each one a
    call kind has is written every call: nothing stays from an earlier call).
    Checks the 16-byte alignment the kernels need."""
    p, e = c.p, c.epilogue
    pa = mat_a.data_ptr()
    pb = 0 if weight_ptrs is not None else mat_b.data_ptr()
    po = 0 if out is None else out.data_ptr()
    pbias = 0 if bias is None else bias.data_ptr()
    pdb = 0 if dbias is None or not c.fused_dbias else dbias.data_ptr()
    if (pa | pb | po | pbias | pdb) & 15:
        for name, t in (("mat_a", mat_a), ("mat_b", mat_b if pb else None), ("out", out),
                        ("bias", bias), ("dbias", dbias if pdb else None)):
            if t is not None:
                _check_aligned(name, t)
    p.d_sizes = offs.data_ptr()
    p.d_a = pa
    if weight_ptrs is not None:
        p.d_b_ptrs = weight_ptrs.data_ptr()
    else:
        p.d_b = pb
    if out_ptrs is not None:
        p.d_out_ptrs = out_ptrs.data_ptr()
    else:
        p.d_out = po
    p.d_dbias = pdb
    e.d_bias = pbias
    e.d_row_scale = 0 if row_scale is None else row_scale.data_ptr()


def _dbias_kind(pl, a_dtype, accumulate, out_ptrs, dbias):
    # What a refusal of the fused bias gradient is remembered for: the kinds
    # of wgrad a kernel family covers (types, output mode), not the shape.
    return (a_dtype, pl.out_dtype, out_ptrs is not None, bool(accumulate), dbias.dtype)


def _dbias_with_torch(mat_a, offs, dbias, accumulate):
    """dbias (+)= the per-group sums of wgrad's dY (mat_a is dY.t()), where
    kiln does not fuse them."""
    segment_sum(mat_a.t(), offs, dbias, accumulate)


def _new_call(pl, mat_a, bias, row_scale, scale_bias, alpha, accumulate, out_ptrs,
              weight_ptrs, dbias):
    """The call kind of a checked plan (on mat_a's context), with dbias fused
    unless the library refused it for this kind before; and its key for
    kiln_prepare."""
    c = _Call()
    c.pl, c.device = pl, mat_a.device
    c.index = c.device.index if c.device.index is not None else 0
    c.ctx = ctx = context(c.device)
    c.handle = ctx._ctx.value
    c.cast_bias = c.cast_scale = False
    c.fused_dbias = dbias is not None and \
        _dbias_kind(pl, mat_a.dtype, accumulate, out_ptrs, dbias) not in ctx.no_dbias
    p, key = _problem(pl, mat_a.dtype, bias, row_scale, scale_bias, alpha, accumulate, out_ptrs,
                      weight_ptrs, dbias if c.fused_dbias else None)
    c.p, c.epilogue, c.addr = p, p.epilogue, ctypes.addressof(p)
    return c, key


def _launch_new(pl, mat_a, mat_b, offs, out, bias, row_scale, scale_bias, alpha, accumulate,
                out_ptrs, weight_ptrs, dbias, prepare_only):
    """The first call of a kind: kiln_prepare (once per kind and context),
    then kiln_gemm.  When the library answers KILN_ERROR_UNSUPPORTED to a
    fused dbias, that is remembered for the kind (_dbias_kind) and the call
    made without it.  Returns the call kind, to be cached."""
    args = (pl, mat_a, bias, row_scale, scale_bias, alpha, accumulate, out_ptrs, weight_ptrs,
            dbias)
    c, key = _new_call(*args)
    _set_pointers(c, mat_a, mat_b, offs, out, bias, row_scale, out_ptrs, weight_ptrs, dbias)
    stream = _raw_stream(c.index)
    try:
        _run(c.ctx, c.p, key, stream, prepare_only)
    except KilnError as e:
        if not c.fused_dbias or e.status != "KILN_ERROR_UNSUPPORTED":
            raise
        c.ctx.no_dbias.add(_dbias_kind(pl, mat_a.dtype, accumulate, out_ptrs, dbias))
        c, key = _new_call(*args)
        _set_pointers(c, mat_a, mat_b, offs, out, bias, row_scale, out_ptrs, weight_ptrs, dbias)
        _run(c.ctx, c.p, key, stream, prepare_only)
    return c


def _epilogue_operands(pl, bias, row_scale):
    # kiln reads the bias in the output type and the row scale in fp32: cast
    # (small copies) rather than refuse.
    if bias is not None and bias.dtype != pl.out_dtype:
        bias = bias.to(pl.out_dtype)
    if row_scale is not None and row_scale.dtype != torch.float32:
        row_scale = row_scale.float()
    return bias, row_scale


def launch(mat_a, mat_b, offs, out=None, out_dtype=None, bias=None, row_scale=None,
           scale_bias=False, alpha=1.0, accumulate=False, out_ptrs=None, weight_ptrs=None,
           prepare_only=False, dbias=None):
    """Checks, allocates the output if needed, and runs one grouped GEMM on
    the current stream; returns the output (None with out_ptrs).

    dbias (2d x 2d only): a [G,N] float32 (or output-type) buffer that gets
    the bias gradient, the per-group sums of dY = mat_a.t() (added to it with
    accumulate); from kiln's wgrad where the library computes it, else from
    torch after the call."""
    calls = None
    if not prepare_only and not isinstance(mat_a, _FakeTensor):
        calls = _calls()
        sig = _signature(mat_a, mat_b, offs, out, out_dtype, bias, row_scale, scale_bias, alpha,
                         accumulate, out_ptrs, weight_ptrs, dbias)
        c = calls.get(sig)
        if c is not None:
            return _launch_cached(c, mat_a, mat_b, offs, out, bias, row_scale, accumulate,
                                  out_ptrs, weight_ptrs, dbias)
    pl = plan(mat_a, mat_b, offs, out_dtype, bias, row_scale, alpha, out, dbias)
    if weight_ptrs is None and mat_b.device.type == "meta" and mat_a.device.type != "meta":
        _fail("mat_b is a meta tensor (no data)")
    cast_bias = bias is not None and bias.dtype != pl.out_dtype
    cast_scale = row_scale is not None and row_scale.dtype != torch.float32
    bias, row_scale = _epilogue_operands(pl, bias, row_scale)
    if out is None and out_ptrs is None:
        out = mat_a.new_empty(pl.out_shape, dtype=pl.out_dtype)
    for name, t in (("mat_a", mat_a), ("mat_b", None if weight_ptrs is not None else mat_b),
                    ("out", out), ("bias", bias), ("dbias", dbias)):
        if t is not None:
            _check_aligned(name, t)
    if _is_fake(mat_a):
        # Tracing (fake or meta tensors): shapes only, nothing to run.
        return out
    if pl.capacity == 0:
        # No rows: nothing to read; wgrad's groups are all empty (zeros, or
        # left as they were when accumulating).  Not cached: rare.
        if prepare_only:
            return out
        if pl.op == _lib.OP_WGRAD and not accumulate:
            if out is not None:
                out.zero_()
            else:
                torch._foreach_zero_(list(out_ptrs._kiln_tensors))
            if dbias is not None:
                dbias.zero_()
        return out
    c = _launch_new(pl, mat_a, mat_b, offs, out, bias, row_scale, scale_bias, alpha, accumulate,
                    out_ptrs, weight_ptrs, dbias, prepare_only)
    if dbias is not None and not c.fused_dbias and not prepare_only:
        _dbias_with_torch(mat_a, offs, dbias, accumulate)
    if calls is not None:
        c.cast_bias, c.cast_scale = cast_bias, cast_scale
        if len(calls) >= _MAX_CALLS:
            calls.clear()
        calls[sig] = c
    return out


def _launch_cached(c, mat_a, mat_b, offs, out, bias, row_scale, accumulate, out_ptrs,
                   weight_ptrs, dbias):
    """A call whose kind was checked and prepared: the output, the pointers,
    kiln_gemm."""
    pl = c.pl
    if c.cast_bias:
        bias = bias.to(pl.out_dtype)
    if c.cast_scale:
        row_scale = row_scale.float()
    if out is None and out_ptrs is None:
        out = torch.empty(pl.out_shape, dtype=pl.out_dtype, device=c.device)
    _set_pointers(c, mat_a, mat_b, offs, out, bias, row_scale, out_ptrs, weight_ptrs, dbias)
    st = _lib.kiln_gemm(c.handle, c.addr, _raw_stream(c.index))
    if st:
        c.ctx._check(st, "kiln_gemm")
    if dbias is not None and not c.fused_dbias:
        _dbias_with_torch(mat_a, offs, dbias, accumulate)
    return out


def pointer_table(tensors, device):
    """A device array of the tensors' addresses (kiln's d_b_ptrs /
    d_out_ptrs).  Made with a host copy: build it before graph capture and
    keep it (see nn.GroupedLinear)."""
    for i, t in enumerate(tensors):
        _check_aligned(f"tensor {i} of the pointer table", t)
    tab = torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64, device=device)
    tab._kiln_tensors = tuple(tensors)
    return tab


# --- the custom ops -----------------------------------------------------------------
_TAGS = tuple(getattr(torch.Tag, n) for n in ("needs_exact_strides",) if hasattr(torch.Tag, n))


@torch.library.custom_op("kiln::grouped_mm", mutates_args=(), tags=_TAGS)
def _grouped_mm_op(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: torch.Tensor,
                   bias: Optional[torch.Tensor], row_scale: Optional[torch.Tensor],
                   scale_bias: bool, alpha: float,
                   out_dtype: Optional[torch.dtype]) -> torch.Tensor:
    return launch(mat_a, mat_b, offs, None, out_dtype, bias, row_scale, scale_bias, alpha)


@_grouped_mm_op.register_fake
def _grouped_mm_fake(mat_a, mat_b, offs, bias, row_scale, scale_bias, alpha, out_dtype):
    pl = plan(mat_a, mat_b, offs, out_dtype, bias, row_scale, alpha)
    return mat_a.new_empty(pl.out_shape, dtype=pl.out_dtype)


@torch.library.custom_op("kiln::grouped_mm_out", mutates_args=("out",), tags=_TAGS)
def _grouped_mm_out_op(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: torch.Tensor,
                       out: torch.Tensor, bias: Optional[torch.Tensor],
                       row_scale: Optional[torch.Tensor], scale_bias: bool,
                       alpha: float) -> None:
    launch(mat_a, mat_b, offs, out, out.dtype, bias, row_scale, scale_bias, alpha)


@_grouped_mm_out_op.register_fake
def _grouped_mm_out_fake(mat_a, mat_b, offs, out, bias, row_scale, scale_bias, alpha):
    plan(mat_a, mat_b, offs, out.dtype, bias, row_scale, alpha, out)


@torch.library.custom_op("kiln::grouped_mm_wgrad_dbias", mutates_args=(), tags=_TAGS)
def _wgrad_dbias_op(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: torch.Tensor,
                    out_dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor]:
    """2d x 2d (wgrad) that also returns the bias gradient, the per-group
    sums of dY = mat_a.t(), as fp32 [G,N]: one kiln call where the library
    fuses it (the autograd formula's dbias)."""
    pl = plan(mat_a, mat_b, offs, out_dtype)
    dbias = mat_a.new_empty((pl.groups, pl.n), dtype=torch.float32)
    return launch(mat_a, mat_b, offs, None, out_dtype, dbias=dbias), dbias


@_wgrad_dbias_op.register_fake
def _wgrad_dbias_fake(mat_a, mat_b, offs, out_dtype):
    pl = plan(mat_a, mat_b, offs, out_dtype)
    if pl.op != _lib.OP_WGRAD:
        _fail("grouped_mm_wgrad_dbias is 2d x 2d (wgrad)")
    return (mat_a.new_empty(pl.out_shape, dtype=pl.out_dtype),
            mat_a.new_empty((pl.groups, pl.n), dtype=torch.float32))


def _setup_context(ctx, inputs, output):
    mat_a, mat_b, offs, bias, row_scale, scale_bias, alpha, out_dtype = inputs
    ctx.save_for_backward(mat_a, mat_b, offs, bias, row_scale)
    ctx.scale_bias, ctx.alpha = scale_bias, alpha


def group_ids(offs, rows):
    """Group of each row (G for rows past offs[-1]); on the device, graph-safe."""
    r = torch.arange(rows, device=offs.device, dtype=torch.int32)
    return torch.searchsorted(offs, r, right=True)


def segment_sum(x, offs, out=None, accumulate=False):
    """Σ over each group's rows of x: [G, cols] in fp32, rows past offs[-1]
    left out; on the device, graph-safe.  A one-hot [G,T] matrix times x (one
    GEMM reading x once) where that matrix is small, else index_add_ (whose
    atomics contend when few groups own many rows).  With out (fp32 [G,cols]):
    written there (added with accumulate), the fp32 conversion in the same
    copy."""
    G, T = offs.numel(), x.shape[0]
    gid = group_ids(offs, T)
    if G * T <= (1 << 27):
        onehot = gid[None, :] == torch.arange(G, device=x.device, dtype=gid.dtype)[:, None]
        dt = x.dtype if x.dtype in (torch.bfloat16, torch.float16) else torch.float32
        sums = onehot.to(dt) @ x.to(dt)
    else:
        acc = torch.zeros(G + 1, x.shape[1], device=x.device, dtype=torch.float32)
        acc.index_add_(0, gid, x.float())
        sums = acc[:G]
    if out is None:
        return sums.float()
    if accumulate:
        return out.add_(sums)
    return out.copy_(sums)


def _scaled(grad, row_scale, alpha, dtype):
    """grad · s[r] · α in `dtype` (the GEMM input type)."""
    if row_scale is None and alpha == 1.0:
        return grad.to(dtype)
    T = grad.shape[0]
    if alpha == 1.0 and grad.dtype == dtype:
        # One pass, as torch code scaling by probabilities in the input
        # type does (s rounded to the 16-bit type first).
        return grad * row_scale[:T, None].to(dtype)
    g = grad.float()
    if row_scale is not None:
        g = g * row_scale[:T, None]
    if alpha != 1.0:
        g = g * alpha
    return g.to(dtype)


def _row_scale_grad(grad, mat_a, mat_b, offs, bias, row_scale, scale_bias, alpha):
    """d row_scale[r] = <dY[r], α·(A·B)[r] + (bias[g] if scale_bias)>: the
    scaled part of the output recomputed unscaled, in fp32."""
    P = torch.ops.kiln.grouped_mm(mat_a, mat_b, offs, bias if scale_bias else None, None,
                                  False, float(alpha), torch.float32)
    ds = (grad.float() * P).sum(-1)
    full = torch.zeros_like(row_scale, dtype=torch.float32)
    full[: ds.shape[0]] = ds
    return full.to(row_scale.dtype)


def is_fprop_layout(mat_b):
    """mat_b [G,K,N] is the transpose of a row-major [G,N,K] weight (kiln's
    fprop); otherwise it is row-major (kiln's dgrad).  As plan() decides."""
    return mat_b.stride(1) == 1 and not (mat_b.stride(2) == 1 and mat_b.shape[2] > 1)


def _backward(ctx, grad):
    mat_a, mat_b, offs, bias, row_scale = ctx.saved_tensors
    # An expanded or transposed incoming gradient is made row-major once.
    grad = grad.contiguous()
    need_a, need_b, _, need_bias, need_scale = ctx.needs_input_grad[:5]
    alpha, scale_bias = ctx.alpha, ctx.scale_bias
    da = db = dbias = dscale = None
    dt = mat_a.dtype
    if mat_b.dim() == 3:
        # The bias gradient is Σ (s·)dY per group: what wgrad reads when B is
        # a transposed weight and α = 1 (s·dY with scale_bias, dY without a
        # row scale), so kiln's wgrad writes it in the same call.
        fuse_dbias = (need_bias and need_b and is_fprop_layout(mat_b) and alpha == 1.0
                      and grad.dtype == dt and (row_scale is None or scale_bias))
        if need_a:
            # dA = s·α·(dY · Bᵀ): the epilogue scales the output rows.
            da = torch.ops.kiln.grouped_mm(grad.to(dt), mat_b.transpose(-2, -1), offs, None,
                                           row_scale, False, float(alpha), dt)
        if need_b:
            gs = _scaled(grad, row_scale, alpha, dt)
            if fuse_dbias:
                dw, db32 = torch.ops.kiln.grouped_mm_wgrad_dbias(gs.t(), mat_a, offs,
                                                                 mat_b.dtype)
                db, dbias = dw.transpose(-2, -1), db32.to(bias.dtype)
            elif is_fprop_layout(mat_b):
                # B = Wᵀ: dW = (s·α·dY)ᵀ · A as [G,N,K], returned transposed.
                db = torch.ops.kiln.grouped_mm(gs.t(), mat_a, offs, None, None, False, 1.0,
                                               mat_b.dtype).transpose(-2, -1)
            else:
                db = torch.ops.kiln.grouped_mm(mat_a.t(), gs, offs, None, None, False, 1.0,
                                               mat_b.dtype)
        if need_bias and not fuse_dbias:
            gb = grad if not scale_bias else _scaled(grad, row_scale, 1.0, grad.dtype)
            dbias = segment_sum(gb, offs).to(bias.dtype)
        if need_scale:
            dscale = _row_scale_grad(grad, mat_a, mat_b, offs, bias, row_scale, scale_bias,
                                     alpha)
    else:
        # Out[g] = A_g · B_g with A [N,T], B [T,K] split along T.
        g = grad.to(dt)
        if need_a:
            da = torch.ops.kiln.grouped_mm(mat_b, g.transpose(-2, -1), offs, None, None, False,
                                           1.0, dt).t()
        if need_b:
            db = torch.ops.kiln.grouped_mm(mat_a.t(), g, offs, None, None, False, 1.0, dt)
    return da, db, None, dbias, dscale, None, None, None


_grouped_mm_op.register_autograd(_backward, setup_context=_setup_context)


# --- the public function ------------------------------------------------------------
def _needs_grad(*ts):
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in ts)


def grouped_mm(mat_a, mat_b, offs, *, out=None, out_dtype=None, bias=None, row_scale=None,
               scale_bias=False, alpha=1.0):
    """torch._grouped_mm(mat_a, mat_b, offs, out_dtype=...) with kiln, plus a
    fused epilogue: out[r] = row_scale[r]·alpha·(mat_a·mat_b)[r] +
    (row_scale[r] if scale_bias else 1)·bias[g].

    2d x 3d: mat_a [T,K], mat_b [G,K,N] (w.transpose(-2,-1) of a [G,N,K] w,
    or row-major) -> [T,N].  2d x 2d: mat_a [N,T] (dy.t()), mat_b [T,K] ->
    [G,N,K].  offs: int32 [G] cumulative row ends, on the device.  Only the
    rows [0, offs[-1]) of the output are written (out= keeps the rest)."""
    if out is not None:
        if _needs_grad(mat_a, mat_b, bias, row_scale):
            raise RuntimeError("kiln.grouped_mm: out= does not support automatic "
                               "differentiation (an input requires grad)")
        if torch.compiler.is_compiling():
            pl = plan(mat_a, mat_b, offs, out_dtype, bias, row_scale, alpha, out)
            bias, row_scale = _epilogue_operands(pl, bias, row_scale)
            torch.ops.kiln.grouped_mm_out(mat_a, mat_b, offs, out, bias, row_scale,
                                          bool(scale_bias), float(alpha))
            return out
        return launch(mat_a, mat_b, offs, out, out_dtype, bias, row_scale, scale_bias, alpha)
    if torch.compiler.is_compiling() or _needs_grad(mat_a, mat_b, bias, row_scale):
        # Through the op: autograd and tracing see it.  The casts happen here
        # so that autograd flows through them.
        pl = plan(mat_a, mat_b, offs, out_dtype, bias, row_scale, alpha)
        bias, row_scale = _epilogue_operands(pl, bias, row_scale)
        return torch.ops.kiln.grouped_mm(mat_a, mat_b, offs, bias, row_scale, bool(scale_bias),
                                         float(alpha), out_dtype)
    return launch(mat_a, mat_b, offs, None, out_dtype, bias, row_scale, scale_bias, alpha)


def prepare(mat_a, mat_b, offs, *, out=None, out_dtype=None, bias=None, row_scale=None,
            scale_bias=False, alpha=1.0):
    """Resolves and loads the kernel grouped_mm(...) with these arguments would
    use, launching nothing (kiln_prepare): call it before capturing a CUDA
    graph for a call that has not run eagerly."""
    launch(mat_a, mat_b, offs, out, out_dtype, bias, row_scale, scale_bias, alpha,
           prepare_only=True)
