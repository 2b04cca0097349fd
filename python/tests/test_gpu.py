# SPDX-License-Identifier: Apache-2.0
"""GPU tests: every result and every gradient against a float64 reference on
random data (empty experts, one-token experts, odd counts), dense and
discrete weights, main_grad, caller buffers with poisoned tails, CUDA-graph
capture replayed with new counts, torch.compile(fullgraph=True)."""
import os
import random
import threading
import time

import pytest

from conftest import HAS_GPU, needs_gpu, ref_dbias

pytestmark = needs_gpu

if HAS_GPU:
    import torch

    import kiln
    import kiln.nn
    from kiln import _torch as kt

DEV = "cuda"
# Counts with empty experts, one-token experts and odd sizes.
COUNTS = [37, 0, 1, 130, 0, 64, 1, 93]
TOL = {"bfloat16": 2e-2, "float16": 5e-3, "float32": 2e-3}


def offsets(counts):
    return torch.tensor(counts, dtype=torch.int32, device=DEV).cumsum(0, dtype=torch.int32)


def rel_err(got, ref):
    got, ref = got.double(), ref.double()
    return ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()


def close(got, ref, tol):
    e = rel_err(got, ref)
    assert e < tol, f"relative error {e:.3g} >= {tol}"


def ref_mm(a, b, counts, bias=None, s=None, scale_bias=False, alpha=1.0):
    """2d x 3d in float64: a [T,K], b [G,K,N]; rows past sum(counts) are 0."""
    T, N = a.shape[0], b.shape[2]
    y = torch.zeros(T, N, dtype=torch.float64, device=a.device)
    r = 0
    for g, m in enumerate(counts):
        acc = a[r:r + m].double() @ b[g].double()
        sg = s[r:r + m, None].double() if s is not None else 1.0
        y[r:r + m] = sg * alpha * acc
        if bias is not None:
            y[r:r + m] += (sg if scale_bias else 1.0) * bias[g].double()
        r += m
    return y


def ref_wgrad_groups(at, b, counts):
    """Each group's [N,K] of ref_wgrad in turn (float64)."""
    r = 0
    for m in counts:
        yield at[:, r:r + m].double() @ b[r:r + m].double()
        r += m


def ref_wgrad(at, b, counts):
    """2d x 2d in float64: at [N,T], b [T,K] -> [G,N,K]."""
    return torch.stack(list(ref_wgrad_groups(at, b, counts)))


def rnd(*shape, dtype=None):
    return torch.randn(*shape, device=DEV, dtype=torch.float32).to(dtype or torch.bfloat16)


# --- grouped_mm ----------------------------------------------------------------
@pytest.mark.parametrize("layout", ["transposed", "row_major"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("out_dtype", [None, "float32"])
def test_grouped_mm_2d3d(layout, dtype, out_dtype):
    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    odt = getattr(torch, out_dtype) if out_dtype else dt
    G, K, N, T = len(COUNTS), 96, 136, sum(COUNTS)
    a = rnd(T, K, dtype=dt)
    w = rnd(G, N, K, dtype=dt)
    b = w.transpose(-2, -1) if layout == "transposed" else w.transpose(-2, -1).contiguous()
    y = kiln.grouped_mm(a, b, offsets(COUNTS), out_dtype=odt)
    assert y.dtype == odt and y.shape == (T, N)
    close(y, ref_mm(a, b, COUNTS), TOL[out_dtype or dtype])
    # torch itself where it can (bf16 in, bf16 out, <= 1023 groups).
    if dt == torch.bfloat16 and out_dtype is None and hasattr(torch, "_grouped_mm"):
        try:
            yt = torch._grouped_mm(a, b, offsets(COUNTS))
        except RuntimeError:
            yt = None
        if yt is not None:
            close(y, yt, TOL[dtype])


@pytest.mark.parametrize("scale_bias", [False, True])
def test_grouped_mm_epilogue(scale_bias):
    torch.manual_seed(1)
    G, K, N, T = len(COUNTS), 64, 72, sum(COUNTS)
    a, w, bias = rnd(T, K), rnd(G, N, K), rnd(G, N)
    s = torch.rand(T, device=DEV)
    y = kiln.grouped_mm(a, w.transpose(-2, -1), offsets(COUNTS), bias=bias, row_scale=s,
                        scale_bias=scale_bias, alpha=0.5)
    close(y, ref_mm(a, w.transpose(-2, -1), COUNTS, bias, s, scale_bias, 0.5), TOL["bfloat16"])


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
def test_grouped_mm_wgrad(out_dtype):
    torch.manual_seed(2)
    G, K, N, T = len(COUNTS), 80, 48, sum(COUNTS)
    dy, x = rnd(T, N), rnd(T, K)
    dw = kiln.grouped_mm(dy.t(), x, offsets(COUNTS), out_dtype=getattr(torch, out_dtype))
    assert dw.shape == (G, N, K)
    ref = ref_wgrad(dy.t(), x, COUNTS)
    close(dw, ref, TOL[out_dtype])
    for g, m in enumerate(COUNTS):
        if m == 0:
            assert torch.count_nonzero(dw[g]) == 0, f"empty group {g} is not zero"


def test_out_writes_only_valid_rows():
    torch.manual_seed(3)
    G, K, N = len(COUNTS), 64, 64
    T = sum(COUNTS) + 29  # rows past offs[-1]
    a, w = rnd(T, K), rnd(G, N, K)
    out = torch.full((T, N), float("nan"), device=DEV, dtype=torch.bfloat16)
    kiln.grouped_mm(a, w.transpose(-2, -1), offsets(COUNTS), out=out)
    v = sum(COUNTS)
    assert torch.isnan(out[v:]).all(), "a row past offs[-1] was written"
    close(out[:v], ref_mm(a, w.transpose(-2, -1), COUNTS)[:v], TOL["bfloat16"])


def test_many_groups():
    # More groups than torch._grouped_mm takes (1023).
    torch.manual_seed(4)
    G, K, N = 3000, 32, 32
    counts = [(g * 7) % 5 for g in range(G)]
    T = sum(counts)
    a, w = rnd(T, K), rnd(G, N, K)
    y = kiln.grouped_mm(a, w.transpose(-2, -1), offsets(counts))
    close(y, ref_mm(a, w.transpose(-2, -1), counts), TOL["bfloat16"])


# --- random problems: shapes no table was tuned on ----------------------------
# Each run draws new shapes and data (the seed is in every failure message;
# KILN_TEST_SEED repeats a run): real-model widths and random multiples of 8,
# 1 to 1024 groups, routings with empty, one-token, decode-sized and very
# large groups; bf16 or fp16 in, that or fp32 out; fprop with a random
# epilogue.  Every op against float64, every output row; rows past
# offs[-1] of a caller buffer stay NaN.
SEED = int(os.environ.get("KILN_TEST_SEED", time.time_ns() % 2**31))
WIDTHS = [1408, 1536, 2048, 2816, 2880, 3072, 4096, 5120, 7168]


def _draw_problem(r):
    G = r.choice([1, 2, 5, 8, 16, 31, 64, 128, 160, 256, 1000, 1024])
    K, N = (r.choice(WIDTHS) if r.random() < 0.5 else 8 * r.randint(1, 512) for _ in range(2))
    while G * K * N > 2**29:   # dW and its float64 reference stay a few GB
        K, N = max(8, K // 16 * 8), max(8, N // 16 * 8)
    kind = r.choice(["uniform", "skew", "dirichlet", "decode", "random"])
    mean = r.choice([4, 16, 100, 512, 2048]) if kind != "decode" else r.randint(1, 16)
    mean = max(1, min(mean, 32768 // G))
    if kind == "uniform" or kind == "decode":
        counts = [mean] * G
    elif kind == "random":
        counts = [r.randint(0, 2 * mean) for _ in range(G)]
    else:
        shares = ([1.0 / (g + 1) ** 1.2 for g in range(G)] if kind == "skew"
                  else [r.gammavariate(0.5, 1.0) for _ in range(G)])
        r.shuffle(shares)
        total = mean * G
        counts = [int(total * x / sum(shares)) for x in shares]
    for g in r.sample(range(G), k=G // 8):   # some experts get no tokens
        counts[g] = 0
    return G, K, N, counts


@pytest.mark.parametrize("trial", range(32))
def test_random_problems(trial):
    r = random.Random(SEED * 100 + trial)
    G, K, N, counts = _draw_problem(r)
    dtype = r.choice(["bfloat16", "float16"])
    out_dtype = r.choice([dtype, "float32"])
    dt, odt = getattr(torch, dtype), getattr(torch, out_dtype)
    what = (f"seed {SEED} trial {trial}: G {G}, K {K}, N {N}, {sum(counts)} tokens, {dtype} in,"
            f" {out_dtype} out")
    torch.manual_seed(SEED * 100 + trial)
    v = sum(counts)
    T = v + 13   # rows past offs[-1]
    offs = offsets(counts)
    x, dy, w = rnd(T, K, dtype=dt), rnd(T, N, dtype=dt), rnd(G, N, K, dtype=dt)
    # fprop with a random fused epilogue (or none), dgrad plain
    epi = r.choice([None, "bias", "bias+scale", "scale_bias"])
    bias = rnd(G, N, dtype=dt) if epi else None
    s = torch.rand(T, device=DEV) if epi in ("bias+scale", "scale_bias") else None
    alpha = r.choice([1.0, 0.5])
    for op, a, b, cols, kw in (
            ("fprop", x, w.transpose(-2, -1), N,
             dict(bias=bias, row_scale=s, scale_bias=epi == "scale_bias", alpha=alpha)),
            ("dgrad", dy, w, K, {})):
        out = torch.full((T, cols), float("nan"), device=DEV, dtype=odt)
        kiln.grouped_mm(a, b, offs, out=out, **kw)
        assert torch.isnan(out[v:]).all(), f"{op} wrote past offs[-1] ({what})"
        rs = kw.get("row_scale")
        ref = ref_mm(a[:v], b, counts, kw.get("bias"), None if rs is None else rs[:v],
                     kw.get("scale_bias", False), kw.get("alpha", 1.0))
        e = rel_err(out[:v], ref)
        label = f"{op} ({epi})" if kw else op
        assert e < TOL[out_dtype], f"{label}: relative error {e:.3g} ({what})"
        del ref, out
    dw = kiln.grouped_mm(dy[:v].t(), x[:v], offs, out_dtype=odt)
    assert dw.shape == (G, N, K) and dw.dtype == odt, what
    # Group by group (a whole float64 dW can be several GB).
    err, top = 0.0, 0.0
    for g, ref in enumerate(ref_wgrad_groups(dy[:v].t(), x[:v], counts)):
        err = max(err, (dw[g].double() - ref).abs().max().item())
        top = max(top, ref.abs().max().item())
        if counts[g] == 0:
            assert torch.count_nonzero(dw[g]) == 0, f"wgrad: empty group {g} is not zero ({what})"
    e = err / max(top, 1e-6)
    assert e < TOL[out_dtype], f"wgrad: relative error {e:.3g} ({what})"


def _ref_autograd(a, b, counts, bias, s, scale_bias, alpha):
    leaves = [t.detach().double().requires_grad_() for t in (a, b, bias, s)]
    y = ref_mm(leaves[0], leaves[1], counts, leaves[2], leaves[3], scale_bias, alpha)
    return y, leaves


@pytest.mark.parametrize("layout", ["transposed", "row_major"])
@pytest.mark.parametrize("scale_bias", [False, True])
@pytest.mark.parametrize("alpha", [1.5, 1.0])  # 1.0: the transposed layout fuses dbias
def test_grouped_mm_autograd(layout, scale_bias, alpha):
    torch.manual_seed(5)
    G, K, N, T = len(COUNTS), 64, 56, sum(COUNTS)
    a = rnd(T, K).requires_grad_()
    w = rnd(G, N, K).requires_grad_()
    bias = rnd(G, N).requires_grad_()
    s = torch.rand(T, device=DEV).requires_grad_()
    b = w.transpose(-2, -1) if layout == "transposed" else w.transpose(-2, -1).contiguous()
    bl = b.detach().requires_grad_()
    y = kiln.grouped_mm(a, bl, offsets(COUNTS), bias=bias, row_scale=s, scale_bias=scale_bias,
                        alpha=alpha)
    dy = rnd(T, N)
    y.backward(dy)
    yr, (ar, br, biasr, sr) = _ref_autograd(a, bl, COUNTS, bias, s, scale_bias, alpha)
    yr.backward(dy.double())
    close(y, yr, TOL["bfloat16"])
    for name, got, ref in (("mat_a", a.grad, ar.grad), ("mat_b", bl.grad, br.grad),
                           ("bias", bias.grad, biasr.grad), ("row_scale", s.grad, sr.grad)):
        assert got is not None, name
        close(got, ref, 3e-2)


def test_wgrad_autograd():
    torch.manual_seed(6)
    G, K, N, T = len(COUNTS), 64, 48, sum(COUNTS)
    dy = rnd(T, N).requires_grad_()
    x = rnd(T, K).requires_grad_()
    out = kiln.grouped_mm(dy.t(), x, offsets(COUNTS))
    g = rnd(G, N, K)
    out.backward(g)
    dyr, xr = dy.detach().double().requires_grad_(), x.detach().double().requires_grad_()
    ref_wgrad(dyr.t(), xr, COUNTS).backward(g.double())
    close(dy.grad, dyr.grad, 3e-2)
    close(x.grad, xr.grad, 3e-2)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_wgrad_dbias(accumulate, padded):
    # The bias gradient beside wgrad (kiln's fused dbias, or torch where the
    # library refuses it): every element, empty groups, a padded [G,N] buffer
    # whose padding stays as it was, accumulation.
    torch.manual_seed(10)
    G, K, N = len(COUNTS), 64, 48
    T = sum(COUNTS) + 5  # rows past offs[-1] are not summed
    dy, x = rnd(T, N), rnd(T, K)
    buf = torch.full((G, N + (8 if padded else 0)), float("nan"), device=DEV)
    db = buf[:, :N]
    start = torch.randn(G, N, device=DEV)
    db.copy_(start)
    out = torch.zeros(G, N, K, device=DEV) if accumulate else None
    dw = kt.launch(dy.t(), x, offsets(COUNTS), out=out,
                   out_dtype=torch.float32 if accumulate else None, accumulate=accumulate,
                   dbias=db)
    ref = ref_dbias(dy, COUNTS) + (start.double() if accumulate else 0)
    close(db, ref, 4e-3)  # the torch fallback rounds its sums to bf16
    for g, m in enumerate(COUNTS):
        if m == 0:
            want = start[g] if accumulate else torch.zeros_like(start[g])
            assert torch.equal(db[g], want), f"empty group {g}"
    if padded:
        assert torch.isnan(buf[:, N:]).all(), "dbias written past N"
    close(dw, ref_wgrad(dy.t(), x, COUNTS), TOL["float32" if accumulate else "bfloat16"])


def test_fused_dbias_is_kilns():
    # Which one computed it above: kiln (the wgrad call asked for d_dbias),
    # or torch after the library refused (KILN_ERROR_UNSUPPORTED, remembered
    # per kind).  A skip says the library has no dbias kernel.
    ctx = kt.context(torch.device(DEV, 0))
    dy, x = rnd(64, 48), rnd(64, 64)
    db = torch.empty(len(COUNTS), 48, device=DEV)
    counts = [8, 0, 16, 8, 8, 8, 8, 8]
    kt.launch(dy.t(), x, offsets(counts), dbias=db)
    if ctx.no_dbias:
        pytest.skip("the library refuses a fused bias gradient (KILN_ERROR_UNSUPPORTED): "
                    "torch computes it")
    close(db, ref_dbias(dy, counts), 1e-3)  # kiln sums in fp32


def test_opcheck():
    torch.manual_seed(7)
    G, K, N, T = 4, 32, 32, 40
    counts = [10, 0, 17, 13]
    args = (rnd(T, K), rnd(G, N, K).transpose(-2, -1), offsets(counts), None, None, False,
            1.0, None)
    torch.library.opcheck(torch.ops.kiln.grouped_mm.default, args)
    bias = rnd(G, N).requires_grad_()
    s = torch.rand(T, device=DEV).requires_grad_()
    a = rnd(T, K).requires_grad_()
    torch.library.opcheck(torch.ops.kiln.grouped_mm.default,
                          (a, args[1].detach().requires_grad_(), args[2], bias, s, True, 1.0,
                           None))


def test_errors_before_launch():
    a, w = rnd(64, 32), rnd(4, 16, 32)
    with pytest.raises(ValueError, match="offs is on the host"):
        kiln.grouped_mm(a, w.transpose(-2, -1), torch.tensor([16, 32, 48, 64], dtype=torch.int32))
    with pytest.raises(ValueError, match="mat_b is on cpu"):
        kiln.grouped_mm(a, w.cpu().transpose(-2, -1), offsets([16] * 4))
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        kiln.grouped_mm(rnd(64 * 32 + 1)[1:].view(64, 32), w.transpose(-2, -1),
                        offsets([16] * 4))


def test_one_context_per_device_threadsafe():
    got = []
    ths = [threading.Thread(target=lambda: got.append(kt.context(torch.device(DEV, 0))))
           for _ in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert len(got) == 8 and all(c is got[0] for c in got)


def test_uses_the_current_stream():
    torch.manual_seed(8)
    G, K, N = len(COUNTS), 64, 64
    T = sum(COUNTS)
    a, w = rnd(T, K), rnd(G, N, K)
    o = offsets(COUNTS)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = kiln.grouped_mm(a, w.transpose(-2, -1), o)
    torch.cuda.current_stream().wait_stream(s)
    close(y, ref_mm(a, w.transpose(-2, -1), COUNTS), TOL["bfloat16"])


# --- GroupedLinear ----------------------------------------------------------------
def _layer(single_weight, G=len(COUNTS), K=64, N=96, bias=True):
    torch.manual_seed(9)
    return kiln.nn.GroupedLinear(G, K, N, bias=bias, single_weight=single_weight,
                                 dtype=torch.bfloat16, device=DEV)


def _ref_layer(layer, x, counts, probs, dy):
    """The layer in float64 with torch: output and the gradients of x, each
    weight, the bias and probs."""
    W = torch.stack([w.detach() for w in layer.weights()]).reshape(
        layer.num_experts, layer.out_features, layer.in_features).double().requires_grad_()
    b = layer.bias.detach().double().requires_grad_()
    xr = x.detach().double().requires_grad_()
    pr = probs.detach().double().requires_grad_() if probs is not None else None
    y = ref_mm(xr, W.transpose(-2, -1), counts, b, pr, layer.scale_bias)
    y.backward(dy.double())
    return y, xr.grad, W.grad, b.grad, (pr.grad if pr is not None else None)


@pytest.mark.parametrize("single_weight", [True, False])
@pytest.mark.parametrize("with_probs", [False, True])
def test_grouped_linear(single_weight, with_probs):
    layer = _layer(single_weight)
    T = sum(COUNTS)
    x = rnd(T, layer.in_features).requires_grad_()
    probs = torch.rand(T, device=DEV).requires_grad_() if with_probs else None
    y = layer(x, COUNTS, probs)
    dy = rnd(T, layer.out_features)
    y.backward(dy)
    yr, dxr, dwr, dbr, dpr = _ref_layer(layer, x, COUNTS, probs, dy)
    close(y, yr, TOL["bfloat16"])
    close(x.grad, dxr, 3e-2)
    ws = layer.weights()
    dw = ws[0].grad if single_weight else torch.stack([w.grad for w in ws])
    close(dw, dwr, 3e-2)
    close(layer.bias.grad, dbr, 3e-2)
    if with_probs:
        close(probs.grad, dpr, 3e-2)


@pytest.mark.parametrize("single_weight", [True, False])
def test_grouped_linear_device_offsets_and_counts(single_weight):
    layer = _layer(single_weight)
    T = sum(COUNTS)
    x = rnd(T, layer.in_features)
    y1 = layer(x, offsets(COUNTS))
    y2 = layer(x, torch.tensor(COUNTS, dtype=torch.int32, device=DEV), sizes="counts")
    y3 = layer(x, torch.tensor(COUNTS))  # host counts
    assert torch.equal(y1, y2) and torch.equal(y1, y3)


@pytest.mark.parametrize("single_weight", [True, False])
def test_main_grad_accumulates_in_fp32(single_weight):
    layer = _layer(single_weight)
    ws = layer.weights()
    init = [torch.randn(w.shape, device=DEV, dtype=torch.float32) for w in ws]
    for w, m in zip(ws, init):
        w.main_grad = m.clone()
        w.grad_added_to_main_grad = False
    layer.bias.main_grad = torch.zeros(layer.bias.shape, device=DEV, dtype=torch.float32)
    T = sum(COUNTS)
    x = rnd(T, layer.in_features)
    probs = torch.rand(T, device=DEV)
    dy = rnd(T, layer.out_features)
    for _ in range(2):  # two micro-batches
        layer(x, COUNTS, probs).backward(dy)
    _, _, dwr, dbr, _ = _ref_layer(layer, x, COUNTS, probs, dy)
    got = torch.stack([w.main_grad for w in ws]).reshape(dwr.shape)
    ref = torch.stack(init).reshape(dwr.shape).double() + 2 * dwr
    close(got, ref, 2e-2)
    close(layer.bias.main_grad, 2 * dbr, 2e-2)
    assert all(w.grad_added_to_main_grad for w in ws)
    # Untouched experts (no tokens) keep their main_grad exactly.
    for g, m in enumerate(COUNTS):
        if m == 0:
            assert torch.equal(got[g].float(), torch.stack(init).reshape(dwr.shape)[g])


def test_caller_buffers_poisoned_tails():
    layer = _layer(True)
    v = sum(COUNTS)
    T = v + 19
    x = rnd(T, layer.in_features).requires_grad_()
    out = torch.full((T, layer.out_features), float("nan"), device=DEV, dtype=torch.bfloat16)
    gin = torch.full((T, layer.in_features), float("nan"), device=DEV, dtype=torch.bfloat16)
    y = layer(x, offsets(COUNTS), None, out, grad_input=gin)
    assert y.data_ptr() == out.data_ptr()
    assert torch.isnan(out[v:]).all(), "forward wrote past offs[-1]"
    dy = rnd(T, layer.out_features)
    y.backward(dy)
    assert x.grad.data_ptr() == gin.data_ptr() or torch.equal(x.grad[:v], gin[:v])
    assert torch.isnan(gin[v:]).all(), "dgrad wrote past offs[-1]"
    yr, dxr, dwr, dbr, _ = _ref_layer(layer, x[:v], COUNTS, None, dy[:v])
    close(out[:v], yr, TOL["bfloat16"])
    close(gin[:v], dxr, 3e-2)
    close(layer.weight.grad, dwr, 3e-2)
    close(layer.bias.grad, dbr, 3e-2)


def test_cuda_graph_capture_replays_with_new_counts():
    layer = _layer(True)
    T = sum(COUNTS)
    x = rnd(T, layer.in_features).requires_grad_()
    probs = torch.rand(T, device=DEV)
    dy = rnd(T, layer.out_features)
    offs = offsets(COUNTS)
    # Warm up on a side stream (resolves every kernel: kiln_prepare runs on
    # the first eager call), then capture forward + backward.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            layer.zero_grad(set_to_none=True)
            x.grad = None
            layer(x, offs, probs).backward(dy)
    torch.cuda.current_stream().wait_stream(s)
    layer.zero_grad(set_to_none=True)
    x.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = layer(x, offs, probs)
        y.backward(dy)
    new_counts = [T - 7 - 3, 3, 0, 0, 0, 0, 7, 0]
    assert sum(new_counts) == T
    offs.copy_(offsets(new_counts))
    g.replay()
    torch.cuda.synchronize()
    yr, dxr, dwr, dbr, _ = _ref_layer(layer, x, new_counts, probs, dy)
    close(y, yr, TOL["bfloat16"])
    close(x.grad, dxr, 3e-2)
    close(layer.weight.grad, dwr, 3e-2)
    close(layer.bias.grad, dbr, 3e-2)


def test_prepare_loads_without_launching():
    layer = _layer(False)
    ctx = kt.context(torch.device(DEV, 0))
    before = ctx.stats()["launches"]
    layer.prepare(333)
    kiln.prepare(rnd(333, 64), rnd(4, 96, 64).transpose(-2, -1), offsets([1, 2, 3, 4]))
    assert ctx.stats()["launches"] == before


@pytest.mark.parametrize("single_weight", [True, False])
def test_compile_fullgraph_matches_eager(single_weight):
    torch._dynamo.reset()
    fc1 = _layer(single_weight, K=64, N=128)
    fc2 = _layer(single_weight, K=64, N=64)

    def mlp(x, offs, probs):
        a, g = fc1(x, offs).chunk(2, dim=-1)
        return fc2(torch.nn.functional.silu(a) * g, offs, probs)

    T = sum(COUNTS)
    x = rnd(T, 64).requires_grad_()
    probs = torch.rand(T, device=DEV).requires_grad_()
    offs = offsets(COUNTS)
    dy = rnd(T, 64)
    ye = mlp(x, offs, probs)
    ye.backward(dy)
    grads_e = [x.grad.clone(), probs.grad.clone()] + [p.grad.clone() for p in
                                                       list(fc1.parameters()) + list(fc2.parameters())]
    for p in [x, probs] + list(fc1.parameters()) + list(fc2.parameters()):
        p.grad = None
    f = torch.compile(mlp, fullgraph=True)
    yc = f(x, offs, probs)
    yc.backward(dy)
    grads_c = [x.grad, probs.grad] + [p.grad for p in
                                      list(fc1.parameters()) + list(fc2.parameters())]
    close(yc, ye, 2e-2)
    for ge, gc in zip(grads_e, grads_c):
        close(gc, ge, 3e-2)
