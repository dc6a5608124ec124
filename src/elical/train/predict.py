"""Confidence prediction: packed forward passes in inference mode, and `elical predict` on files."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import torch

from elical.model import ConfidenceModel, qa_prompt
from elical.records import Record, read_records
from elical.train.batching import packed_batches, tokenize_prompts


def record_prompts(model: ConfidenceModel, records: Sequence[Record]) -> list[str]:
    """The prompt each record was answered from (stored by annotate), else the configured QA prompt."""
    return [rec.prompt if rec.prompt else qa_prompt(model.tokenizer, rec.question, model.config)
            for rec in records]


@torch.inference_mode()
def predict_logits(
    model: torch.nn.Module,
    seqs: Sequence[Sequence[int]],
    indices: Sequence[int],
    pad_id: int,
    tokens_per_batch: int = 16384,
    row_length: int = 1024,
    accelerator=None,
    progress=None,
) -> dict[int, float]:
    """Logit per question index; with an Accelerator, each process does its share and all get all."""
    rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
    mine = list(indices)[rank::world]
    device = accelerator.device if accelerator else next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: dict[int, float] = {}
    for batch in packed_batches(seqs, mine, pad_id, tokens_per_batch, row_length):
        logits = model(**batch.to(device).model_inputs()).float().cpu().tolist()
        out.update(zip(batch.order, logits))
        if progress is not None:
            progress(len(batch.order))
    model.train(was_training)
    if world > 1:
        from accelerate.utils import gather_object

        merged: dict[int, float] = {}
        for part in gather_object([out]):
            merged.update(part)
        out = merged
    return out


def sigmoid(x: float) -> float:
    """Numerically safe logistic function."""
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def predict_records(
    model: ConfidenceModel,
    records: Sequence[Record],
    tokens_per_batch: int = 16384,
    row_length: int = 1024,
    show_progress: bool = True,
) -> list[float]:
    """Confidence in [0, 1] per record, in record order."""
    from rich.progress import Progress

    seqs, _ = tokenize_prompts(model.tokenizer, record_prompts(model, records), model.config.max_length)
    with Progress(disable=not show_progress, transient=True) as bar:
        task = bar.add_task("predicting", total=len(seqs))
        logits = predict_logits(model, seqs, range(len(seqs)), model.tokenizer.pad_token_id,
                                tokens_per_batch, row_length,
                                progress=lambda n: bar.advance(task, n))
    return [sigmoid(logits[i]) for i in range(len(seqs))]


def predict_files(
    model_dir: str | os.PathLike,
    inputs: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    method: str | None = None,
    device: str = "auto",
    base_model: str | None = None,
    tokens_per_batch: int = 16384,
    compile_layers: bool = False,
) -> int:
    """Write one confidence per question of record/QA files in the prediction format; returns the count."""
    import json

    from elical.predictions import write_predictions

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    records = read_records(list(inputs))
    if not records:
        raise ValueError(f"no questions found in {', '.join(map(str, inputs))}")
    model = ConfidenceModel.load(model_dir, device=device, base_model=base_model)
    if compile_layers:
        model.compile_layers()
    confidence = predict_records(model, records, tokens_per_batch=tokens_per_batch)
    saved = json.loads((Path(model_dir) / "elical_model.json").read_text())
    meta = {"model_dir": str(model_dir), "inputs": [str(p) for p in inputs], "model": saved.get("model"),
            "train": saved.get("train"), "device": device}
    write_predictions(out, [r.id for r in records], confidence, method or Path(model_dir).name, meta)
    return len(records)
