# SPDX-License-Identifier: Apache-2.0
"""kiln.scaled_grouped_mm and the fp8 quantizers from torch.

Without a GPU: shapes and the errors that name the argument, on fake CUDA
tensors, and torch.compile(fullgraph=True) tracing.  On a Hopper GPU: every
recipe (row-wise fast and promoted, 1x128/128x128 blocks, per tensor), fprop
and dgrad, e5m2 x e4m3, against a float64 reference of the dequantized
operands on random data, every valid element, the rows past the counts of a
caller's buffer untouched; row-wise against torch._scaled_grouped_mm; the
fused epilogue; the quantizers bit for bit against the formula of kiln.h;
quantizers and GEMM end to end; a CUDA graph replayed with new counts; a
compiled function against eager.

Tolerance of a GEMM element: |got - ref| <= 2^-8 |ref| + t·S, S the sum of
the magnitudes of the scaled products (tests/gpu/test_gpu_fp8.c says why):
2^-8 for the bf16 output's rounding, t = 2^-10 for the tensor cores' fast
accumulation (fewer bits than fp32), 2^-12 where the sums are promoted to
fp32 every 128 of K.  A wrong scale, row, group or k-block is off by the
order of S.
"""
import pytest

from conftest import HAS_GPU, HAS_TORCH, needs_gpu, needs_torch

pytestmark = needs_torch

if HAS_TORCH:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    import kiln
    from kiln import _torch as kt

    E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
    FMAX = {E4M3: 448.0, E5M2: 57344.0}

HOPPER = HAS_GPU and torch.cuda.get_device_capability() >= (9, 0)
needs_hopper = pytest.mark.skipif(not HOPPER, reason="no CUDA GPU of sm_90 or later "
                                  "(kiln's fp8 kernels are Hopper's)")


# --- shapes and errors, no GPU ----------------------------------------------------
@pytest.fixture
def fake():
    with FakeTensorMode() as m:
        yield m


def t(*shape, dtype=None, device="cuda"):
    return torch.empty(*shape, dtype=dtype or E4M3, device=device)


def f32(*shape):
    return torch.empty(*shape, dtype=torch.float32, device="cuda")


def offs(g, device="cuda", dtype=None):
    return torch.empty(g, dtype=dtype or torch.int32, device=device)


def block_scale_a(rows, kb):
    """A k-block major [rows, kb] scale (what quantize_rows(block=True) gives)."""
    return f32(kb, rows).t()


def test_shapes(fake):
    x, w = t(64, 256), t(4, 160, 256)
    b, o = w.transpose(-2, -1), offs(4)
    assert kiln.scaled_grouped_mm(x, b, f32(64), f32(4, 160), o).shape == (64, 160)
    y = kiln.scaled_grouped_mm(x, b, block_scale_a(64, 2), f32(4, 2, 2), o,
                               out_dtype=torch.float32)
    assert y.shape == (64, 160) and y.dtype == torch.float32
    assert kiln.scaled_grouped_mm(x, b, f32(1), f32(4), o, op="dgrad").dtype == torch.bfloat16
    q, s = kiln.quantize_rows(t(64, 256, dtype=torch.bfloat16), o, block=True)
    assert q.dtype == E4M3 and s.shape == (64, 2) and s.stride() == (1, 64)
    q, s = kiln.quantize_rows(t(64, 256, dtype=torch.float16), dtype=E5M2)
    assert q.dtype == E5M2 and s.shape == (64,)
    outs = kiln.quantize_weights(t(4, 160, 256, dtype=torch.bfloat16), transposed=True)
    assert [tuple(o.shape) for o in outs] == [(4, 160, 256), (4, 2, 2), (4, 256, 160), (4, 2, 2)]
    outs = kiln.quantize_weights(t(4, 160, 256, dtype=torch.bfloat16), recipe="tensor")
    assert [tuple(o.shape) for o in outs] == [(4, 160, 256), (4,)]


@pytest.mark.parametrize("case, match", [
    ("bf16_a", "mat_a is torch.bfloat16; kiln's fp8 GEMMs take"),
    ("row_major_b", r"mat_b has strides .*K-major"),
    ("k_odd", "K = 40 is not a positive multiple of 16"),
    ("int64_offs", "offs is torch.int64"),
    ("scale_dtype", "scale_a is torch.float16; kiln's fp8 scales are float32"),
    ("row_scale_b", r"scale_b is \(4, 16\); the row-wise recipe needs \[G,N\] = \[4,160\]"),
    ("row_scale_a_short", "scale_a has 10 entries"),
    ("block_row_major", r"k-block major \(stride\(0\) == 1"),
    ("block_scale_b", r"the block recipe needs \[G,ceil\(N/128\),ceil\(K/128\)\] = \[4,2,2\]"),
    ("block_fast", "the block recipe always promotes"),
    ("no_recipe", "match no recipe"),
    ("op", "op is 'wgrad'"),
    ("out_shape", "out is"),
    ("bias_shape", r"bias is \(4, 8\)"),
    ("q_dtype", "x is torch.float32; kiln quantizes bfloat16 or float16"),
    ("q_cols", "x has 40 columns; kiln needs a positive multiple of 16"),
    ("q_to", "dtype is torch.bfloat16; kiln quantizes to float8"),
    ("w_recipe", "recipe is 'row'"),
    ("w_transposed", "w has N = 40 rows; the transposed copy needs a multiple of 16"),
])
def test_errors_name_the_argument(fake, case, match):
    x, w = t(64, 256), t(4, 160, 256)
    b, o = w.transpose(-2, -1), offs(4)
    sa, sb = f32(64), f32(4, 160)
    bf = torch.bfloat16
    calls = {
        "bf16_a": lambda: kiln.scaled_grouped_mm(x.to(bf), b, sa, sb, o),
        "row_major_b": lambda: kiln.scaled_grouped_mm(x, t(4, 256, 160), sa, sb, o),
        "k_odd": lambda: kiln.scaled_grouped_mm(t(64, 40), t(4, 160, 40).transpose(-2, -1),
                                                sa, sb, o),
        "int64_offs": lambda: kiln.scaled_grouped_mm(x, b, sa, sb, o.long()),
        "scale_dtype": lambda: kiln.scaled_grouped_mm(x, b, sa.half(), sb, o),
        "row_scale_b": lambda: kiln.scaled_grouped_mm(x, b, sa, f32(4, 16), o),
        "row_scale_a_short": lambda: kiln.scaled_grouped_mm(x, b, f32(10), sb, o),
        "block_row_major": lambda: kiln.scaled_grouped_mm(x, b, f32(64, 2), f32(4, 2, 2), o),
        "block_scale_b": lambda: kiln.scaled_grouped_mm(x, b, block_scale_a(64, 2),
                                                        f32(4, 2, 1), o),
        "block_fast": lambda: kiln.scaled_grouped_mm(x, b, block_scale_a(64, 2), f32(4, 2, 2),
                                                     o, use_fast_accum=True),
        "no_recipe": lambda: kiln.scaled_grouped_mm(x, b, f32(64, 2, 1), sb, o),
        "op": lambda: kiln.scaled_grouped_mm(x, b, sa, sb, o, op="wgrad"),
        "out_shape": lambda: kiln.scaled_grouped_mm(x, b, sa, sb, o,
                                                    out=t(64, 8, dtype=torch.bfloat16)),
        "bias_shape": lambda: kiln.scaled_grouped_mm(x, b, sa, sb, o,
                                                     bias=t(4, 8, dtype=torch.bfloat16)),
        "q_dtype": lambda: kiln.quantize_rows(t(64, 256, dtype=torch.float32)),
        "q_cols": lambda: kiln.quantize_rows(t(64, 40, dtype=bf)),
        "q_to": lambda: kiln.quantize_rows(t(64, 256, dtype=bf), dtype=bf),
        "w_recipe": lambda: kiln.quantize_weights(t(4, 160, 256, dtype=bf), recipe="row"),
        "w_transposed": lambda: kiln.quantize_weights(t(4, 40, 256, dtype=bf), transposed=True),
    }
    with pytest.raises((ValueError, TypeError), match=match):
        calls[case]()


def test_checks_name_their_function(fake):
    # The shared checks name the public function that ran them.
    with pytest.raises(ValueError, match="^kiln.scaled_grouped_mm: mat_a has strides"):
        kiln.scaled_grouped_mm(t(256, 64).t(), t(4, 160, 256).transpose(-2, -1), f32(64),
                               f32(4, 160), offs(4))
    with pytest.raises(ValueError, match="^kiln.grouped_mm: mat_a has strides"):
        x = torch.empty(64, 32, dtype=torch.bfloat16, device="cuda")
        kiln.grouped_mm(torch.empty(32, 64, dtype=torch.bfloat16, device="cuda").t(),
                        x.new_empty(4, 16, 32).transpose(-2, -1), offs(4))


def test_compile_fullgraph_traces():
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def layer(x, w_q, w_s, o):
        q, s = kiln.quantize_rows(x, o, block=True)
        return kiln.scaled_grouped_mm(q, w_q.transpose(-2, -1), s, w_s, o)

    f = torch.compile(layer, fullgraph=True, backend=backend)
    x = torch.empty(64, 256, dtype=torch.bfloat16, device="meta")
    y = f(x, t(4, 160, 256, device="meta"), torch.empty(4, 2, 2, device="meta"),
          offs(4, "meta"))
    assert y.shape == (64, 160) and y.dtype == torch.bfloat16 and len(graphs) == 1


def test_compile_traces_the_epilogue_casts():
    # A float32 bias and an fp16 row scale are cast inside the traced
    # function (kt._epilogue_operands after plan), as in eager.
    torch._dynamo.reset()

    def layer(x, w, sa, sb, o, bias, p):
        return kiln.scaled_grouped_mm(x, w.transpose(-2, -1), sa, sb, o, bias=bias, row_scale=p,
                                      use_fast_accum=True)

    f = torch.compile(layer, fullgraph=True, backend=lambda gm, example: gm.forward)
    m = "meta"
    y = f(t(64, 256, device=m), t(4, 160, 256, device=m), torch.empty(64, device=m),
          torch.empty(4, 160, device=m), offs(4, m), torch.empty(4, 160, device=m),
          torch.empty(64, dtype=torch.float16, device=m))
    assert y.shape == (64, 160) and y.dtype == torch.bfloat16


# --- on the GPU -----------------------------------------------------------------
DEV = "cuda"
COUNTS = [37, 0, 1, 130, 0, 64, 1, 93]   # empty and one-row groups, odd sizes
N_OUT, K_RED = 320, 400                  # a partial 128-column tile, a partial k-block


def offsets(counts):
    return torch.tensor(counts, dtype=torch.int32, device=DEV).cumsum(0, dtype=torch.int32)


def rand_fp8(*shape, dtype=None):
    """Random finite fp8 values of magnitude in [1/8, 4), random signs."""
    mag = torch.exp2(torch.rand(*shape, device=DEV) * 5 - 3)
    sign = torch.where(torch.rand(*shape, device=DEV) < 0.5, -1.0, 1.0)
    return (mag * sign).to(dtype or E4M3)


def rand_scale(*shape):
    return 0.5 + torch.rand(*shape, device=DEV) * 1.5


def make_scales(recipe, T, G, n_out, k_red):
    """scale_a, scale_b of a recipe, random in [0.5, 2); block scale_a with a
    pitch past T (its k-blocks T + 8 apart)."""
    kb, nb = -(-k_red // 128), -(-n_out // 128)
    if recipe == "tensor":
        return rand_scale(1), rand_scale(G)
    if recipe == "row":
        return rand_scale(T), rand_scale(G, n_out)
    return rand_scale(kb, T + 8).t()[:T], rand_scale(G, nb, kb)


def dequant(q, s, recipe, kind):
    """q · s in float64, each element times its scale: kind 'a' ([T,K]) or
    'b' ([G,N_out,K])."""
    x = q.double()
    if recipe == "tensor":
        return x * (s.double().reshape(()) if kind == "a" else s.double()[:, None, None])
    if recipe == "row":
        return x * (s.double()[:x.shape[0], None] if kind == "a" else s.double()[:, :, None])
    if kind == "a":
        return x * s.double()[:x.shape[0]].repeat_interleave(128, 1)[:, :x.shape[1]]
    e = s.double().repeat_interleave(128, 1).repeat_interleave(128, 2)
    return x * e[:, :x.shape[1], :x.shape[2]]


def reference(a, b_out, counts):
    """Per group, a_g · b_gᵀ and the sum of the magnitudes of its terms (float64);
    a [T,K], b_out [G,N_out,K] dequantized."""
    T, N = a.shape[0], b_out.shape[1]
    ref = torch.zeros(T, N, dtype=torch.float64, device=DEV)
    mag = torch.zeros_like(ref)
    r = 0
    for g, m in enumerate(counts):
        ref[r:r + m] = a[r:r + m] @ b_out[g].t()
        mag[r:r + m] = a[r:r + m].abs() @ b_out[g].abs().t()
        r += m
    return ref, mag


def check(got, ref, mag, rows, t_acc, what):
    g = got[:rows].double()
    err = (g - ref[:rows]).abs()
    tol = 2.0 ** -8 * ref[:rows].abs() + t_acc * mag[:rows]
    bad = (~(err <= tol)).nonzero()
    assert bad.numel() == 0, (f"{what}: {bad.shape[0]} elements out of tolerance, first at "
                              f"{tuple(bad[0].tolist())}: got {g[tuple(bad[0])].item():.6g}, "
                              f"want {ref[:rows][tuple(bad[0])].item():.6g}")


def last_kernel():
    return kt.context(torch.device(DEV)).last_call()


@needs_gpu
@needs_hopper
@pytest.mark.parametrize("recipe, fast", [("row", True), ("row", False), ("block", False),
                                          ("tensor", True)])
@pytest.mark.parametrize("op", ["fprop", "dgrad"])
def test_scaled_grouped_mm_recipes(recipe, fast, op):
    G, T = len(COUNTS), sum(COUNTS) + 14   # capacity past the counts
    rows = sum(COUNTS)
    a = rand_fp8(T, K_RED)
    w = rand_fp8(G, N_OUT, K_RED)        # [G, out, red]: W for fprop, Wᵀ for dgrad
    sa, sb = make_scales(recipe, T, G, N_OUT, K_RED)
    out = torch.full((T, N_OUT), float("nan"), dtype=torch.bfloat16, device=DEV)
    poison = out.clone()
    kiln.scaled_grouped_mm(a, w.transpose(-2, -1), sa, sb, offsets(COUNTS), out=out,
                           use_fast_accum=fast, op=op)
    torch.cuda.synchronize()
    ref, mag = reference(dequant(a, sa, recipe, "a"), dequant(w, sb, recipe, "b"), COUNTS)
    check(out, ref, mag, rows, 2.0 ** -10 if fast else 2.0 ** -12, f"{op} {recipe}")
    assert torch.equal(out[rows:].view(torch.int16), poison[rows:].view(torch.int16)), \
        "rows past the counts were written"
    rep = last_kernel()
    want = f"e4m3_{recipe}" + ("" if fast or recipe == "block" else "_promote")
    assert rep["backend"] == "generated" and want in rep["kernel"], rep


@needs_gpu
@needs_hopper
def test_e5m2_gradients_with_e4m3_weights():
    # dgrad of the hybrid recipe: dY in e5m2, the weights in e4m3.
    G, T = len(COUNTS), sum(COUNTS)
    dy = rand_fp8(T, K_RED, dtype=E5M2)
    wt = rand_fp8(G, N_OUT, K_RED)
    sa, sb = make_scales("row", T, G, N_OUT, K_RED)
    y = kiln.scaled_grouped_mm(dy, wt.transpose(-2, -1), sa, sb, offsets(COUNTS),
                               use_fast_accum=True, op="dgrad")
    ref, mag = reference(dequant(dy, sa, "row", "a"), dequant(wt, sb, "row", "b"), COUNTS)
    check(y, ref, mag, T, 2.0 ** -10, "e5m2 x e4m3")


@needs_gpu
@needs_hopper
def test_row_wise_matches_torch():
    # torch._scaled_grouped_mm on the same operands (counts of 16-row multiples,
    # which it needs); both within the tolerance of the reference, and of each other.
    counts = [48, 0, 16, 128, 64, 32, 0, 96]
    G, T, N, K = len(counts), sum(counts), 256, 384
    a, w = rand_fp8(T, K), rand_fp8(G, N, K)
    sa, sb = make_scales("row", T, G, N, K)
    o = offsets(counts)
    y = kiln.scaled_grouped_mm(a, w.transpose(-2, -1), sa, sb, o, use_fast_accum=True)
    yt = torch._scaled_grouped_mm(a, w.transpose(-2, -1), sa, sb, offs=o,
                                  out_dtype=torch.bfloat16, use_fast_accum=True)
    ref, mag = reference(dequant(a, sa, "row", "a"), dequant(w, sb, "row", "b"), counts)
    check(y, ref, mag, T, 2.0 ** -10, "kiln")
    check(yt, ref, mag, T, 2.0 ** -10, "torch")
    check(y, yt.double(), 2 * mag, T, 2.0 ** -10, "kiln against torch")


@needs_gpu
@needs_hopper
@pytest.mark.parametrize("recipe", ["row", "block"])
@pytest.mark.parametrize("op", ["fprop", "dgrad"])
def test_fused_epilogue(recipe, op):
    G, T = len(COUNTS), sum(COUNTS)
    a, w = rand_fp8(T, K_RED), rand_fp8(G, N_OUT, K_RED)
    sa, sb = make_scales(recipe, T, G, N_OUT, K_RED)
    bias = torch.randn(G, N_OUT, device=DEV).to(torch.bfloat16)
    s = torch.rand(T, device=DEV) + 0.5
    fast = recipe == "row"
    y = kiln.scaled_grouped_mm(a, w.transpose(-2, -1), sa, sb, offsets(COUNTS), bias=bias,
                               row_scale=s, scale_bias=True, alpha=0.75, use_fast_accum=fast,
                               op=op)
    p, mag = reference(dequant(a, sa, recipe, "a"), dequant(w, sb, recipe, "b"), COUNTS)
    gid = torch.repeat_interleave(torch.arange(G, device=DEV),
                                  torch.tensor(COUNTS, device=DEV))
    sd = s.double()[:, None]
    ref = sd * (0.75 * p + bias.double()[gid])
    check(y, ref, sd * (0.75 * mag + bias.double().abs()[gid]), T,
          2.0 ** -10 if fast else 2.0 ** -12, f"{op} {recipe} epilogue")
    assert "epilogue" in last_kernel()["kernel"]


def quant_ref(x, fmax, dtype):
    """kiln.h's quantizer over the last dim of x, exactly: in fp32,
    s = amax/FMAX and inv = min(FMAX/amax, FLT_MAX) (both 1 where amax is 0),
    q = RNE(x·inv) saturated.  Each fp32 operation is done in float64 and
    rounded once to fp32, which rounds as fp32 hardware does (a double holds
    the exact product, and a quotient to more than twice fp32's bits);
    torch's own fp32 division by a scalar multiplies by its reciprocal."""
    xd = x.double()
    amax = xd.abs().amax(-1, keepdim=True)
    zero = amax == 0
    s = torch.where(zero, 1.0, (amax / fmax).float().double())
    inv = (fmax / amax.clamp(min=1e-300)).float().clamp(max=torch.finfo(torch.float32).max)
    inv = torch.where(zero, 1.0, inv.double())
    q = (xd * inv).float().clamp(-fmax, fmax).to(dtype)
    return q, s.float().squeeze(-1)


def bits(q):
    return q.view(torch.uint8)


def spread(*shape):
    """bf16 values of widely different magnitudes, some rows zero and some
    tiny (their scales are 1 and subnormal-sized)."""
    x = torch.randn(*shape, device=DEV) * torch.exp2(torch.randint(-12, 12, shape[:-1],
                                                                   device=DEV).float())[..., None]
    x[..., 3, :] = 0
    x[..., 5, :] *= 1e-30
    return x.to(torch.bfloat16)


@needs_gpu
@needs_hopper
@pytest.mark.parametrize("dtype", ["e4m3", "e5m2"])
@pytest.mark.parametrize("block", [False, True])
def test_quantize_rows_exact(dtype, block):
    dt = {"e4m3": E4M3, "e5m2": E5M2}[dtype]
    T, C, rows = 300, 400, 250                 # offs ends before the capacity
    x = spread(T, C)
    q, s = kiln.quantize_rows(x, offsets([100, 0, 150]), dtype=dt, block=block)
    x = x[:rows]
    if block:
        xp = torch.nn.functional.pad(x.float(), (0, 512 - C)).view(rows, 4, 128)
        rq, rs = quant_ref(xp, FMAX[dt], dt)
        rq = rq.view(rows, 512)[:, :C]
    else:
        rq, rs = quant_ref(x, FMAX[dt], dt)
    assert torch.equal(bits(q[:rows]), bits(rq)), "quantized values differ"
    assert torch.equal(s[:rows], rs), "scales differ"


@needs_gpu
@needs_hopper
@pytest.mark.parametrize("recipe", ["block", "tensor"])
def test_quantize_weights_exact(recipe):
    G, N, K = 3, 320, 400
    w = spread(G, N, K)
    q, s, q_t, s_t = kiln.quantize_weights(w, recipe=recipe, transposed=True)
    if recipe == "block":
        wp = torch.nn.functional.pad(w.float(), (0, 512 - K, 0, 384 - N))
        blocks = wp.view(G, 3, 128, 4, 128).permute(0, 1, 3, 2, 4).reshape(G, 3, 4, 128 * 128)
        rq, rs = quant_ref(blocks, 448.0, E4M3)
        rq = rq.view(G, 3, 4, 128, 128).permute(0, 1, 3, 2, 4).reshape(G, 384, 512)[:, :N, :K]
        assert torch.equal(s, rs) and torch.equal(s_t, rs.transpose(1, 2)), "scales differ"
    else:
        rq, rs = quant_ref(w.view(G, N * K), 448.0, E4M3)
        rq = rq.view(G, N, K)
        assert torch.equal(s, rs) and torch.equal(s_t, rs), "scales differ"
    assert torch.equal(bits(q), bits(rq)), "quantized weights differ"
    assert torch.equal(bits(q_t), bits(rq.transpose(1, 2).contiguous())), \
        "transposed copy differs"


def rel_frobenius(got, want):
    return ((got.double() - want).norm() / want.norm()).item()


@needs_gpu
@needs_hopper
@pytest.mark.parametrize("recipe", ["block", "row"])
def test_quantizers_feed_the_gemm(recipe):
    # bf16 in, fp8 through kiln's quantizers and GEMMs, against the bf16
    # product: a layout the two sides disagree on gives errors of order 1;
    # e4m3's 3 mantissa bits give a few percent.
    G, N, K = len(COUNTS), 256, 512
    T = sum(COUNTS)
    x, w = torch.randn(T, K, device=DEV).bfloat16(), torch.randn(G, N, K, device=DEV).bfloat16()
    dy = torch.randn(T, N, device=DEV).bfloat16()
    o = offsets(COUNTS)
    block = recipe == "block"
    if block:
        wq, ws, wq_t, ws_t = kiln.quantize_weights(w, transposed=True)
    else:
        wq, ws = kiln.quantize_rows(w.view(G * N, K))
        wq, ws = wq.view(G, N, K), ws.view(G, N)
        wq_t, ws_t = kiln.quantize_rows(w.transpose(1, 2).contiguous().view(G * K, N))
        wq_t, ws_t = wq_t.view(G, K, N), ws_t.view(G, K)
    xq, xs = kiln.quantize_rows(x, o, block=block)
    dyq, dys = kiln.quantize_rows(dy, o, block=block)
    y = kiln.scaled_grouped_mm(xq, wq.transpose(-2, -1), xs, ws, o)
    dx = kiln.scaled_grouped_mm(dyq, wq_t.transpose(-2, -1), dys, ws_t, o, op="dgrad")
    yr = torch._grouped_mm(x, w.transpose(-2, -1), offs=o).double()
    dxr = torch._grouped_mm(dy, w, offs=o).double()
    assert rel_frobenius(y, yr) < 0.06, "fprop"
    assert rel_frobenius(dx, dxr) < 0.06, "dgrad"


@needs_gpu
@needs_hopper
def test_cuda_graph_replays_with_new_counts():
    G, T, N, K = 4, 512, 256, 384
    x = torch.randn(T, K, device=DEV).bfloat16()
    wq, ws = kiln.quantize_weights(torch.randn(G, N, K, device=DEV).bfloat16())
    o = offsets([100, 0, 200, 150])

    def step():
        q, s = kiln.quantize_rows(x, o, block=True)
        return kiln.scaled_grouped_mm(q, wq.transpose(-2, -1), s, ws, o)

    step()                               # loads the quantizer and the kernel
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = step()
    for counts in ([100, 0, 200, 150], [1, 300, 0, 211]):
        o.copy_(offsets(counts))
        g.replay()
        torch.cuda.synchronize()
        want = step()
        rows = sum(counts)
        assert torch.equal(y[:rows].view(torch.int16), want[:rows].view(torch.int16)), counts


@needs_gpu
@needs_hopper
def test_compile_matches_eager():
    torch._dynamo.reset()
    G, T, N, K = 4, 300, 256, 384
    x = torch.randn(T, K, device=DEV).bfloat16()
    wq, ws = kiln.quantize_weights(torch.randn(G, N, K, device=DEV).bfloat16())
    o = offsets([100, 0, 120, 80])

    def layer(x):
        q, s = kiln.quantize_rows(x, o, block=True)
        return kiln.scaled_grouped_mm(q, wq.transpose(-2, -1), s, ws, o)

    got = torch.compile(layer, fullgraph=True)(x)
    want = layer(x)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


@needs_gpu
@needs_hopper
def test_cached_kind_takes_new_tensors():
    # The second call of a kind reuses the checked problem: every pointer
    # (operands, scales, offsets, output) must come from the new call.
    G, T = len(COUNTS), sum(COUNTS)
    o = offsets(COUNTS)
    results = []
    for _ in range(2):
        a, w = rand_fp8(T, K_RED), rand_fp8(G, N_OUT, K_RED)
        sa, sb = make_scales("block", T, G, N_OUT, K_RED)
        y = kiln.scaled_grouped_mm(a, w.transpose(-2, -1), sa, sb, o)
        ref, mag = reference(dequant(a, sa, "block", "a"), dequant(w, sb, "block", "b"), COUNTS)
        results.append((y, ref, mag))
    for i, (y, ref, mag) in enumerate(results):
        check(y, ref, mag, T, 2.0 ** -12, f"call {i}")
