"""Speed options of a training step (TrainSettings' ``compile_mode``, ``lora_dtype``), none of which
changes what is computed: which forward a step calls (eager, layers compiled, the whole model compiled,
or replayed as CUDA graphs on static shapes) and whether the LoRA weights enter it as bf16 copies.

Small models are host-bound on a GPU: SmolLM2-135M spends ~9x more CPU than GPU time per step, a good
part of it in ~1,100 casts of float32 LoRA weights under bf16 autocast
(benchmarks/results/profile_train_step_smollm2_h200.txt); :class:`LoraCopies` makes them in one batched
cast per step, CUDA graphs remove the per-kernel launch cost altogether.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from elical.model.network import LORA_COPY_ATTR
from elical.train.config import TrainConfig


class LoraCopies:
    """bf16 copies of a bf16 model's float32 LoRA weights, which :func:`elical.model.network.fused_lora_forward`
    reads while they are attached.

    The numbers are those of autocast's own casts (same bf16 weights in the same products, same bf16
    gradients added to float32 ones), so weights, gradients and AdamW states stay float32; only the
    ~2 casts per adapted layer and forward become one batched copy per step and one batched add per
    micro-batch. Gradients reach the float32 weights outside autograd, hence one process only."""

    def __init__(self, model: Any) -> None:
        from peft.tuners.lora.layer import Linear as LoraLinear

        if model.autocast_dtype != torch.bfloat16:
            raise ValueError("lora_dtype bf16 needs a bf16 backbone (dtype: bfloat16, or auto on a GPU with bf16)")
        if not model.config.fused_lora:
            raise ValueError("lora_dtype bf16 needs the fused LoRA forward (model config fused_lora: true)")
        self.layers: list[nn.Module] = []
        self.masters: list[torch.Tensor] = []
        for module in model.modules():
            if type(module) is LoraLinear and isinstance(module.base_layer, nn.Linear):
                name = module.active_adapters[0]
                self.layers.append(module)
                self.masters += [module.lora_A[name].weight, module.lora_B[name].weight]  # type: ignore[list-item]
        if not self.masters or not all(p.requires_grad for p in self.masters):
            raise ValueError("lora_dtype bf16: the model has no trainable LoRA layers")
        self.copies = [torch.empty_like(p, dtype=torch.bfloat16).requires_grad_() for p in self.masters]
        self.grads = [torch.zeros_like(p) for p in self.masters]  # float32 sums of the copies' gradients

    @contextmanager
    def attached(self) -> Iterator[None]:
        """Copies of the current weights in the forward for one optimizer step; their gradients, summed
        over micro-batches by :meth:`collect`, become the weights' gradients at the end."""
        with torch.no_grad():
            torch._foreach_copy_(self.copies, self.masters)
        for i, layer in enumerate(self.layers):
            setattr(layer, LORA_COPY_ATTR, (self.copies[2 * i], self.copies[2 * i + 1]))
        try:
            yield
        finally:
            for layer in self.layers:
                delattr(layer, LORA_COPY_ATTR)
        for master, grad in zip(self.masters, self.grads):
            master.grad = grad

    def collect(self, first: bool) -> None:
        """Add the copies' gradients of one micro-batch to the float32 sums (``first``: start them)."""
        grads = [c.grad for c in self.copies if c.grad is not None]
        if len(grads) < len(self.copies):
            raise RuntimeError("a LoRA layer did not read its bf16 copy (not a plain fused LoRA Linear?); "
                               "train with lora_dtype float32")
        with torch.no_grad():
            if first:
                torch._foreach_copy_(self.grads, grads)
            else:
                torch._foreach_add_(self.grads, grads)
        for copy in self.copies:
            copy.grad = None


@dataclass
class StepSpeed:
    """How a step runs: the forward it calls, the LoRA copies (or None) and whether micro-batches are
    padded to static shapes (CUDA graphs, see :func:`elical.train.batching.pad_batch`)."""

    forward: Callable[..., torch.Tensor]
    copies: LoraCopies | None = None
    static: bool = False

    @contextmanager
    def step(self) -> Iterator[None]:
        """Around one optimizer step's micro-batches."""
        if self.copies is None:
            yield
            return
        with self.copies.attached():
            yield

    def after_backward(self, first: bool) -> None:
        """After each micro-batch's backward (``first``: the step's first)."""
        if self.copies is not None:
            self.copies.collect(first)


def keep_grads(model: nn.Module) -> None:
    """Allocate the trainable parameters' gradients (the loop then zeroes them in place), so that
    backward adds into them instead of keeping a CUDA graph's output buffers, which its next replay
    overwrites."""
    for param in model.parameters():
        if param.requires_grad and param.grad is None:
            param.grad = torch.zeros_like(param)


def compiling(cfg: TrainConfig, device: torch.device) -> bool:
    """Whether ``cfg`` compiles on ``device`` (``compile`` None: on CUDA)."""
    return bool(cfg.compile) or (cfg.compile is None and device.type == "cuda")


def step_speed(wrapped: Any, cfg: TrainConfig, accelerator: Any) -> StepSpeed:
    """The step of ``cfg`` for a prepared model (``compile_mode`` layers compiles before prepare: see
    :func:`elical.train.loop._prepare`). Whole-model modes compile the training forward only; validation
    and prediction stay eager (their shapes vary)."""
    copies = None
    if cfg.lora_dtype == "bf16":
        if accelerator.num_processes > 1:
            raise ValueError("lora_dtype bf16 trains on one process (its gradients bypass the processes' "
                             "gradient sync); use lora_dtype float32 with several")
        copies = LoraCopies(accelerator.unwrap_model(wrapped))
    if not compiling(cfg, accelerator.device) or cfg.compile_mode == "layers":
        return StepSpeed(wrapped, copies)
    if cfg.compile_mode == "model":
        return StepSpeed(torch.compile(wrapped), copies)
    graphed = torch.compile(wrapped, mode="reduce-overhead")  # a second shape recompiles with dynamic shapes, once
    keep_grads(wrapped)

    def forward(**inputs: Any) -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()  # each micro-batch is a new replay
        return graphed(**inputs)

    return StepSpeed(forward, copies, static=True)
