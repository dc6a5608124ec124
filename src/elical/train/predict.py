"""Confidence prediction: packed forward passes in inference mode, and `elical predict` on files."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from elical.model import ConfidenceModel, qa_prompt
from elical.model_key import ModelKey
from elical.records import Record, read_records
from elical.train.batching import packed_batches, tokenize_prompts


def record_prompts(model: ConfidenceModel, records: Sequence[Record]) -> list[str]:
    """The prompt each record was answered from (stored by annotate), else the configured QA prompt."""
    return [rec.prompt if rec.prompt else qa_prompt(model.tokenizer, rec.question, model.config)
            for rec in records]


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


def predict_records(
    model: ConfidenceModel,
    records: Sequence[Record],
    tokens_per_batch: int = 16384,
    row_length: int = 1024,
    show_progress: bool = True,
) -> list[float]:
    """Confidence in [0, 1] per record, in record order."""
    from rich.progress import Progress

    with Progress(disable=not show_progress, transient=True) as bar:
        task = bar.add_task("predicting", total=len(records))
        return predict_prompts(model, record_prompts(model, records), tokens_per_batch, row_length,
                               progress=lambda n: bar.advance(task, n))


def predict_files(
    model_dir: str | os.PathLike,
    inputs: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    method: str | None = None,
    device: str = "auto",
    base_model: str | None = None,
    tokens_per_batch: int = 16384,
    compile_layers: bool = False,
    key: ModelKey | None = None,
) -> int:
    """Write one confidence per question of record/QA files in the prediction format; returns the count.

    The trained model's ``key`` (default: the one its folder's training settings give) goes into Parquet
    metadata, and names the predictions unless ``method`` does (a folder without training settings: its own
    name, or its parent's for an ``elical train`` output's ``model/``)."""
    from elical.loading import pick_device
    from elical.model_folder import find_model_folder, read_saved
    from elical.predictions import write_predictions

    records = read_records(list(inputs))  # the data first: a bad file is named before the model is read
    if not records:
        raise ValueError(f"no questions found in {', '.join(map(str, inputs))}")
    folder = find_model_folder(model_dir)
    saved = read_saved(folder)
    training = (saved.get("train") or {}).get("config")
    derived = ModelKey.of_training(training) if training else None
    named = key or derived
    method = method or (named.name if named else (folder.parent if folder.name == "model" else folder).resolve().name)
    device = str(pick_device(device))
    model = ConfidenceModel.load(folder, device=device, base_model=base_model)
    if compile_layers:
        model.compile_layers()
    confidence = predict_records(model, records, tokens_per_batch=tokens_per_batch)
    meta = {"model_dir": str(folder), "inputs": [str(p) for p in inputs], "model": saved.get("model"),
            "train": saved.get("train"), "device": device}
    # the key found in the folder goes where there is metadata to keep it (Parquet; CSV and JSONL have none)
    write_predictions(out, [r.id for r in records], confidence, method, meta,
                      key or (derived if Path(out).suffix == ".parquet" else None))
    return len(records)
