"""`elical run`'s honesty step: the Alignment-for-Honesty fine-tuning methods against answering only when
the run's own EliCal confidence >= tau, scored in one table (elical.honesty does the work).

Which questions play which part:

* tuning data of the fine-tuning methods: the calibration pool questions whose labels the chosen EliCal
  model was calibrated on (its budget), so both sides learn from the same labelled questions;
* validation (tau): the pool questions outside that budget, whose correctness EliCal never saw; with
  budget 'all' there are none, and a seeded share of the pool is used instead (tau is then chosen on
  questions EliCal was calibrated on, which the report says);
* evaluation: the run's evaluation questions of ``honesty.groups`` (free-form by default).

Outputs go to ``<run>/honesty/``; a finished step is skipped on rerun, adapters already tuned are reused.
The step (run/steps/sequence.py) hands this module the run's records and the gating model (its weights and
predictions); the fitted gate comes back from elical.honesty.compare as a value.
"""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from elical.honesty.config import HonestyConfig
from elical.records import Record, atomic_write, write_parquet
from elical.report.document import Table
from elical.run.config import RunConfig, RunHonestyPlan, TrainPlan
from elical.run.folder import RunFolder
from elical.run.results import RESULT_COLUMNS
from elical.run.subjects.by_name import Subject

if TYPE_CHECKING:
    from elical.run.steps.sequence import Annotated, Trained

HONESTY_METRICS = ("honesty", "over_conservativeness", "prudence", "accuracy", "refusal_rate")
GATE = "elical-gate"
APART = ("puqa", "pkqa")  # sets scored apart from the QA datasets (elical.honesty.scoring.load_honesty_dir)


@dataclass
class HonestyOutcome:
    """The honesty table of a run and how it was made (budget, seed, tau, question counts)."""

    table: pd.DataFrame
    info: dict[str, Any] = field(default_factory=dict)


def honesty_plan(cfg: RunConfig) -> RunHonestyPlan:
    """The run config's ``honesty:`` section; a ValueError when it has none."""
    if cfg.honesty is None:
        raise ValueError("the run config has no honesty section")
    return cfg.honesty


def gate_choice(cfg: RunConfig) -> tuple[int | Literal["all"], int]:
    """(budget, seed) of the EliCal model that gates the honesty comparison (:func:`elical_choice`)."""
    plan = honesty_plan(cfg)
    return elical_choice(cfg.train, plan.budget, plan.seed, "honesty")


def elical_choice(train: TrainPlan, budget: int | Literal["all"] | None, seed: int | None,
                  section: str) -> tuple[int | Literal["all"], int]:
    """(budget, seed) of the run's EliCal model that a ``section`` (honesty, retrieval) uses: the section's,
    else the smallest budget >= 1000 (else 'all', else the largest) and seed 0 (else the plan's first seed)."""
    if "elical" not in train.methods:
        raise ValueError(f"{section}: the EliCal gate needs 'elical' in train.methods")
    if budget is not None:
        if budget not in train.budgets:
            raise ValueError(f"{section}.budget {budget!r} is not one of train.budgets {train.budgets}")
    else:
        big = sorted(int(b) for b in train.budgets if b != "all" and int(b) >= 1000)
        numbers = [int(b) for b in train.budgets if b != "all"]
        budget = big[0] if big else "all" if "all" in train.budgets else max(numbers)
    if seed is not None and seed not in train.seeds:
        raise ValueError(f"{section}.seed {seed} is not one of train.seeds {train.seeds}")
    return budget, seed if seed is not None else 0 if 0 in train.seeds else train.seeds[0]


def split_pool(pool: Sequence[Record], budget: int | str, seed: int, fraction: float,
               selected: Collection[str] | None = None) -> tuple[list[Record], list[Record], str]:
    """(tuning records, validation records, how validation was chosen), see the module docstring. ``selected``:
    the ids EliCal was labelled on when a selection strategy chose them (its selection.json), else the draw."""
    from elical.train.budgets import budget_subset, split_records

    labelled = [i for i, r in enumerate(pool) if r.greedy_correct is not None]
    if budget != "all" and int(budget) < len(labelled):
        if selected is not None:
            seen = set(selected)
        else:
            chosen = budget_subset([pool[i] for i in labelled], int(budget), seed)
            seen = {pool[labelled[i]].id for i in chosen}
        return ([r for r in pool if r.id in seen], [r for r in pool if r.id not in seen],
                f"the {len(pool) - len(seen)} pool questions outside EliCal's {budget}-label budget")
    tune, val = split_records(pool, fraction, seed)
    return tune, val, (f"a seeded {fraction:.0%} of the pool, left out of tuning (EliCal was calibrated on all "
                       "pool labels, so tau is chosen in-sample)")


def _eval_records(plan: RunHonestyPlan, subject: Subject, evaluation: Sequence[Record]) -> list[Record]:
    records = [r for r in evaluation if not r.failed and subject.groups.get(r.dataset, "other") in plan.groups]
    if plan.max_eval_per_dataset is None:
        return records
    by_dataset: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_dataset[r.dataset].append(r)
    rng = random.Random(plan.settings.seed)
    keep: set[str] = set()
    for name in sorted(by_dataset):
        members = by_dataset[name]
        picked = rng.sample(members, plan.max_eval_per_dataset) if len(members) > plan.max_eval_per_dataset else members
        keep |= {r.id for r in picked}
    return [r for r in records if r.id in keep]


def _settings(cfg: RunConfig, plan: RunHonestyPlan, subject: Subject) -> HonestyConfig:
    """The plan's HonestyConfig, answering with the run's own prompt wording unless the plan sets one."""
    settings = plan.settings
    prompts = cfg.annotate.prompts.model_copy(update=subject.prompts)
    update: dict[str, Any] = {}
    if "prompt" not in settings.model_fields_set:
        update["prompt"] = prompts.qa
    if "system" not in settings.model_fields_set:
        update["system"] = prompts.system or None
    return settings.model_copy(update=update)


def load_honesty(folder: RunFolder) -> HonestyOutcome:
    """A finished step's table and how it was made, read back."""
    return HonestyOutcome(pd.read_csv(folder.honesty_table), json.loads(folder.honesty_info.read_text()))


def honesty_step(cfg: RunConfig, subject: Subject, folder: RunFolder, annotated: Annotated, gate: Trained,
                 log: Callable[[str], None]) -> HonestyOutcome:
    """Tune the plan's methods, fit the gate on ``gate``'s confidence, score everything on the run's records
    (run_honesty.json written last: the step is done, :func:`load_honesty` reads it back)."""
    from elical.honesty.compare import run_honesty_plan
    from elical.model.predictions import read_predictions
    from elical.train.label_selection import SELECTION_FILE
    from elical.train.predict import predict_files

    start = time.perf_counter()
    budget, seed = gate_choice(cfg)
    name = gate.key.name
    plan = honesty_plan(cfg)
    settings = _settings(cfg, plan, subject)
    selection = folder.model(gate.key) / SELECTION_FILE
    selected = json.loads(selection.read_text())["chosen"] if cfg.train.selects_labels(gate.key) else None
    tune_records, val_records, val_note = split_pool(annotated.pool, budget, seed, settings.val_fraction, selected)
    eval_records = _eval_records(plan, subject, annotated.evaluation)
    if not eval_records:
        raise ValueError(f"honesty: no evaluation questions in groups {plan.groups} (subject groups: "
                         f"{sorted(set(subject.groups.values()))})")
    out = folder.honesty
    out.mkdir(parents=True, exist_ok=True)
    val_file, val_scores = out / "validation.parquet", out / f"{name}-validation.parquet"
    if not val_scores.exists():
        write_parquet(val_records, val_file)
        predict_files(gate.weights, [str(val_file)], val_scores, method=name, device=cfg.annotate.device)
    confidences = {**gate.predictions.confidence, **read_predictions(val_scores).confidence}

    from elical.model.loading import load_model

    model, tokenizer, _ = load_model(subject.model, dtype=cfg.annotate.dtype, device=cfg.annotate.device)
    run_plan = plan.model_copy(update={"settings": settings})
    compared = run_honesty_plan(run_plan, tune_records, eval_records, confidences, model, tokenizer, out,
                                val_records=val_records, progress=True)
    tuned = min(len(tune_records), plan.max_tune_records or len(tune_records))
    fitted = compared.gate
    info = {"elical_model": name, "budget": budget, "seed": seed, "tau": float(fitted.tau) if fitted else None,
            "gate_objective": fitted.objective if fitted else None, "validation": len(val_records),
            "validation_from": val_note, "tuning_records": tuned, "evaluated": len(eval_records), "groups": plan.groups,
            "methods": list(plan.methods), "refusal": settings.refusal, "seconds": round(time.perf_counter() - start, 1)}
    with atomic_write(folder.honesty_info) as tmp:
        tmp.write_text(json.dumps(info, indent=2, default=str))
    log(f"honesty: {len(plan.methods)} method(s) + EliCal gate ({name}, tau {info['tau']}) in {info['seconds']}s")
    return HonestyOutcome(compared.table, info)


def honesty_results(outcome: HonestyOutcome) -> pd.DataFrame:
    """results.csv rows: method 'Honesty: <method>', budget = labelled questions it learnt from (the gate:
    EliCal's budget), split 'honesty/<dataset>', one row per defined metric."""
    info = outcome.info
    rows = []
    for row in outcome.table.to_dict("records"):
        gate = row["method"] == GATE
        budget = info["budget"] if gate else 0 if row["method"] == "unaligned" else info["tuning_records"]
        for metric in HONESTY_METRICS:
            value = row.get(metric)
            if value is None or pd.isna(value):
                continue
            rows.append({"method": f"Honesty: {'EliCal gate' if gate else row['method']}",
                         "budget": budget, "seed": float(info["seed"]) if gate else float("nan"),
                         "split": f"honesty/{row['dataset']}", "metric": metric, "value": float(value)})
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def display_tables(outcome: HonestyOutcome) -> list[Table]:
    """The report's tables, scores x100 (as honesty_comparison.md), the gate named with its model and tau:
    first each method's summary over all QA datasets (and over any dataset apart: PUQA, PKQA), then the
    per-dataset rows, grouped by dataset so the methods on a dataset sit together."""
    from elical.honesty.scoring import score_table

    info = outcome.info
    tau = info.get("tau")
    label = f"EliCal gate ({info['elical_model']}, tau {tau:.3f})" if tau is not None else "EliCal gate"
    shown = outcome.table.assign(method=outcome.table["method"].map(lambda m: label if m == GATE else m))
    shown = shown[[c for c in ("method", "dataset", "n", *HONESTY_METRICS) if c in shown]]
    summary = shown.dataset.eq("all") | shown.dataset.str.lower().str.startswith(APART)
    if not shown.dataset.eq("all").any():  # one QA dataset: the table is short already
        return [score_table(shown, "Alignment for Honesty vs EliCal gate")]
    rest = shown[~summary]
    order = {d: i for i, d in enumerate(dict.fromkeys(rest.dataset))}
    per_dataset = rest.sort_values("dataset", key=lambda d: d.map(order), kind="stable")
    return [score_table(shown[summary], "Alignment for Honesty vs EliCal gate: summary (dataset 'all': every QA "
                                        "dataset together)"),
            score_table(per_dataset, "Alignment for Honesty vs EliCal gate per QA dataset")]
