# SPDX-License-Identifier: Apache-2.0
"""kiln: grouped GEMMs for Mixture-of-Experts layers.

`import kiln` needs no torch: the library, its version, Context and KilnError
come through ctypes.  The torch-facing functions (grouped_mm, prepare,
kiln.nn) import torch when first used.
"""
from ._lib import Context, KilnError, library_path, version as __version__

__all__ = ["Context", "KilnError", "grouped_mm", "prepare", "library_path", "nn", "__version__"]


def grouped_mm(mat_a, mat_b, offs, *, out=None, out_dtype=None, bias=None, row_scale=None,
               scale_bias=False, alpha=1.0):
    """torch._grouped_mm with a fused epilogue; see kiln._torch.grouped_mm."""
    from . import _torch
    return _torch.grouped_mm(mat_a, mat_b, offs, out=out, out_dtype=out_dtype, bias=bias,
                             row_scale=row_scale, scale_bias=scale_bias, alpha=alpha)


def prepare(*args, **kwargs):
    """Resolves the kernels a call would use, before CUDA-graph capture; see
    kiln._torch.prepare."""
    from . import _torch
    return _torch.prepare(*args, **kwargs)


def __getattr__(name):
    # kiln.nn imports torch: only when asked for.
    if name == "nn":
        import importlib
        return importlib.import_module(".nn", __name__)
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")
