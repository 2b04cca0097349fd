# SPDX-License-Identifier: Apache-2.0
"""Shared checks of what this machine has: torch, a CUDA GPU."""
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
