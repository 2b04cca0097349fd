# SPDX-License-Identifier: Apache-2.0
"""kiln.nn.GroupedLinear: the grouped linear layer of a Mixture-of-Experts MLP
on kiln, with the bias and the routing-probability row scale fused into the
GEMM, dgrad, wgrad (dense or discrete, into main_grad when it exists) and
dbias in backward, torch.compile and CUDA-graph capture."""
import math

import torch

from . import _lib
from . import _torch as kt

__all__ = ["GroupedLinear"]


def _dummy_grad(p):
    """What backward returns for a parameter whose gradient went into
    p.main_grad: None, or (Megatron's hooks wait for one) an unread tensor
    when p.grad_added_to_main_grad exists, as TransformerEngine does."""
    if not hasattr(p, "grad_added_to_main_grad"):
        return None
    p.grad_added_to_main_grad = True
    if getattr(p, "zero_out_wgrad", False):
        return torch.zeros_like(p)
    return torch.empty_like(p)


_data_ptr = torch.Tensor.data_ptr


def _has_main_grad(params):
    return all(getattr(p, "main_grad", None) is not None for p in params)


class _Fn(torch.autograd.Function):
    """The eager path: one autograd node for the layer, so that backward can
    write into main_grad and through pointer tables, which a functional op
    cannot."""

    @staticmethod
    def forward(ctx, x, offs, probs, bias, out, grad_input, mod, *weights):
        mat_b, wptrs = mod._fprop_operand(weights)
        y = kt.launch(x, mat_b, offs, out=out, bias=bias, row_scale=probs,
                      scale_bias=mod.scale_bias, weight_ptrs=wptrs)
        if out is not None:
            ctx.mark_dirty(out)
        ctx.save_for_backward(x, offs, probs, bias, *weights)
        ctx.mod, ctx.grad_input = mod, grad_input
        return y

    @staticmethod
    def backward(ctx, dy):
        x, offs, probs, bias, *weights = ctx.saved_tensors
        mod = ctx.mod
        need_x, _, need_probs, need_bias = ctx.needs_input_grad[:4]
        need_w = ctx.needs_input_grad[7:]
        dt = x.dtype
        dy = dy.contiguous()
        dx = dprobs = dbias = None
        if need_x:
            # dX = s·(dY · W): the row scale fused into the dgrad epilogue.
            mat_b, wptrs = mod._dgrad_operand(weights)
            dx = kt.launch(dy.to(dt), mat_b, offs, out=ctx.grad_input, row_scale=probs,
                           weight_ptrs=wptrs)
        # wgrad reads s·dY; the bias term is s·b with scale_bias, else b: its
        # gradient is the per-group sum of what wgrad reads (then kiln's wgrad
        # writes it in the same call) unless only the weights are scaled.
        dys = kt._scaled(dy, probs, 1.0, dt) if any(need_w) or (need_bias and mod.scale_bias) \
            else None
        accumulate = any(need_w) and _has_main_grad(weights)
        db32 = None
        if need_bias and any(need_w) and dy.dtype == dt and (probs is None or mod.scale_bias):
            db32 = _dbias_buffer(bias, accumulate)
        dws = mod._wgrad(dys, x, offs, weights, need_w, accumulate, db32)
        if need_bias:
            if db32 is None:
                db32 = kt.segment_sum(dys if mod.scale_bias else dy, offs)
            dbias = _bias_grad(bias, db32, accumulate)
        if need_probs:
            # d probs[r] = <dY[r], (X·Wᵀ)[r] (+ bias[g] when the bias is scaled)>;
            # probs has one entry per row of x (forward checks it).
            fb, fptrs = mod._fprop_operand(weights)
            P = kt.launch(x, fb, offs, out_dtype=torch.float32,
                          bias=bias if mod.scale_bias else None, weight_ptrs=fptrs)
            dprobs = (dy * P).sum(-1)
        return (dx, None, dprobs, dbias, None, None, None, *dws)


def _dbias_buffer(bias, accumulate):
    """Where wgrad writes the bias gradient in fp32: bias.main_grad itself when
    the call accumulates and it can (fp32, [G,N] rows), else a new buffer
    (zeros when accumulating into it)."""
    mg = getattr(bias, "main_grad", None)
    if accumulate:
        if mg is not None and mg.dtype == torch.float32 and mg.shape == bias.shape and \
                mg.is_contiguous():
            return mg
        return torch.zeros(bias.shape, dtype=torch.float32, device=bias.device)
    return torch.empty(bias.shape, dtype=torch.float32, device=bias.device)


def _bias_grad(bias, db32, accumulated):
    """What backward returns for the bias, given its fp32 gradient db32 (or
    the buffer it was accumulated into): main_grad += db (unless db32 is
    main_grad) and a dummy, or db in the bias' type."""
    mg = getattr(bias, "main_grad", None)
    if mg is not None:
        if not (accumulated and db32 is mg):
            mg.add_(db32)
        return _dummy_grad(bias)
    return db32.to(bias.dtype)


class GroupedLinear(torch.nn.Module):
    """G linear layers applied to the G groups of rows of x (an MoE layer's
    experts): y[r] = s[r]·(x[r] · W_gᵀ) + (s[r] if scale_bias else 1)·b_g.

    Weights in nn.Linear layout: one [G,N,K] parameter `weight`
    (single_weight=True) or G parameters `weight0`..`weight{G-1}` of [N,K]
    (then a main_grad accumulation writes each expert's buffer in place,
    through a pointer table).  The bias is one [G,N] parameter either way.
    """

    def __init__(self, num_experts, in_features, out_features, bias=True, single_weight=True,
                 dtype=None, device=None, scale_bias=True):
        super().__init__()
        dtype = torch.bfloat16 if dtype is None else dtype
        if dtype not in (torch.bfloat16, torch.float16):
            raise TypeError(f"GroupedLinear: dtype {dtype} is not supported (bfloat16 or "
                            "float16)")
        if not 1 <= num_experts <= _lib.MAX_GROUPS:
            raise ValueError(f"GroupedLinear: num_experts = {num_experts} is out of range "
                             f"(1 .. {_lib.MAX_GROUPS})")
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if v <= 0 or v % 8:
                raise ValueError(f"GroupedLinear: {name} = {v} is not a positive multiple of "
                                 "8 (16-byte rows)")
        self.num_experts, self.in_features, self.out_features = num_experts, in_features, out_features
        self.single_weight, self.scale_bias = single_weight, scale_bias
        G, N, K = num_experts, out_features, in_features
        kw = dict(dtype=dtype, device=device)
        if single_weight:
            self.weight = torch.nn.Parameter(torch.empty(G, N, K, **kw))
        else:
            for i in range(G):
                self.register_parameter(f"weight{i}", torch.nn.Parameter(torch.empty(N, K, **kw)))
        self.bias = torch.nn.Parameter(torch.empty(G, N, **kw)) if bias else None
        self._tables = {}
        self._metas = {}
        self.reset_parameters()

    def weights(self):
        """The weight parameters: [weight] or [weight0, ..., weight{G-1}]."""
        if self.single_weight:
            return [self.weight]
        return [getattr(self, f"weight{i}") for i in range(self.num_experts)]

    @torch.no_grad()
    def reset_parameters(self):
        # nn.Linear's initialisation, per expert.
        bound = 1.0 / math.sqrt(self.in_features)
        for w in self.weights():
            w.uniform_(-bound, bound)
        if self.bias is not None:
            self.bias.uniform_(-bound, bound)

    def extra_repr(self):
        return (f"num_experts={self.num_experts}, in_features={self.in_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}, "
                f"single_weight={self.single_weight}, scale_bias={self.scale_bias}")

    # --- operands ------------------------------------------------------------
    def _table(self, tensors, device, what="weight"):
        """A cached device array of the tensors' addresses; rebuilt (a host
        copy, so never under capture) only when one of them moved.  Each
        tensor's shape and layout is checked when its table is built."""
        key = tuple(map(_data_ptr, tensors))
        tab = self._tables.get(key)
        if tab is None:
            if torch.device(device).type == "cuda" and torch.cuda.is_current_stream_capturing():
                raise RuntimeError(
                    "GroupedLinear: the per-expert tensors moved (or this is the first call) "
                    "during CUDA-graph capture: run one eager step (or layer.prepare()) first")
            if what == "weight":
                for i, t in enumerate(tensors):
                    if (tuple(t.shape) != (self.out_features, self.in_features)
                            or not t.is_contiguous()):
                        raise ValueError(f"GroupedLinear: weight{i} must be a contiguous "
                                         f"[{self.out_features},{self.in_features}] tensor")
            tab = kt.pointer_table(tensors, device)
            if len(self._tables) > 8:
                self._tables.clear()
            self._tables[key] = tab
        return tab

    def _shape_b(self, weights, transpose):
        """A meta [G,N,K] tensor (or its transpose) standing for per-expert
        weights: the shape plan() checks; made once per dtype."""
        dt = weights[0].dtype
        meta = self._metas.get(dt)
        if meta is None:
            meta = self._metas[dt] = torch.empty(self.num_experts, self.out_features,
                                                 self.in_features, dtype=dt, device="meta")
        return meta.transpose(-2, -1) if transpose else meta

    def _fprop_operand(self, weights):
        if self.single_weight:
            return weights[0].transpose(-2, -1), None
        return self._shape_b(weights, True), self._table(weights, weights[0].device)

    def _dgrad_operand(self, weights):
        if self.single_weight:
            return weights[0], None
        return self._shape_b(weights, False), self._table(weights, weights[0].device)

    def _wgrad(self, dys, x, offs, weights, needed, accumulate, dbias=None):
        """dW = (s·dY)ᵀ · X per expert: accumulated into main_grad in fp32 when
        every weight has one (kiln's accumulate mode), else returned.  dbias:
        the fp32 [G,N] buffer the same call writes (adds, when accumulating)
        the bias gradient to."""
        if not any(needed):
            return [None] * len(weights)
        if accumulate:
            if self.single_weight:
                kt.launch(dys.t(), x, offs, out=weights[0].main_grad, out_dtype=torch.float32,
                          accumulate=True, dbias=dbias)
            else:
                mgs = [w.main_grad for w in weights]
                for i, m in enumerate(mgs):
                    if m.dtype != torch.float32 or not m.is_contiguous():
                        raise ValueError(f"GroupedLinear: weight{i}.main_grad must be a "
                                         "contiguous float32 tensor")
                kt.launch(dys.t(), x, offs, out_dtype=torch.float32, accumulate=True,
                          out_ptrs=self._table(mgs, x.device, "main_grad"), dbias=dbias)
            return [_dummy_grad(w) for w in weights]
        dw = kt.launch(dys.t(), x, offs, out_dtype=weights[0].dtype, dbias=dbias)
        if self.single_weight:
            return [dw]
        return list(dw.unbind(0))

    def _offsets(self, sizes, device, kind):
        G = self.num_experts
        if kind == "auto":
            on_device = isinstance(sizes, torch.Tensor) and sizes.device.type != "cpu"
            kind = "offsets" if on_device else "counts"
        if not isinstance(sizes, torch.Tensor):
            sizes = torch.tensor(list(sizes), dtype=torch.int32)
        if sizes.dim() != 1 or sizes.numel() != G:
            raise ValueError(f"GroupedLinear: tokens_per_expert_or_offs has shape "
                             f"{tuple(sizes.shape)}; it needs {G} entries (one per expert)")
        if kind == "counts":
            # Host counts are summed on the host: one copy to the device, no kernel.
            offs = torch.cumsum(sizes, 0, dtype=torch.int32)
            return offs if offs.device == device else offs.to(device, non_blocking=True)
        if sizes.device != device:
            sizes = sizes.to(device, non_blocking=True)
        if kind != "offsets":
            raise ValueError(f"GroupedLinear: sizes = {kind!r} (auto, counts or offsets)")
        if sizes.dtype != torch.int32:
            raise TypeError(f"GroupedLinear: offs is {sizes.dtype}; it must be int32")
        return sizes

    # --- forward -------------------------------------------------------------
    def forward(self, x, tokens_per_expert_or_offs, probs=None, out=None, *, grad_input=None,
                sizes="auto"):
        """x [T, in_features] -> [T, out_features].

        tokens_per_expert_or_offs: per-expert token counts (a list, or a host
        tensor, as TransformerEngine's m_splits), or a device int32 tensor of
        cumulative ends (torch._grouped_mm's offs); `sizes="counts"` reads a
        device tensor as counts.  probs [T] (or [T,1]): the routing
        probabilities, scaling each row (and the bias, with scale_bias).
        out [T, out_features] and grad_input [T, in_features]: caller buffers;
        only the valid rows are written.  Rows past the last offset of the
        output and of x's gradient are left unspecified, as torch._grouped_mm
        leaves them."""
        if x.dim() != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"GroupedLinear: x has shape {tuple(x.shape)}; it needs "
                             f"[T, {self.in_features}]")
        offs = self._offsets(tokens_per_expert_or_offs, x.device, sizes)
        if probs is not None:
            if probs.numel() != x.shape[0]:
                raise ValueError(f"GroupedLinear: probs has {probs.numel()} entries; it needs "
                                 f"one per row of x ({x.shape[0]})")
            probs = probs.reshape(-1).float()
        weights = self.weights()
        if torch.compiler.is_compiling():
            return self._forward_ops(x, offs, probs, out, grad_input, weights)
        return _Fn.apply(x, offs, probs, self.bias, out, grad_input, self, *weights)

    def _forward_ops(self, x, offs, probs, out, grad_input, weights):
        """Under torch.compile: the functional kiln::grouped_mm op and its
        autograd formula (no main_grad fusion, no caller buffers there)."""
        if out is not None or grad_input is not None:
            raise RuntimeError("GroupedLinear: out= and grad_input= are eager-only "
                               "(not under torch.compile)")
        if any(getattr(w, "main_grad", None) is not None for w in weights):
            raise RuntimeError("GroupedLinear: main_grad accumulation is eager-only "
                               "(not under torch.compile)")
        w = weights[0] if self.single_weight else torch.stack(weights)
        return torch.ops.kiln.grouped_mm(x, w.transpose(-2, -1), offs, self.bias, probs,
                                         bool(self.scale_bias), 1.0, None)

    @torch.no_grad()
    def prepare(self, num_tokens, probs=True, backward=True):
        """Resolves and loads the kernels a step with `num_tokens` rows uses
        (forward, and backward's dgrad and wgrad), launching nothing: call it
        before capturing a CUDA graph whose shapes did not run eagerly."""
        weights = self.weights()
        w0 = weights[0]
        x = torch.empty(num_tokens, self.in_features, dtype=w0.dtype, device=w0.device)
        dy = torch.empty(num_tokens, self.out_features, dtype=w0.dtype, device=w0.device)
        offs = torch.zeros(self.num_experts, dtype=torch.int32, device=w0.device)
        s = torch.empty(num_tokens, dtype=torch.float32, device=w0.device) if probs else None
        mat_b, wptrs = self._fprop_operand(weights)
        kt.launch(x, mat_b, offs, bias=self.bias, row_scale=s, scale_bias=self.scale_bias,
                  weight_ptrs=wptrs, prepare_only=True)
        if backward:
            mat_b, wptrs = self._dgrad_operand(weights)
            kt.launch(dy, mat_b, offs, row_scale=s, weight_ptrs=wptrs, prepare_only=True)
            # wgrad as backward calls it: with the bias gradient when backward
            # fuses it (see _Fn.backward).
            acc = _has_main_grad(weights)
            db = None
            if self.bias is not None and (not probs or self.scale_bias):
                db = _dbias_buffer(self.bias, acc)
            if acc:
                if self.single_weight:
                    kt.launch(dy.t(), x, offs, out=w0.main_grad, out_dtype=torch.float32,
                              accumulate=True, dbias=db, prepare_only=True)
                else:
                    mgs = [w.main_grad for w in weights]
                    kt.launch(dy.t(), x, offs, out_dtype=torch.float32, accumulate=True,
                              out_ptrs=self._table(mgs, w0.device, "main_grad"), dbias=db,
                              prepare_only=True)
            else:
                kt.launch(dy.t(), x, offs, out_dtype=w0.dtype, dbias=db, prepare_only=True)
