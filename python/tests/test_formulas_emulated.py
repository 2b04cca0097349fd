# SPDX-License-Identifier: Apache-2.0
"""The autograd formulas of kiln::grouped_mm and GroupedLinear's backward
(dgrad, wgrad dense and discrete, main_grad, dbias, the probabilities'
gradient), checked on the CPU with kiln's GEMM replaced by a float64
emulation of its contract (only the valid rows written, empty groups zero,
accumulate, pointer tables).  The GPU tests check the same against kiln."""
import math

import pytest

from conftest import HAS_TORCH, needs_torch

pytestmark = needs_torch

if HAS_TORCH:
    import torch

    import kiln
    import kiln.nn
    from kiln import _lib
    from kiln import _torch as kt

COUNTS = [5, 0, 1, 9, 0, 3]


def emulated_launch(mat_a, mat_b, offs, out=None, out_dtype=None, bias=None, row_scale=None,
                    scale_bias=False, alpha=1.0, accumulate=False, out_ptrs=None,
                    weight_ptrs=None, prepare_only=False, dbias=None):
    pl = kt.plan(mat_a, mat_b, offs, out_dtype, bias, row_scale, alpha, out, dbias)
    if prepare_only:
        return out
    if out is None and out_ptrs is None:
        out = torch.full(pl.out_shape, math.nan, dtype=pl.out_dtype)
    ends = offs.tolist()
    starts = [0] + ends[:-1]
    B = mat_b
    if weight_ptrs is not None:
        W = torch.stack(weight_ptrs._kiln_tensors)  # [G,N,K]
        B = W.transpose(-2, -1) if pl.op == _lib.OP_FPROP else W
    for g, (r0, r1) in enumerate(zip(starts, ends)):
        if pl.op == _lib.OP_WGRAD:
            res = mat_a[:, r0:r1].double() @ mat_b[r0:r1].double()
            dst = out[g] if out_ptrs is None else out_ptrs._kiln_tensors[g]
            if accumulate:
                dst += res.to(dst.dtype)
            else:
                dst.copy_(res)
            if dbias is not None:
                # kiln's fused bias gradient: the group's sum of dY = mat_a.t().
                db = mat_a[:, r0:r1].double().sum(1).to(dbias.dtype)
                if accumulate:
                    dbias[g] += db
                else:
                    dbias[g] = db
            continue
        acc = mat_a[r0:r1].double() @ B[g].double() * alpha
        s = row_scale[r0:r1, None].double() if row_scale is not None else 1.0
        y = s * acc
        if bias is not None:
            y = y + (s if scale_bias else 1.0) * bias[g].double()
        out[r0:r1] = y.to(out.dtype)
    return out


@pytest.fixture(autouse=True)
def emulate(monkeypatch):
    monkeypatch.setattr(kt, "_DEVICES", ("cuda", "meta", "cpu"))
    monkeypatch.setattr(kt, "launch", emulated_launch)


def offsets(counts):
    return torch.tensor(counts, dtype=torch.int32).cumsum(0, dtype=torch.int32)


def ref_mm(a, b, counts, bias=None, s=None, scale_bias=False, alpha=1.0):
    ys, r = [], 0
    for g, m in enumerate(counts):
        sg = s[r:r + m, None] if s is not None else 1.0
        y = sg * alpha * (a[r:r + m] @ b[g])
        if bias is not None:
            y = y + (sg if scale_bias else 1.0) * bias[g]
        ys.append(y)
        r += m
    return torch.cat(ys)


def leaf(t):
    return t.detach().double().requires_grad_()


def close(got, ref, tol=2e-2):
    got, ref = got.double(), ref.double()
    e = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()
    assert e < tol, f"relative error {e:.3g}"


@pytest.mark.parametrize("layout", ["transposed", "row_major"])
@pytest.mark.parametrize("scale_bias", [False, True])
def test_grouped_mm_gradients(layout, scale_bias):
    torch.manual_seed(0)
    G, K, N, T = len(COUNTS), 16, 24, sum(COUNTS)
    a = torch.randn(T, K).bfloat16().requires_grad_()
    w = torch.randn(G, N, K).bfloat16()
    b = (w.transpose(-2, -1) if layout == "transposed" else
         w.transpose(-2, -1).contiguous()).requires_grad_()
    bias = torch.randn(G, N).bfloat16().requires_grad_()
    s = torch.rand(T).requires_grad_()
    y = kiln.grouped_mm(a, b, offsets(COUNTS), bias=bias, row_scale=s, scale_bias=scale_bias,
                        alpha=0.75)
    dy = torch.randn(T, N).bfloat16()
    y.backward(dy)
    ls = [leaf(t) for t in (a, b, bias, s)]
    ref_mm(*ls[:2], COUNTS, ls[2], ls[3], scale_bias, 0.75).backward(dy.double())
    for got, ref in zip((a.grad, b.grad, bias.grad, s.grad), (t.grad for t in ls)):
        close(got, ref)
    # The weight's gradient comes back in the weight's layout.
    assert b.grad.stride() == b.stride() or layout == "row_major"


def test_wgrad_op_gradients():
    torch.manual_seed(1)
    G, K, N, T = len(COUNTS), 16, 8, sum(COUNTS)
    dy = torch.randn(T, N).bfloat16().requires_grad_()
    x = torch.randn(T, K).bfloat16().requires_grad_()
    out = kiln.grouped_mm(dy.t(), x, offsets(COUNTS))
    g = torch.randn(G, N, K).bfloat16()
    out.backward(g)
    dyr, xr = leaf(dy), leaf(x)
    ref = []
    r = 0
    for m in COUNTS:
        ref.append(dyr[r:r + m].t() @ xr[r:r + m])
        r += m
    torch.stack(ref).backward(g.double())
    close(dy.grad, dyr.grad)
    close(x.grad, xr.grad)


def _ref_layer(layer, x, counts, probs, dy):
    W = leaf(torch.stack([w.detach() for w in layer.weights()]).reshape(
        layer.num_experts, layer.out_features, layer.in_features))
    b, xr = leaf(layer.bias), leaf(x)
    pr = leaf(probs) if probs is not None else None
    ref_mm(xr, W.transpose(-2, -1), counts, b, pr, layer.scale_bias).backward(dy.double())
    return xr.grad, W.grad, b.grad, (pr.grad if pr is not None else None)


@pytest.mark.parametrize("single_weight", [True, False])
@pytest.mark.parametrize("scale_bias", [True, False])
def test_grouped_linear_backward(single_weight, scale_bias):
    torch.manual_seed(2)
    layer = kiln.nn.GroupedLinear(len(COUNTS), 16, 24, single_weight=single_weight,
                                  scale_bias=scale_bias)
    T = sum(COUNTS)
    x = torch.randn(T, 16).bfloat16().requires_grad_()
    probs = torch.rand(T).requires_grad_()
    dy = torch.randn(T, 24).bfloat16()
    layer(x, COUNTS, probs).backward(dy)
    dx, dw, db, dp = _ref_layer(layer, x, COUNTS, probs, dy)
    close(x.grad, dx)
    ws = layer.weights()
    close(ws[0].grad if single_weight else torch.stack([w.grad for w in ws]), dw)
    close(layer.bias.grad, db)
    close(probs.grad, dp)


@pytest.mark.parametrize("single_weight", [True, False])
def test_grouped_linear_main_grad(single_weight):
    torch.manual_seed(3)
    layer = kiln.nn.GroupedLinear(len(COUNTS), 16, 24, single_weight=single_weight)
    ws = layer.weights()
    init = [torch.randn(w.shape) for w in ws]
    for w, m in zip(ws, init):
        w.main_grad = m.clone()
        w.grad_added_to_main_grad = False
    layer.bias.main_grad = torch.zeros(layer.bias.shape)
    T = sum(COUNTS)
    x = torch.randn(T, 16).bfloat16()
    probs = torch.rand(T)
    dy = torch.randn(T, 24).bfloat16()
    for _ in range(2):
        layer(x, COUNTS, probs).backward(dy)
    _, dw, db, _ = _ref_layer(layer, x, COUNTS, probs, dy)
    got = torch.stack([w.main_grad for w in ws]).reshape(dw.shape)
    close(got, torch.stack(init).reshape(dw.shape).double() + 2 * dw)
    close(layer.bias.main_grad, 2 * db)
    assert all(w.grad_added_to_main_grad for w in ws)


def test_grouped_linear_caller_buffers_keep_tails():
    torch.manual_seed(4)
    layer = kiln.nn.GroupedLinear(len(COUNTS), 16, 24)
    v = sum(COUNTS)
    T = v + 3
    x = torch.randn(T, 16).bfloat16().requires_grad_()
    out = torch.full((T, 24), math.nan).bfloat16()
    gin = torch.full((T, 16), math.nan).bfloat16()
    # A host tensor is read as counts unless told (here everything is on the host).
    y = layer(x, offsets(COUNTS), None, out, grad_input=gin, sizes="offsets")
    assert y.data_ptr() == out.data_ptr() and torch.isnan(out[v:]).all()
    y.backward(torch.randn(T, 24).bfloat16())
    assert torch.isnan(gin[v:]).all() and not torch.isnan(gin[:v]).any()


@pytest.mark.parametrize("form", ["fprop_epilogue", "wgrad_fp32", "out", "wgrad_dbias"])
def test_opcheck(form):
    # torch.library.opcheck: schema, autograd registration, fake tensors and
    # AOT dispatch of kiln's ops.
    torch.manual_seed(5)
    G, K, N, T = 4, 32, 32, 40
    o = torch.tensor([10, 10, 27, 40], dtype=torch.int32)
    a = torch.randn(T, K).bfloat16().requires_grad_()
    b = torch.randn(G, N, K).bfloat16().transpose(-2, -1).detach().requires_grad_()
    if form == "fprop_epilogue":
        bias = torch.randn(G, N).bfloat16().requires_grad_()
        s = torch.rand(T).requires_grad_()
        op, args = torch.ops.kiln.grouped_mm.default, (a, b, o, bias, s, True, 1.0, None)
    elif form == "wgrad_fp32":
        dy = torch.randn(T, N).bfloat16().requires_grad_()
        op, args = torch.ops.kiln.grouped_mm.default, (dy.t(), a, o, None, None, False, 1.0,
                                                       torch.float32)
    elif form == "wgrad_dbias":
        # Called by the autograd formula only (backward, no grad of its own).
        dy = torch.randn(T, N).bfloat16()
        op, args = torch.ops.kiln.grouped_mm_wgrad_dbias.default, (dy.t(), a.detach(), o,
                                                                   torch.bfloat16)
    else:
        out = torch.zeros(T, N).bfloat16()
        op, args = torch.ops.kiln.grouped_mm_out.default, (a.detach(), b.detach(), o, out, None,
                                                           None, False, 1.0)
    torch.library.opcheck(op, args)


def _count_segment_sums(monkeypatch):
    calls = []
    real = kt.segment_sum

    def counted(x, offs):
        calls.append(x.shape)
        return real(x, offs)

    monkeypatch.setattr(kt, "segment_sum", counted)
    return calls


@pytest.mark.parametrize("scale_bias, with_scale, alpha, fused", [
    (True, True, 1.0, True),     # wgrad reads s·dY, the bias gradient is Σ s·dY
    (False, False, 1.0, True),   # no row scale: both are Σ dY
    (False, True, 1.0, False),   # wgrad reads s·dY, the bias gradient is Σ dY
    (True, True, 0.5, False),    # wgrad reads α·s·dY
])
def test_op_fuses_dbias_where_wgrad_reads_the_same_rows(monkeypatch, scale_bias, with_scale,
                                                        alpha, fused):
    sums = _count_segment_sums(monkeypatch)
    torch.manual_seed(6)
    G, K, N, T = len(COUNTS), 16, 24, sum(COUNTS)
    a = torch.randn(T, K).bfloat16().requires_grad_()
    b = torch.randn(G, N, K).bfloat16().transpose(-2, -1).detach().requires_grad_()
    bias = torch.randn(G, N).bfloat16().requires_grad_()
    s = torch.rand(T) if with_scale else None
    y = kiln.grouped_mm(a, b, offsets(COUNTS), bias=bias, row_scale=s, scale_bias=scale_bias,
                        alpha=alpha)
    dy = torch.randn(T, N).bfloat16()
    y.backward(dy)
    ls = [leaf(t) for t in (a, b, bias)]
    ref_mm(ls[0], ls[1], COUNTS, ls[2], leaf(s) if with_scale else None, scale_bias,
           alpha).backward(dy.double())
    for got, ref in zip((a.grad, b.grad, bias.grad), (t.grad for t in ls)):
        close(got, ref)
    assert (len(sums) == 0) == fused, f"segment_sum calls: {sums}"


@pytest.mark.parametrize("scale_bias, with_probs, main_grad, fused", [
    (True, True, False, True),
    (True, True, True, True),
    (False, False, True, True),
    (False, True, False, False),
])
def test_layer_fuses_dbias_where_wgrad_reads_the_same_rows(monkeypatch, scale_bias, with_probs,
                                                           main_grad, fused):
    sums = _count_segment_sums(monkeypatch)
    torch.manual_seed(7)
    layer = kiln.nn.GroupedLinear(len(COUNTS), 16, 24, scale_bias=scale_bias)
    if main_grad:
        layer.weight.main_grad = torch.zeros(layer.weight.shape)
        layer.bias.main_grad = torch.full(layer.bias.shape, 0.5)
    T = sum(COUNTS)
    x = torch.randn(T, 16).bfloat16()
    probs = torch.rand(T) if with_probs else None
    dy = torch.randn(T, 24).bfloat16()
    layer(x, COUNTS, probs).backward(dy)
    _, dw, db, _ = _ref_layer(layer, x, COUNTS, probs, dy)
    if main_grad:
        close(layer.weight.main_grad, dw)
        close(layer.bias.main_grad, db + 0.5)
        assert layer.bias.grad is None
    else:
        close(layer.weight.grad, dw)
        close(layer.bias.grad, db)
    assert (len(sums) == 0) == fused, f"segment_sum calls: {sums}"


@pytest.mark.parametrize("scale_bias", [True, False])
def test_layer_bias_grad_with_frozen_weights(monkeypatch, scale_bias):
    # No wgrad to ride on: the bias gradient comes from torch.
    sums = _count_segment_sums(monkeypatch)
    torch.manual_seed(8)
    layer = kiln.nn.GroupedLinear(len(COUNTS), 16, 24, scale_bias=scale_bias)
    layer.weight.requires_grad_(False)
    T = sum(COUNTS)
    x = torch.randn(T, 16).bfloat16()
    probs = torch.rand(T)
    dy = torch.randn(T, 24).bfloat16()
    layer(x, COUNTS, probs).backward(dy)
    _, _, db, _ = _ref_layer(layer, x, COUNTS, probs, dy)
    close(layer.bias.grad, db)
    assert layer.weight.grad is None and len(sums) == 1
