"""One table: the unaligned model, the fine-tuning methods and the EliCal confidence gate, scored
with the same honesty metrics on the same questions.

``run_honesty_plan`` is what ``elical run`` calls when its config asks for honesty results; it returns the
table with the fitted gate (:class:`Comparison`), so the run takes tau from the value, not from gate.json.
Each method's adapter is saved under ``out_dir/<method>/``; a rerun loads adapters already there
instead of training them again.
"""

from __future__ import annotations

import copy
import gc
import random
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from elical.data.items import QAItem
from elical.honesty.builders import HonestyInputError, build_examples, check_records
from elical.honesty.config import METHODS, HonestyConfig, HonestyPlan
from elical.honesty.gating import Gate, choose_tau, confidences_for, gate_answers, gated_texts
from elical.honesty.scoring import (
    answer_table,
    generate_answers,
    items_from_records,
    score_rows,
    write_scores,
)
from elical.model.gate import GATE_FILE, save_gate
from elical.records import Record
from elical.train.budgets import split_records

GATE_METHOD = "elical-gate"


@dataclass(frozen=True)
class Comparison:
    """The comparison's table and the gate it fitted (None without confidences): tau, objective and its
    validation score, for a caller that needs them (``gate.json`` holds the same, for users)."""

    table: pd.DataFrame
    gate: Gate | None


def fit_gate(val_records: Sequence[Record], confidences: Mapping[str, float], config: HonestyConfig) -> Gate:
    """tau on validation records: their greedy correctness against their EliCal confidence."""
    if not val_records:
        raise HonestyInputError("no validation records to choose the gate's tau on")
    usable = check_records(val_records, need_samples=False, need_greedy=True)
    conf = confidences_for([r.id for r in usable], confidences, "validation records")
    return choose_tau(conf, [bool(r.greedy_correct) for r in usable], config.gate_objective)


def gate_rows(
    items: Sequence[QAItem],
    unaligned: pd.DataFrame,
    confidences: Mapping[str, float],
    val_records: Sequence[Record],
    config: HonestyConfig,
    gate_name: str = GATE_METHOD,
) -> tuple[Gate, list[dict[str, Any]], pd.DataFrame | None]:
    """The gate fitted on ``val_records`` and applied to the unaligned answers of ``items`` (an
    :func:`answer_table` in item order): (gate, score rows, gated answers). Items without a
    confidence are left out of the gate's rows, with a warning."""
    gate = fit_gate(val_records, confidences, config)
    if list(unaligned["id"]) != [i.id for i in items]:
        raise ValueError("the unaligned answers are not those of the given questions in the same order")
    has = np.array([i.id in confidences for i in items])
    if not has.all():
        warnings.warn(f"{int((~has).sum())} evaluation question(s) have no confidence; the {gate_name} rows leave them out",
                      stacklevel=2)
    if not has.any():
        return gate, [], None
    keep = [i for i, h in zip(items, has) if h]
    answered = gate_answers(confidences_for([i.id for i in keep], confidences), gate.tau)
    base = unaligned[has].reset_index(drop=True)
    table = answer_table(keep, gated_texts(list(base["answer"]), answered, config.refusal), config)
    return gate, score_rows(gate_name, base, table), table.assign(method=gate_name)


def _aligned_model(model: Any, tokenizer: Any, method: str, records: Sequence[Record], config: HonestyConfig,
                   out: Path | None, progress: bool, base_name: str | None) -> Any:
    """A tuned copy of the generator for one method (loaded from out/<method>/adapter when already there)."""
    from elical.honesty.tune import tune

    fresh = copy.deepcopy(model)
    folder = out / method if out is not None else None
    if folder is not None and (folder / "adapter" / "adapter_config.json").exists() and (folder / "tune_meta.json").exists():
        from peft import PeftModel

        return PeftModel.from_pretrained(fresh, str(folder / "adapter")).eval()
    examples = build_examples(records, method, config)
    return tune(examples, fresh, tokenizer, config, folder, progress=progress, base_name=base_name).model


def run_honesty_comparison(
    train_records: Sequence[Record],
    eval_records: Sequence[Record],
    confidences: Mapping[str, float] | None,
    model: Any,
    tokenizer: Any,
    config: HonestyConfig | None = None,
    out_dir: str | Path | None = None,
    methods: Sequence[str] = METHODS,
    val_records: Sequence[Record] | None = None,
    extra_items: Sequence[QAItem] = (),
    progress: bool = True,
    base_name: str | None = None,
    gate_name: str = GATE_METHOD,
) -> pd.DataFrame:
    """Score the unaligned generator, each fine-tuning method and the EliCal gate on ``eval_records``
    (plus ``extra_items``, e.g. PUQA/PKQA from :func:`load_honesty_dir`); return the table
    (:func:`compare_honesty` returns the fitted gate with it).

    * ``train_records``: annotated with k samples and their correctness (the tuning data);
    * ``confidences``: EliCal confidence per record id, for the validation and evaluated questions
      (None: no gate row); questions without one get no gate row, with a warning;
    * ``val_records``: where tau is chosen (need greedy correctness); default: a seeded
      ``config.val_fraction`` of ``train_records``, then left out of the tuning data too.
    ``gate_name`` labels the gate's rows (say which confidence gates). ``model`` is not changed:
    each method tunes a copy.
    """
    return compare_honesty(train_records, eval_records, confidences, model, tokenizer, config, out_dir, methods,
                           val_records, extra_items, progress, base_name, gate_name).table


def compare_honesty(
    train_records: Sequence[Record],
    eval_records: Sequence[Record],
    confidences: Mapping[str, float] | None,
    model: Any,
    tokenizer: Any,
    config: HonestyConfig | None = None,
    out_dir: str | Path | None = None,
    methods: Sequence[str] = METHODS,
    val_records: Sequence[Record] | None = None,
    extra_items: Sequence[QAItem] = (),
    progress: bool = True,
    base_name: str | None = None,
    gate_name: str = GATE_METHOD,
) -> Comparison:
    """:func:`run_honesty_comparison`, returning the table with the gate it fitted."""
    config = config or HonestyConfig()
    train, val_records, items = _checked_inputs(train_records, eval_records, confidences, config, methods,
                                                val_records, extra_items)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        config.to_yaml(out / "honesty.yaml")
    unaligned, rows, frames = _method_tables(model, tokenizer, items, train, config, methods, out, progress, base_name)
    gate: Gate | None = None
    if confidences is not None:
        gate, gate_scores, gate_answers_table = gate_rows(items, unaligned, confidences, val_records or [], config, gate_name)
        rows += gate_scores
        if gate_answers_table is not None:
            frames.append(gate_answers_table)
    result = pd.DataFrame(rows)
    result["tau"] = np.where(result["method"] == gate_name, gate.tau if gate else np.nan, np.nan)
    if out is not None:
        meta: dict[str, Any] = {"config": config.model_dump(), "methods": list(methods), "tuning_records": len(train),
                                "evaluated": len(items)}
        if gate is not None:
            meta["gate"] = {"name": gate_name, "tau": gate.tau, "objective": gate.objective, "validation_score": gate.validation_score,
                            "n_validation": gate.n_validation}
        write_scores(result, out, "honesty_comparison", meta)
        pd.concat(frames, ignore_index=True).to_parquet(out / "answers.parquet", index=False)
        if gate is not None:
            save_gate(gate, out, name=gate_name)
        else:  # no confidences, no gate: no gate.json (nor one of an earlier comparison in this folder)
            (out / GATE_FILE).unlink(missing_ok=True)
    return Comparison(result, gate)


def _checked_inputs(
    train_records: Sequence[Record],
    eval_records: Sequence[Record],
    confidences: Mapping[str, float] | None,
    config: HonestyConfig,
    methods: Sequence[str],
    val_records: Sequence[Record] | None,
    extra_items: Sequence[QAItem],
) -> tuple[list[Record], Sequence[Record] | None, list[QAItem]]:
    """(tuning records, validation records, evaluated questions) of :func:`run_honesty_comparison`, checked
    before any work: known methods, some questions, unique ids, validation apart from evaluation."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; expected some of {', '.join(METHODS)}")
    train = check_records(train_records)
    if not eval_records and not extra_items:
        raise HonestyInputError("no evaluation questions given")
    if confidences is not None and val_records is None:
        train, val_records = split_records(train, config.val_fraction, config.seed)
    items = items_from_records(eval_records) + list(extra_items)
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        raise HonestyInputError("evaluation questions repeat an id; give each question once")
    if val_records is not None and set(ids) & {r.id for r in val_records}:
        raise HonestyInputError("validation and evaluation questions overlap: tau must not be chosen on the evaluated set")
    return train, val_records, items


def _method_tables(
    model: Any, tokenizer: Any, items: Sequence[QAItem], train: Sequence[Record], config: HonestyConfig,
    methods: Sequence[str], out: Path | None, progress: bool, base_name: str | None,
) -> tuple[pd.DataFrame, list[dict[str, Any]], list[pd.DataFrame]]:
    """The unaligned answers, then each method's tuned model's: (unaligned answer table, score rows,
    per-method answer tables)."""
    from elical.annotate.backends.hf import HFBackend

    before = generate_answers(HFBackend(model, tokenizer, batch_size=config.batch_size), items, config, progress, "unaligned")
    unaligned = answer_table(items, before, config)
    rows = score_rows("unaligned", unaligned, unaligned)
    frames = [unaligned.assign(method="unaligned")]
    for method in methods:
        aligned_model = _aligned_model(model, tokenizer, method, train, config, out, progress, base_name)
        after = generate_answers(HFBackend(aligned_model, tokenizer, batch_size=config.batch_size), items, config, progress, method)
        table = answer_table(items, after, config)
        rows += score_rows(method, unaligned, table)
        frames.append(table.assign(method=method))
        del aligned_model
        gc.collect()
    return unaligned, rows, frames


def run_honesty_plan(
    plan: HonestyPlan,
    train_records: Sequence[Record],
    eval_records: Sequence[Record],
    confidences: Mapping[str, float] | None,
    model: Any,
    tokenizer: Any,
    out_dir: str | Path,
    val_records: Sequence[Record] | None = None,
    progress: bool = True,
) -> Comparison:
    """:func:`compare_honesty` as a run config's ``honesty:`` section asks (PUQA/PKQA added from
    ``plan.honesty_data``, tuning questions capped by a seeded draw): the table and the fitted gate."""
    from elical.honesty.scoring import load_honesty_dir

    extra = load_honesty_dir(plan.honesty_data, limit=plan.honesty_limit) if plan.honesty_data else []
    train = list(train_records)
    if plan.max_tune_records is not None and len(train) > plan.max_tune_records:
        keep = set(random.Random(plan.settings.seed).sample(range(len(train)), plan.max_tune_records))
        train = [r for i, r in enumerate(train) if i in keep]
    return compare_honesty(train, eval_records, confidences, model, tokenizer, plan.settings, out_dir,
                           plan.methods, val_records, extra, progress)
