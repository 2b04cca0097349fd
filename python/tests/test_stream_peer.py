# SPDX-License-Identifier: Apache-2.0
"""python/bench/stream_peer.py, the side that moves a call's bytes and does
nothing else: its time is a bound on any one launch only if it reads every
element of the operands and writes every element of the output.  Checked
in Triton's interpreter on the CPU (TRITON_INTERPRET, set before the kernel
is defined), with sizes off its 8192-element chunks."""
import importlib.util
import os
import sys

import pytest

from conftest import HAS_TORCH

HAS_TRITON = importlib.util.find_spec("triton") is not None
pytestmark = pytest.mark.skipif(not (HAS_TORCH and HAS_TRITON), reason="needs torch and triton")

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")


@pytest.fixture(scope="module")
def sp():
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, BENCH)
    try:
        sys.modules.pop("stream_peer", None)
        import stream_peer
        yield stream_peer
    finally:
        sys.path.remove(BENCH)
        sys.modules.pop("stream_peer", None)
        if old is None:
            os.environ.pop("TRITON_INTERPRET")
        else:
            os.environ["TRITON_INTERPRET"] = old


def test_reads_every_element_and_writes_the_output(sp):
    import torch
    g = torch.Generator().manual_seed(3)
    x = torch.randn(37, 300, generator=g).to(torch.bfloat16)        # 11,100: off the chunk
    w = torch.randn(3, 5000, 300, generator=g).to(torch.bfloat16)   # read through its transpose
    out = torch.full((37, 5000), 7.0, dtype=torch.bfloat16)
    launch = sp.stream_fn(x, w.transpose(-2, -1), out)
    launch()
    want = x.double().sum() + w.double().sum()
    assert launch.sink.double().sum().item() == pytest.approx(want.item(), rel=1e-5, abs=1e-2)
    assert torch.count_nonzero(out).item() == 0


def test_refuses_a_tensor_that_is_not_one_block(sp):
    import torch
    with pytest.raises(ValueError, match="not a contiguous block"):
        sp.flat(torch.zeros(4, 5, 6)[:, 1:, :])
