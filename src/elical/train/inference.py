"""Packed forward passes in inference mode: a confidence model's logits (or hidden states) and
confidences for tokenized or rendered prompts. Below :mod:`elical.model.network` (whose ``confidence`` runs
:func:`predict_prompts`) and :mod:`elical.train.predict` (``elical predict`` on files)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from elical.train.batching import packed_batches, tokenize_prompts

if TYPE_CHECKING:
    from elical.model.network import ConfidenceModel


@torch.inference_mode()
def last_token_outputs(
    model: Any,
    seqs: Sequence[Sequence[int]],
    indices: Sequence[int],
    pad_id: int,
    tokens_per_batch: int = 16384,
    row_length: int = 1024,
    *,
    head: bool = True,
    accelerator: Any = None,
    progress: Callable[[int], object] | None = None,
) -> dict[int, torch.Tensor]:
    """Per question index, the head's logit (``head``) or the final hidden state of the prompt's last
    token (float32, CPU), from packed batches in inference mode; with an Accelerator each process does
    its share and all get all. ``progress`` is told how many questions are done (all processes)."""
    rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
    device = accelerator.device if accelerator else next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: dict[int, torch.Tensor] = {}
    for batch in packed_batches(seqs, list(indices)[rank::world], pad_id, tokens_per_batch, row_length):
        inputs = batch.to(device).model_inputs()
        if head:
            values = model(**inputs)
        else:
            with accelerator.autocast() if accelerator else contextlib.nullcontext():
                values = model.hidden_states(**inputs)
        out.update(zip(batch.order, values.float().cpu()))
        if progress is not None:
            progress(len(batch.order) * world)
    model.train(was_training)
    if world > 1:
        from accelerate.utils import gather_object

        merged: dict[int, torch.Tensor] = {}
        for part in gather_object([out]):
            merged.update(part)
        out = merged
    return out


def predict_logits(model: torch.nn.Module, seqs: Sequence[Sequence[int]], indices: Sequence[int], pad_id: int,
                   tokens_per_batch: int = 16384, row_length: int = 1024, accelerator: Any = None,
                   progress: Callable[[int], object] | None = None) -> dict[int, float]:
    """Confidence logit per question index (see :func:`last_token_outputs`)."""
    outputs = last_token_outputs(model, seqs, indices, pad_id, tokens_per_batch, row_length,
                                 accelerator=accelerator, progress=progress)
    return {i: float(v) for i, v in outputs.items()}


def sigmoid(x: float) -> float:
    """Numerically safe logistic function."""
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def predict_prompts(model: ConfidenceModel, prompts: Sequence[str], tokens_per_batch: int = 16384,
                    row_length: int = 1024, progress: Callable[[int], object] | None = None) -> list[float]:
    """Confidence in [0, 1] per rendered prompt, in order (what ``ConfidenceModel.confidence`` and
    ``elical predict`` both run)."""
    if not prompts:
        return []
    seqs, _ = tokenize_prompts(model.tokenizer, prompts, model.config.max_length)
    # a few short prompts (one served question) fill a row no longer than they are, not 1024 padded tokens
    row_length = min(row_length, sum(len(s) for s in seqs))
    logits = predict_logits(model, seqs, range(len(seqs)), model.tokenizer.pad_token_id, tokens_per_batch,
                            row_length, progress=progress)
    return [sigmoid(logits[i]) for i in range(len(seqs))]
