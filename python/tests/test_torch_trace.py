# SPDX-License-Identifier: Apache-2.0
"""torch-facing checks that need no GPU: shapes and errors on fake CUDA
tensors, and torch.compile(fullgraph=True) of a model with GroupedLinear
traced forward and backward on meta tensors."""
import pytest

from conftest import HAS_TORCH, needs_torch

pytestmark = needs_torch

if HAS_TORCH:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    import kiln
    import kiln.nn

BF = "bfloat16"


@pytest.fixture
def fake():
    with FakeTensorMode() as m:
        yield m


def t(*shape, dtype=None, device="cuda"):
    return torch.empty(*shape, dtype=dtype or torch.bfloat16, device=device)


def offs(g, device="cuda"):
    return torch.empty(g, dtype=torch.int32, device=device)


def test_shapes(fake):
    x, w = t(64, 32), t(4, 16, 32)
    assert kiln.grouped_mm(x, w.transpose(-2, -1), offs(4)).shape == (64, 16)
    # mat_b row-major [G,K,N]: kiln's dgrad.
    assert kiln.grouped_mm(x, t(4, 32, 16), offs(4)).shape == (64, 16)
    y = kiln.grouped_mm(x, t(4, 32, 16), offs(4), out_dtype=torch.float32)
    assert y.dtype == torch.float32
    dw = kiln.grouped_mm(t(64, 16).t(), x, offs(4))
    assert dw.shape == (4, 16, 32) and dw.dtype == torch.bfloat16
    assert kiln.grouped_mm(x, w.transpose(-2, -1), offs(4), bias=t(4, 16),
                           row_scale=t(64, dtype=torch.float32), scale_bias=True).shape == (64, 16)


def test_more_groups_than_torch(fake):
    g = 5000
    assert kiln.grouped_mm(t(64, 32), t(g, 32, 16), offs(g)).shape == (64, 16)


@pytest.mark.parametrize("case, match", [
    ("host_offs", "offs is on the host"),
    ("int64_offs", "offs is torch.int64"),
    ("fp32_a", "mat_a is torch.float32"),
    ("mixed", "mat_b is torch.float16"),
    ("k_differs", "K differs"),
    ("b_strides", r"mat_b has strides .*stride\(1\) == 1.*stride\(2\) == 1"),
    ("a_strides", r"mat_a has strides .*row-major"),
    ("wgrad_a_rowmajor", r"dy.t\(\) of a row-major"),
    ("n_odd", "N = 12 is not a positive multiple of 8"),
    ("groups", "offs has 3 entries .* but|mat_b has 4 groups"),
    ("too_many_groups", "1 .. 65536"),
    ("dims", "2d x 3d .* or 2d x 2d"),
    ("bias_shape", r"bias is \(4, 8\)"),
    ("row_scale_short", "row_scale has 10 entries"),
    ("wgrad_bias", "no epilogue"),
    ("out_shape", "out is"),
    ("out_dtype", "out_dtype torch.int32 is not supported"),
])
def test_errors_name_the_argument(fake, case, match):
    x, w = t(64, 32), t(4, 16, 32)
    b = w.transpose(-2, -1)
    o = offs(4)
    calls = {
        "host_offs": lambda: kiln.grouped_mm(x, b, offs(4, "cpu")),
        "int64_offs": lambda: kiln.grouped_mm(x, b, o.long()),
        "fp32_a": lambda: kiln.grouped_mm(x.float(), b, o),
        "mixed": lambda: kiln.grouped_mm(x, b.half(), o),
        "k_differs": lambda: kiln.grouped_mm(t(64, 40), b, o),
        "b_strides": lambda: kiln.grouped_mm(x, t(4, 32, 32)[:, :, ::2], o),
        "a_strides": lambda: kiln.grouped_mm(t(32, 64).t(), b, o),
        "wgrad_a_rowmajor": lambda: kiln.grouped_mm(t(16, 64), x, o),
        "n_odd": lambda: kiln.grouped_mm(x, t(4, 12, 32).transpose(-2, -1), o),
        "groups": lambda: kiln.grouped_mm(x, b, offs(3)),
        "too_many_groups": lambda: kiln.grouped_mm(x, t(70000, 32, 16), offs(70000)),
        "dims": lambda: kiln.grouped_mm(t(4, 64, 32), b, o),
        "bias_shape": lambda: kiln.grouped_mm(x, b, o, bias=t(4, 8)),
        "row_scale_short": lambda: kiln.grouped_mm(x, b, o, row_scale=t(10)),
        "wgrad_bias": lambda: kiln.grouped_mm(t(64, 16).t(), x, o, bias=t(4, 32)),
        "out_shape": lambda: kiln.grouped_mm(x, b, o, out=t(64, 8)),
        "out_dtype": lambda: kiln.grouped_mm(x, b, o, out_dtype=torch.int32),
    }
    with pytest.raises((ValueError, TypeError), match=match):
        calls[case]()


def test_device_mismatch():
    x = torch.empty(64, 32, dtype=torch.bfloat16, device="meta")
    with pytest.raises(ValueError, match="offs is on"):
        with FakeTensorMode():
            kiln.grouped_mm(t(64, 32), t(4, 16, 32).transpose(-2, -1), offs(4, "meta"))
    del x


def _count_graphs():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        from torch._dynamo.backends.debugging import aot_eager
        return aot_eager(gm, example_inputs)

    return graphs, backend


@pytest.mark.parametrize("single_weight", [True, False])
def test_compile_fullgraph_traces_forward_and_backward(single_weight):
    torch._dynamo.reset()
    fc1 = kiln.nn.GroupedLinear(4, 32, 64, device="meta", single_weight=single_weight)
    fc2 = kiln.nn.GroupedLinear(4, 32, 32, device="meta", single_weight=single_weight)

    def mlp(x, offs, probs):
        h = fc1(x, offs)
        a, g = h.chunk(2, dim=-1)
        return fc2(torch.nn.functional.silu(a) * g, offs, probs)

    graphs, backend = _count_graphs()
    f = torch.compile(mlp, fullgraph=True, backend=backend)
    x = torch.empty(64, 32, dtype=torch.bfloat16, device="meta", requires_grad=True)
    p = torch.empty(64, device="meta", requires_grad=True)
    y = f(x, offs(4, "meta"), p)
    assert y.shape == (64, 32) and len(graphs) == 1
    y.sum().backward()
    assert x.grad.shape == (64, 32) and p.grad.shape == (64,)
    for layer in (fc1, fc2):
        for w in layer.weights():
            assert w.grad is not None and w.grad.shape == w.shape
        assert layer.bias.grad.shape == layer.bias.shape


def test_compile_records_the_kiln_op():
    torch._dynamo.reset()
    graphs, backend = _count_graphs()

    def f(a, b, o):
        return kiln.grouped_mm(a, b, o)

    a = torch.empty(64, 32, dtype=torch.bfloat16, device="meta")
    b = torch.empty(4, 16, 32, dtype=torch.bfloat16, device="meta").transpose(-2, -1)
    torch.compile(f, fullgraph=True, backend=backend)(a, b, offs(4, "meta"))
    assert "kiln.grouped_mm" in graphs[0].code


def test_compile_traces_out_variant():
    torch._dynamo.reset()
    graphs, backend = _count_graphs()

    def f(a, b, o, out):
        kiln.grouped_mm(a, b, o, out=out)
        return out

    a = torch.empty(64, 32, dtype=torch.bfloat16, device="meta")
    b = torch.empty(4, 16, 32, dtype=torch.bfloat16, device="meta").transpose(-2, -1)
    out = torch.empty(64, 16, dtype=torch.bfloat16, device="meta")
    y = torch.compile(f, fullgraph=True, backend=backend)(a, b, offs(4, "meta"), out)
    assert y.shape == (64, 16) and len(graphs) == 1
    assert "kiln.grouped_mm_out" in graphs[0].code
