# SPDX-License-Identifier: Apache-2.0
"""python/bench/stream_peer.py, the side that moves a call's bytes and does
nothing else: its time is a bound on any one launch only if it reads every
element of the operands and writes every element of the output.  Checked
in Triton's interpreter on the CPU, with sizes off its 8192-element chunks.
Each check runs in a child process with TRITON_INTERPRET set before triton
is first imported: in this process another test may have imported triton
already, and the interpreter then finds triton.language's own functions
compiled, not interpreted."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import HAS_TORCH

HAS_TRITON = importlib.util.find_spec("triton") is not None
# Triton's interpreter imports numpy, which neither torch nor triton requires
HAS_NUMPY = importlib.util.find_spec("numpy") is not None
pytestmark = pytest.mark.skipif(not (HAS_TORCH and HAS_TRITON and HAS_NUMPY),
                                reason="needs torch, triton and numpy (Triton's interpreter)")

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")


def interpreted(code):
    """What `code` prints last, parsed as JSON, run in a child interpreter
    with stream_peer importable and Triton interpreting."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=BENCH)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_reads_every_element_and_writes_the_output():
    r = interpreted("""
import json, torch, stream_peer as sp
g = torch.Generator().manual_seed(3)
x = torch.randn(37, 300, generator=g).to(torch.bfloat16)        # 11,100: off the chunk
w = torch.randn(3, 5000, 300, generator=g).to(torch.bfloat16)   # read through its transpose
out = torch.full((37, 5000), 7.0, dtype=torch.bfloat16)
launch = sp.stream_fn(x, w.transpose(-2, -1), out)
launch()
print(json.dumps({"got": launch.sink.double().sum().item(),
                  "want": (x.double().sum() + w.double().sum()).item(),
                  "nonzero": torch.count_nonzero(out).item()}))
""")
    assert r["got"] == pytest.approx(r["want"], rel=1e-5, abs=1e-2)
    assert r["nonzero"] == 0


def test_refuses_a_tensor_that_is_not_one_block():
    r = interpreted("""
import json, torch, stream_peer as sp
try:
    sp.flat(torch.zeros(4, 5, 6)[:, 1:, :])
    print(json.dumps({"refused": ""}))
except ValueError as e:
    print(json.dumps({"refused": str(e)}))
""")
    assert "not a contiguous block" in r["refused"]
