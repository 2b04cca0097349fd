# SPDX-License-Identifier: Apache-2.0
"""kiln: grouped GEMMs for Mixture-of-Experts layers.

`import kiln` needs no torch: the library, its version, Context and KilnError
come through ctypes.  The torch-facing functions (grouped_mm, prepare,
kiln.nn) import torch when first used.
"""
from ._lib import Context, KilnError, library_path, version as __version__

__all__ = ["Context", "KilnError", "grouped_mm", "prepare", "scaled_grouped_mm", "prepare_scaled",
           "quantize_rows", "quantize_weights", "library_path", "nn", "__version__"]


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


def scaled_grouped_mm(mat_a, mat_b, scale_a, scale_b, offs, *, out=None, out_dtype=None,
                      use_fast_accum=False, bias=None, row_scale=None, scale_bias=False,
                      alpha=1.0, op="fprop"):
    """torch._scaled_grouped_mm on kiln's fp8 kernels (row-wise, block and
    per-tensor scales), with a fused epilogue; see kiln._fp8.scaled_grouped_mm."""
    from . import _fp8
    return _fp8.scaled_grouped_mm(mat_a, mat_b, scale_a, scale_b, offs, out=out,
                                  out_dtype=out_dtype, use_fast_accum=use_fast_accum, bias=bias,
                                  row_scale=row_scale, scale_bias=scale_bias, alpha=alpha, op=op)


def prepare_scaled(*args, **kwargs):
    """kiln.prepare for scaled_grouped_mm; see kiln._fp8.prepare_scaled."""
    from . import _fp8
    return _fp8.prepare_scaled(*args, **kwargs)


def quantize_rows(x, offs=None, *, dtype=None, block=False):
    """Activations or gradients to fp8 with a scale per row (or per row and
    128 columns); see kiln._fp8.quantize_rows."""
    from . import _fp8
    import torch
    return _fp8.quantize_rows(x, offs, dtype=dtype or torch.float8_e4m3fn, block=block)


def quantize_weights(w, *, dtype=None, recipe="block", transposed=False):
    """Expert weights to fp8 (128x128 blocks or one scale a group), with the
    transposed copy dgrad reads; see kiln._fp8.quantize_weights."""
    from . import _fp8
    import torch
    return _fp8.quantize_weights(w, dtype=dtype or torch.float8_e4m3fn, recipe=recipe,
                                 transposed=transposed)


def __getattr__(name):
    # kiln.nn imports torch: only when asked for.
    if name == "nn":
        import importlib
        return importlib.import_module(".nn", __name__)
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")
