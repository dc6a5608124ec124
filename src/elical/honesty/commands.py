"""File-level entry points of ``elical honesty-tune`` and ``elical honesty-eval`` (the CLI only parses)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from elical.data.items import QAItem
from elical.honesty.builders import SFTExample, build_examples, check_records, summarize
from elical.honesty.config import HonestyConfig, TuneConfig
from elical.honesty.tune import TuneResult


def load_config(path: str | os.PathLike | None, **overrides) -> HonestyConfig:
    """The config from YAML (``honesty:`` section or bare) or defaults, with command-line overrides."""
    clean = {k: v for k, v in overrides.items() if v is not None}
    tune_keys = set(TuneConfig.model_fields)
    tune_over = {k: clean.pop(k) for k in list(clean) if k in tune_keys}
    config = HonestyConfig.from_yaml(path, **clean) if path else HonestyConfig(**clean)
    if tune_over:
        config = config.model_copy(update={"tune": config.tune.model_copy(update=tune_over)})
    return HonestyConfig.model_validate(config.model_dump())


def tune_from_files(
    records: Sequence[str | os.PathLike], *, model: str, out: str | os.PathLike, config: HonestyConfig,
    progress: bool = True,
) -> tuple[TuneResult, dict]:
    """Build the method's examples from record files (checked first, before the output folder's lock is
    taken: bad records leave nothing behind), tune LoRA on the model, save; one process at a time per
    output folder (elical.core.folder_lock)."""
    from elical.core.folder_lock import folder_lock
    from elical.records import read_records

    examples = build_examples(check_records(read_records(list(records))), config.method, config)
    with folder_lock(out):
        return _tune_locked(examples, records, model, out, config, progress)


def _tune_locked(
    examples: list[SFTExample], records: Sequence[str | os.PathLike], model: str, out: str | os.PathLike, config: HonestyConfig,
    progress: bool,
) -> tuple[TuneResult, dict]:
    """:func:`tune_from_files` once it holds the output folder's lock."""
    from elical.honesty.tune import tune
    from elical.model.loading import load_model

    lm, tokenizer, source = load_model(model, device=config.tune.device)
    result = tune(examples, lm, tokenizer, config, out, progress=progress, base_name=source.name or model)
    meta_path = Path(out) / "tune_meta.json"
    meta = json.loads(meta_path.read_text())
    meta["base_model_spec"] = model
    meta["records"] = [str(p) for p in records]
    meta_path.write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return result, summarize(examples)


def eval_items(records: Sequence[str | os.PathLike], honesty_data: str | os.PathLike | None,
               limit: int | None) -> list[QAItem]:
    """The questions honesty-eval answers: those of the record files, then PUQA/PKQA's; ``limit`` keeps the
    first n of each dataset (each PUQA/PKQA file is one), as annotate's does."""
    from elical.data.loaders import first_of_each_dataset
    from elical.honesty.scoring import items_from_records, load_honesty_dir
    from elical.records import read_records

    items = items_from_records(first_of_each_dataset(read_records(list(records)), limit)) if records else []
    return items + (load_honesty_dir(honesty_data, limit=limit) if honesty_data else [])


def eval_from_files(
    model: str,
    adapter: str | os.PathLike,
    *,
    out: str | os.PathLike,
    config: HonestyConfig,
    records: Sequence[str | os.PathLike] = (),
    honesty_data: str | os.PathLike | None = None,
    limit: int | None = None,
    predictions: str | os.PathLike | None = None,
    val_records: Sequence[str | os.PathLike] = (),
    progress: bool = True,
) -> pd.DataFrame:
    """Answer record questions and/or PUQA/PKQA (:func:`eval_items`) with and without the adapter, score,
    optionally add the EliCal gate (prediction file + validation records), and write the table under ``out``."""
    from elical.honesty.scoring import evaluate_adapter, write_scores
    from elical.model.loading import load_model
    from elical.records import read_records

    items = eval_items(records, honesty_data, limit)
    if not items:
        raise ValueError("nothing to evaluate: give --records and/or --honesty-data")
    if predictions and not val_records:
        raise ValueError("the EliCal gate needs --val-records (tau is chosen on a validation split, never the evaluated set)")
    if not Path(adapter, "adapter_config.json").exists():
        raise FileNotFoundError(f"no peft adapter in {adapter} (expected adapter_config.json; honesty-tune writes OUT/adapter)")
    if not Path(adapter, "adapter_model.safetensors").exists():  # never unpickle a file someone sent
        found = " (it holds a pickled adapter_model.bin)" if Path(adapter, "adapter_model.bin").exists() else ""
        raise ValueError(f"{adapter}: no adapter_model.safetensors{found}; elical loads safetensors adapters only: "
                         "convert with peft (PeftModel.from_pretrained(...).save_pretrained(dir, safe_serialization=True)) "
                         "on a machine that trusts the file")
    val = read_records(list(val_records)) if predictions else []
    lm, tokenizer, _ = load_model(model, device=config.tune.device)
    method = _method_of(adapter) or "aligned"
    table, answers = evaluate_adapter(lm, tokenizer, adapter, items, config, None, method, progress)
    meta = {"config": config.model_dump(), "adapter": str(adapter), "model": model}
    if predictions:
        table, answers, gate_meta = _add_gate(table, answers, items, val, predictions, config)
        meta["gate"] = gate_meta
    write_scores(table, out, meta=meta)
    answers.to_parquet(Path(out) / "answers.parquet", index=False)
    return table


def _method_of(adapter: str | os.PathLike) -> str | None:
    """The method an adapter was tuned with (from honesty-tune's meta file next to it)."""
    meta = Path(adapter).parent / "tune_meta.json"
    return json.loads(meta.read_text()).get("method") if meta.exists() else None


def _add_gate(table, answers, items, val, predictions, config):
    import numpy as np

    from elical.honesty.compare import GATE_METHOD, gate_rows
    from elical.model.predictions import read_predictions

    preds = read_predictions(predictions)
    if {i.id for i in items} & {r.id for r in val}:
        raise ValueError("validation and evaluation questions overlap: tau must not be chosen on the evaluated set")
    if not any(i.id in preds.confidence for i in items):
        raise KeyError(f"none of the evaluated questions has a confidence in {predictions}")
    unaligned = answers[answers["method"] == "unaligned"].drop(columns="method").reset_index(drop=True)
    gate, rows, gated = gate_rows(items, unaligned, preds.confidence, val, config, GATE_METHOD)
    table = pd.concat([table, pd.DataFrame(rows)], ignore_index=True)
    table["tau"] = np.where(table["method"] == GATE_METHOD, gate.tau, np.nan)
    answers = pd.concat([answers, gated], ignore_index=True)
    gate_meta = {"tau": gate.tau, "objective": gate.objective, "validation_score": gate.validation_score,
                 "n_validation": gate.n_validation, "predictions": str(predictions),
                 "evaluated_with_confidence": int(sum(i.id in preds.confidence for i in items))}
    return table, answers, gate_meta
