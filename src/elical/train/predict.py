"""Confidence prediction on files: `elical predict`, and `elical gate` (a gate fitted on a model's scores)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from elical.core.inputs import InputError
from elical.model.gate import Gate, choose_gate, parse_objective, save_gate
from elical.model.key import ModelKey
from elical.model.network import ConfidenceModel, qa_prompt
from elical.records import Record, read_records
from elical.train.inference import (  # noqa: F401  (last_token_outputs, predict_logits, sigmoid: importable here too)
    last_token_outputs,
    predict_logits,
    predict_prompts,
    sigmoid,
)
from elical.train.predict_config import GateConfig, PredictConfig


def record_prompts(model: ConfidenceModel, records: Sequence[Record]) -> list[str]:
    """The prompt each record was answered from (stored by annotate), else the configured QA prompt."""
    return [rec.prompt if rec.prompt else qa_prompt(model.tokenizer, rec.question, model.config)
            for rec in records]


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
    config: PredictConfig | None = None,
    *,
    method: str | None = None,
    device: str | None = None,
    key: ModelKey | None = None,
) -> int:
    """Write one confidence per question of record/QA files in the prediction format; returns the count.
    ``config``: the settings (default :class:`PredictConfig`'s); ``method`` and ``device``, when given, replace
    its own.

    The trained model's ``key`` (default: the one its folder's training settings give) goes into Parquet
    metadata, and names the predictions unless the method does (a folder without training settings: its own
    name, or its parent's for an ``elical train`` output's ``model/``)."""
    from elical.model.loading import pick_device
    from elical.model.model_folder import find_model_folder, read_saved
    from elical.model.predictions import write_predictions

    replaced = {name: value for name, value in (("method", method), ("device", device)) if value is not None}
    config = PredictConfig.model_validate({**(config or PredictConfig()).model_dump(), **replaced})
    method, device = config.method, config.device
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
    model = ConfidenceModel.load(folder, device=device, base_model=config.base_model)
    if config.compile_layers:
        model.compile_layers()
    confidence = predict_records(model, records, tokens_per_batch=config.tokens_per_batch)
    meta = {"model_dir": str(folder), "inputs": [str(p) for p in inputs], "model": saved.get("model"),
            "train": saved.get("train"), "device": device}
    # the key found in the folder goes where there is metadata to keep it (Parquet; CSV and JSONL have none)
    write_predictions(out, [r.id for r in records], confidence, method, meta,
                      key or (derived if Path(out).suffix == ".parquet" else None))
    return len(records)


def _correctness(records: Sequence[Record], source: str) -> list[bool]:
    """Each record's greedy correctness; records without one are an InputError."""
    missing = [r.id for r in records if r.greedy_correct is None]
    if missing:
        raise InputError(f"{source}: {len(missing)} of {len(records)} records have no greedy_correct "
                         f"(the gate needs the correctness of the greedy answer), e.g. {missing[0]!r}")
    return [bool(r.greedy_correct) for r in records]


def fit_gate_files(
    model_dir: str | os.PathLike,
    records: Sequence[str | os.PathLike],
    config: GateConfig,
    *,
    retrieved: Sequence[str | os.PathLike] = (),
) -> tuple[Gate, Path]:
    """Score labelled validation records with the model in ``model_dir`` (as ``elical serve`` scores a
    question), choose the gate by the config's objective and save it there. ``retrieved``: records of the same
    questions answered after retrieval (their greedy correctness prices the retrieval band)."""
    from elical.model.model_folder import find_model_folder

    objective, device = config.objective, config.device
    goal = parse_objective(objective)
    if retrieved and goal.kind != "costs":
        raise InputError("--retrieved-records: only the costs objective prices retrieval (costs:wrong=..,retrieve=..)")
    source = ", ".join(map(str, records))
    validation = read_records(list(records))
    if not validation:
        raise InputError(f"{source}: no validation records")
    correct = _correctness(validation, source)
    after = None
    if retrieved:
        by_id = {r.id: r for r in read_records(list(retrieved))}
        missing = [r.id for r in validation if r.id not in by_id]
        if missing:
            raise InputError(f"--retrieved-records: {len(missing)} validation question(s) have no record there, "
                             f"e.g. {missing[0]!r}")
        after = _correctness([by_id[r.id] for r in validation], "--retrieved-records")
    folder = find_model_folder(model_dir)
    model = ConfidenceModel.from_pretrained(folder, device=device)
    confidence = model.confidence([r.question for r in validation])
    gate = choose_gate(confidence, correct, objective, after)
    return gate, save_gate(gate, folder)
