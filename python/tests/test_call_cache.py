# SPDX-License-Identifier: Apache-2.0
"""The per-call path of kiln._torch.launch with kiln's C calls replaced by
recorders (no GPU): a cached call kind takes every pointer from the call at
hand, checks still run, and the fused bias gradient falls back to torch,
once per kind, when the library refuses it."""
import ctypes
import math
import threading

import pytest

from conftest import HAS_TORCH, needs_torch, ref_dbias

pytestmark = needs_torch

if HAS_TORCH:
    import torch

    import kiln
    from kiln import _lib
    from kiln import _torch as kt

UNSUPPORTED = 8
REFUSAL = b"problem->d_dbias: no kernel computes the bias gradient yet"


class FakeLibrary:
    """kiln_gemm / kiln_prepare stand-ins: each records a copy of the struct
    it was given; `refuse_dbias` answers KILN_ERROR_UNSUPPORTED to a problem
    with d_dbias, as the library without a dbias kernel does."""

    def __init__(self):
        self.gemms, self.prepares, self.streams = [], [], []
        self.refuse_dbias = False
        self.gemm_status = 0

    @staticmethod
    def _copy(addr):
        if not isinstance(addr, int):  # Context.prepare passes a byref
            addr = ctypes.addressof(addr._obj)
        return _lib.Problem.from_buffer_copy(
            (ctypes.c_char * ctypes.sizeof(_lib.Problem)).from_address(addr))

    def gemm(self, handle, addr, stream):
        self.gemms.append(self._copy(addr))
        self.streams.append(getattr(stream, "value", stream))  # Context.gemm: a c_void_p
        return self.gemm_status

    def prepare(self, handle, addr):
        p = self._copy(addr)
        self.prepares.append(p)
        return UNSUPPORTED if self.refuse_dbias and p.d_dbias else 0


if HAS_TORCH:
    class StubContext(_lib.Context):
        """A context handle no library call receives (they are all stubbed)."""

        def __init__(self):
            self._ctx, self.device, self._lock = ctypes.c_void_p(0x1000), 0, threading.Lock()

        def close(self):
            pass


@pytest.fixture
def lib(monkeypatch):
    fake = FakeLibrary()
    monkeypatch.setattr(_lib, "kiln_gemm", fake.gemm)
    monkeypatch.setattr(_lib, "kiln_prepare", fake.prepare)
    monkeypatch.setattr(_lib, "kiln_last_error", lambda h: REFUSAL)
    monkeypatch.setattr(kt, "_DEVICES", ("cuda", "meta", "cpu"))
    monkeypatch.setattr(kt, "_raw_stream", lambda index: 0x5000 + index)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    ctx = StubContext()
    monkeypatch.setattr(kt, "_contexts", {0: kt.attach(ctx)})
    monkeypatch.setattr(kt, "_tls", threading.local())
    fake.ctx = ctx
    return fake


G, K, N = 4, 32, 16
COUNTS = [5, 0, 9, 2]


def offsets(counts):
    return torch.tensor(counts, dtype=torch.int32).cumsum(0, dtype=torch.int32)


def operands(T=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, K, generator=g).bfloat16()
    w = torch.randn(G, N, K, generator=g).bfloat16()
    bias = torch.randn(G, N, generator=g).bfloat16()
    s = torch.rand(T, generator=g)
    return x, w, bias, s


def test_cached_kind_takes_every_pointer_from_the_call(lib):
    o1, o2 = offsets(COUNTS), offsets(COUNTS)
    x1, w1, b1, s1 = operands(seed=1)
    x2, w2, b2, s2 = operands(seed=2)
    y1 = kt.launch(x1, w1.transpose(-2, -1), o1, bias=b1, row_scale=s1, scale_bias=True)
    y2 = kt.launch(x2, w2.transpose(-2, -1), o2, bias=b2, row_scale=s2, scale_bias=True)
    assert len(lib.prepares) == 1, "the second call of a kind prepared again"
    assert len(lib.gemms) == 2
    for p, x, w, o, y, b, s in ((lib.gemms[0], x1, w1, o1, y1, b1, s1),
                                (lib.gemms[1], x2, w2, o2, y2, b2, s2)):
        assert p.d_a == x.data_ptr() and p.d_b == w.data_ptr() and p.d_sizes == o.data_ptr()
        assert p.d_out == y.data_ptr() and p.epilogue.d_bias == b.data_ptr()
        assert p.epilogue.d_row_scale == s.data_ptr()
        assert p.op == _lib.OP_FPROP and (p.n, p.k, p.capacity, p.groups) == (N, K, 16, G)
        assert p.epilogue.scale_bias == 1
    assert y1.data_ptr() != y2.data_ptr()
    assert lib.streams == [0x5000, 0x5000]


def test_kinds_do_not_share_pointers(lib):
    # Same shapes, one call with bias and row scale, one without: the second
    # must not carry the first one's epilogue pointers.
    x, w, b, s = operands()
    o = offsets(COUNTS)
    kt.launch(x, w.transpose(-2, -1), o, bias=b, row_scale=s)
    kt.launch(x, w.transpose(-2, -1), o)
    kt.launch(x, w.transpose(-2, -1), o, bias=b, row_scale=s)
    with_e, without, again = lib.gemms
    assert with_e.epilogue.d_bias and with_e.epilogue.d_row_scale
    assert not without.epilogue.d_bias and not without.epilogue.d_row_scale
    assert again.epilogue.d_bias == b.data_ptr()
    assert len(lib.prepares) == 2


def test_out_and_pointer_tables_per_call(lib):
    x, w, _, _ = operands()
    o = offsets(COUNTS)
    outs = [torch.full((16, N), math.nan).bfloat16() for _ in range(2)]
    for out in outs:
        assert kt.launch(x, w.transpose(-2, -1), o, out=out) is out
    assert [p.d_out for p in lib.gemms] == [t.data_ptr() for t in outs]
    # Discrete wgrad output through a table: each call's table.
    dy = torch.randn(16, N).bfloat16()
    tabs = []
    for _ in range(2):
        mgs = [torch.zeros(N, K) for _ in range(G)]
        tabs.append(kt.pointer_table(mgs, "cpu"))
        kt.launch(dy.t(), x, o, out_dtype=torch.float32, accumulate=True, out_ptrs=tabs[-1])
    assert [p.d_out_ptrs for p in lib.gemms[2:]] == [t.data_ptr() for t in tabs]
    assert all(not p.d_out and p.wgrad_output == _lib.WGRAD_DISCRETE for p in lib.gemms[2:])


def test_checks_still_run_on_a_cached_kind(lib):
    x, w, _, _ = operands(T=17)
    o = offsets(COUNTS)
    kt.launch(x[1:], w.transpose(-2, -1), o)
    # Same shape and strides, a storage offset of one element: misaligned.
    with pytest.raises(ValueError, match=r"mat_a's data pointer .* is not 16-byte aligned"):
        kt.launch(torch.empty(16 * K + 1).bfloat16()[1:].view(16, K), w.transpose(-2, -1), o)
    # An int64 offs after int32 ones is a new signature: checked, as on a
    # first call.
    with pytest.raises(TypeError, match="offs is torch.int64"):
        kt.launch(x[1:], w.transpose(-2, -1), o.long())
    lib.gemm_status = UNSUPPORTED
    with pytest.raises(kiln.KilnError, match="kiln_gemm: problem->d_dbias") as e:
        kt.launch(x[1:], w.transpose(-2, -1), o)
    assert e.value.status == "KILN_ERROR_UNSUPPORTED"


@pytest.mark.parametrize("accumulate", [False, True])
def test_fused_dbias_asked_of_kiln(lib, accumulate):
    x, _, _, _ = operands()
    dy = torch.randn(16, N).bfloat16()
    o = offsets(COUNTS)
    db = torch.full((G, N), math.nan)
    out = torch.zeros(G, N, K) if accumulate else None
    kt.launch(dy.t(), x, o, out=out, out_dtype=torch.float32 if accumulate else None,
              accumulate=accumulate, dbias=db)
    p = lib.gemms[0]
    assert p.d_dbias == db.data_ptr() and p.dbias_type == _lib.DTYPE_F32 and p.ld_dbias == N
    assert p.accumulate == int(accumulate)
    assert torch.isnan(db).all(), "torch wrote dbias although kiln computes it"
    assert lib.prepares[0].d_dbias


@pytest.mark.parametrize("accumulate", [False, True])
def test_dbias_falls_back_once_when_refused(lib, accumulate):
    lib.refuse_dbias = True
    x, _, _, _ = operands()
    o = offsets(COUNTS)
    kw = dict(out_dtype=torch.float32, accumulate=True) if accumulate else {}
    for T, counts in ((16, COUNTS), (16, COUNTS), (20, [5, 4, 9, 2])):
        x = torch.randn(T, K).bfloat16()
        dy = torch.randn(T, N).bfloat16()
        start = torch.randn(G, N)
        db = start.clone()
        out = torch.zeros(G, N, K) if accumulate else None
        kt.launch(dy.t(), x, offsets(counts), out=out, dbias=db, **kw)
        ref = ref_dbias(dy, counts) + (start.double() if accumulate else 0)
        assert torch.allclose(db.double(), ref, rtol=2e-2, atol=2e-2)
        assert not lib.gemms[-1].d_dbias
    # Asked once (refused), then prepared without it; the third call is a
    # new signature of the same kind: not asked again.
    assert [bool(p.d_dbias) for p in lib.prepares] == [True, False, False]
    assert len(lib.ctx.no_dbias) == 1
    del o


def test_bias_gradients_through_the_stubbed_path(lib):
    # The autograd formula with the fused dbias op, the library refusing it:
    # the values come from the torch fallback inside the op.
    lib.refuse_dbias = True
    x, w, b, s = operands()
    b.requires_grad_()
    wt = w.transpose(-2, -1).detach().requires_grad_()
    y = kiln.grouped_mm(x, wt, offsets(COUNTS), bias=b, row_scale=s, scale_bias=True)
    dy = torch.randn(16, N).bfloat16()
    y.backward(dy)
    ref = ref_dbias(dy.double() * s.double()[:, None], COUNTS)
    assert torch.allclose(b.grad.double(), ref, rtol=3e-2, atol=3e-2)
    assert any(p.op == _lib.OP_WGRAD and not p.d_dbias for p in lib.gemms)
