"""The LoRA product of a layer wider out than in (an MLP's gate and up projections), as one GEMM.

``y = x Wᵀ + s (x Aᵀ) Bᵀ`` is ``[x | s x Aᵀ] [W | B]ᵀ``: the rank-r update joins the base product as r more
columns of its inner dimension. Adding it afterwards instead (``addmm_`` of a K=r product into ``y``)
reads and writes all of ``y``, an (M, N) pass that cuBLAS runs far from memory speed: on the 7B MLP
(N = 18,944) it took 0.8 ms per projection and micro-batch of 16k tokens, a quarter of the base GEMM
(``benchmarks/results/profile_7b_flex_h200.txt``). Joining costs two copies of the smaller sides
(``x`` and ``W``), and in the backward the same one GEMM gives the gradients of ``x`` and of ``s x Aᵀ``.
Worth it only where the output is wider than the input (N > K); elsewhere the copy of ``x`` costs more.
"""

from __future__ import annotations

from typing import Any

import torch


class WideLoraProduct(torch.autograd.Function):
    """``x Wᵀ + scale (x Aᵀ) Bᵀ`` (+ bias) with gradients for ``x``, ``A`` and ``B``; ``W`` and the bias
    are frozen. All tensors in one dtype (the caller casts); ``x`` is 2-D."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                lora_a: torch.Tensor, lora_b: torch.Tensor, scale: float) -> torch.Tensor:
        update = torch.mm(x, lora_a.t()) * scale  # (M, r)
        out = torch.nn.functional.linear(torch.cat([x, update], 1), torch.cat([weight, lora_b], 1), bias)
        ctx.save_for_backward(x, update, weight, lora_a, lora_b)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, update, weight, lora_a, lora_b = ctx.saved_tensors
        inner = x.shape[1]
        grad_joined = torch.mm(grad, torch.cat([weight, lora_b], 1))  # (M, K + r): d x (direct) | d update
        grad_xa = grad_joined[:, inner:] * ctx.scale  # d (x Aᵀ)
        grad_b = torch.mm(grad.t(), update)
        grad_a = torch.mm(grad_xa.t(), x)
        grad_x = grad_joined[:, :inner].addmm_(grad_xa, lora_a) if ctx.needs_input_grad[0] else None
        return grad_x, None, None, grad_a, grad_b, None


def wide_lora_product(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, lora_a: torch.Tensor,
                      lora_b: torch.Tensor, scale: float, dtype: torch.dtype) -> torch.Tensor:
    """The LoRA Linear's output for ``x`` of any leading shape, computed in ``dtype``; the gradients of
    ``lora_a`` and ``lora_b`` arrive in their own dtype (autograd casts them back)."""
    flat = x.reshape(-1, x.shape[-1]).to(dtype)
    out = WideLoraProduct.apply(flat, weight.to(dtype), None if bias is None else bias.to(dtype),
                                lora_a.to(dtype), lora_b.to(dtype), scale)
    return out.view(*x.shape[:-1], weight.shape[0])
