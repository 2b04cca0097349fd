# SPDX-License-Identifier: Apache-2.0
"""python/bench/steady.py's alternation: a fault in one side's burst is
reported with that side's name (a long A/B process that dies must say
which of its kernels it was running).  No GPU: the bursts are stand-ins."""
import os
import sys

import pytest

from conftest import HAS_TORCH

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="needs torch (steady.py imports it)")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))


def test_a_faulting_burst_names_its_side(monkeypatch):
    import steady

    ran = []

    def burst(fn, reps):
        fn()
        return [0.1] * reps

    def fine():
        ran.append("fine")

    def faults():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(steady, "_burst", burst)
    monkeypatch.setattr(steady.torch.cuda, "synchronize", lambda: None)
    with pytest.raises(RuntimeError, match=r"side 'kc4': CUDA error: an illegal memory access"):
        steady.alternate({"as is": fine, "kc4": faults}, reps=2, rounds=1, warm_s=0.0)
    assert ran == ["fine"]   # the side before it ran; the faulting one stopped the round


def test_sides_that_run_give_their_medians(monkeypatch):
    import steady

    times = {"a": 0.5, "b": 2.0}
    monkeypatch.setattr(steady, "_burst", lambda fn, reps: [fn()] * reps)
    monkeypatch.setattr(steady.torch.cuda, "synchronize", lambda: None)
    ms = steady.alternate({n: (lambda t=t: t) for n, t in times.items()}, reps=3, rounds=2, warm_s=0.0)
    assert ms == times
