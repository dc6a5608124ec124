"""The LoRA update ``base + s (x Aᵀ) Bᵀ`` of a compiled layer as one pointwise pass over the output.

Eager, :func:`elical.model.fused_lora_forward` adds the update with ``addmm_``: a GEMM of inner size r
(the LoRA rank) into the base output. cuBLAS runs it far from memory speed: on the 7B MLP (outputs of
18,944) it took 0.8 ms per projection and 16k-token micro-batch, a quarter of the base GEMM, where a
read and a write of the output take about 0.3 ms (``benchmarks/results/profile_train_7b_flex_h200.txt``).
Under ``torch.compile`` the update is written as r broadcast products instead, which inductor fuses into
one kernel (float32 inside, one rounding, as ``addmm_``); the backward stays two small GEMMs.
"""

from __future__ import annotations

from typing import Any

import torch


class LoraUpdate(torch.autograd.Function):
    """``base + scale * xa @ weight_bᵀ`` for 2-D ``base`` (M, N), ``xa`` (M, r), ``weight_b`` (N, r) of one dtype."""

    @staticmethod
    def forward(ctx: Any, base: torch.Tensor, xa: torch.Tensor, weight_b: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(xa, weight_b)
        ctx.scale = scale
        wide = torch.promote_types(base.dtype, torch.float32)  # half precision adds in float32
        update = base.to(wide)
        for j in range(xa.shape[1]):  # unrolled over the rank: pointwise, so inductor fuses it into one pass
            update = update + (scale * xa[:, j, None].to(wide)) * weight_b[:, j].to(wide)
        return update.to(base.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        xa, weight_b = ctx.saved_tensors
        grad_xa = torch.mm(grad, weight_b) * ctx.scale if ctx.needs_input_grad[1] else None
        grad_b = torch.mm(grad.t(), xa) * ctx.scale if ctx.needs_input_grad[2] else None
        return grad, grad_xa, grad_b, None
