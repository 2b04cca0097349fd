# SPDX-License-Identifier: Apache-2.0
"""Shared checks of what this machine has (torch, a CUDA GPU), and the float64
references that more than one test file compares with."""
import importlib.util

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _has_gpu():
    if not HAS_TORCH:
        return False
    import torch
    return torch.cuda.is_available()


HAS_GPU = _has_gpu()

needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU (or no torch)")


def ref_dbias(dy, counts):
    """The bias gradient in float64: [G,N], each group's rows of dy [T,N]
    summed (rows past sum(counts) are not).  Here, not in each test file,
    because test_call_cache.py and test_gpu.py both check against it."""
    import torch
    out, r = [], 0
    for m in counts:
        out.append(dy[r:r + m].double().sum(0))
        r += m
    return torch.stack(out)
