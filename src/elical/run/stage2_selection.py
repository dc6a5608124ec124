"""EliCal's stage-2 recipe chosen by measurement on held-out datasets (``train.select_on: ood-holdout``).

The run trains EliCal once per candidate recipe (``train.stage2_candidates``), every one from the same
stage 1 (Eli-Only of its seed). The selection datasets (``train.select_datasets``) are evaluated datasets
that are neither in the calibration pool nor reported: each candidate model's AUROC is measured on each
of them, and a recipe's score is the mean over its (budget, seed, dataset) cells, so datasets, budgets and
seeds weigh alike. The highest score wins, one recipe for every budget (a tie goes to the earlier
candidate): a recipe is a method choice the report names once, and one choice on the few held-out sets
is less exposed to luck than one per budget (the per-budget scores are kept in stage2_selection.json, for
information only). The winner is the report's EliCal; the selection datasets are left out of every
reported table and average.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from elical import metrics
from elical.model.key import ModelKey
from elical.records import Record, atomic_write

if TYPE_CHECKING:
    from elical.model.predictions import Predictions
    from elical.report.document import Block
    from elical.run.config import RunConfig

SECTION = "Stage-2 recipe chosen on held-out datasets"
RULE = ("highest mean AUROC over the selection datasets, label budgets and seeds (each weighs alike); one recipe "
        "for every budget; a tie goes to the earlier candidate")
RULE_ID = "mean-auroc-over-budgets@1"  # recorded in the select step's settings: a changed rule gets a new id
REFERENCE = "eli-only"  # the row of Eli-Only (stage 1, no labels) shown beside the candidates
AUROC_COLUMNS = ["recipe", "budget", "seed", "dataset", "group", "questions", "auroc"]


def model_aurocs(records: Sequence[Record], predictions: Mapping[ModelKey, Predictions],
                 groups: Mapping[str, str]) -> pd.DataFrame:
    """AUROC of each EliCal candidate (``key.stage2`` set) and of Eli-Only on each evaluated dataset of
    ``records`` (failed ones left out): columns recipe ('eli-only' for Eli-Only), budget, seed, dataset,
    group, questions, auroc (NaN where every answer is right or every one wrong)."""
    usable = [r for r in records if not r.failed and r.greedy_correct is not None]
    by_dataset: dict[str, list[Record]] = {}
    for rec in usable:
        by_dataset.setdefault(rec.dataset, []).append(rec)
    rows = []
    for key, pred in predictions.items():
        if key.stage2 is None and key.method != "eli-only":
            continue
        for dataset, recs in sorted(by_dataset.items()):
            pairs = [(pred.confidence[r.id], bool(r.greedy_correct)) for r in recs if r.id in pred.confidence]
            conf = np.array([c for c, _ in pairs], dtype=float)
            correct = np.array([y for _, y in pairs], dtype=float)
            keep = np.isfinite(conf)
            conf, correct = conf[keep], correct[keep]
            defined = conf.size > 0 and correct.min() != correct.max()
            rows.append({"recipe": key.stage2 or REFERENCE, "budget": key.budget, "seed": key.seed,
                         "dataset": dataset, "group": groups.get(dataset, "other"), "questions": int(conf.size),
                         "auroc": metrics.auroc(conf, correct) if defined else math.nan})
    return pd.DataFrame(rows, columns=AUROC_COLUMNS)


@dataclass(frozen=True)
class Selection:
    """The outcome: the ``winner`` among ``candidates``, the ``datasets`` asked for and those ``used`` (AUROC
    defined), each candidate's ``scores``, and ``aurocs`` (:func:`model_aurocs`'s rows, every evaluated dataset)."""

    winner: str
    candidates: list[str]
    datasets: list[str]
    used: list[str]
    scores: dict[str, float]
    aurocs: pd.DataFrame

    def held_out(self) -> pd.DataFrame:
        """Rows of the candidates (and Eli-Only) on the selection datasets used."""
        return self.aurocs[self.aurocs.dataset.isin(self.used)]

    def per_dataset(self) -> pd.DataFrame:
        """Mean AUROC over budgets and seeds: one row per recipe (candidates in order, then Eli-Only), one
        column per selection dataset used."""
        wide = self.held_out().pivot_table(index="recipe", columns="dataset", values="auroc", aggfunc="mean")
        order = [r for r in [*self.candidates, REFERENCE] if r in wide.index]
        return wide.reindex(index=order, columns=self.used)

    def per_budget(self) -> pd.DataFrame:
        """Each candidate's score per label budget (for information: the choice is made over all budgets)."""
        rows = self.held_out()[self.held_out().recipe != REFERENCE]
        return rows.assign(budget=rows.budget.astype(str)).pivot_table(
            index="recipe", columns="budget", values="auroc", aggfunc="mean", sort=False).reindex(self.candidates)

    def reported(self) -> pd.DataFrame:
        """Mean AUROC (over datasets, budgets and seeds) of each recipe on the reported groups' datasets:
        shown beside the choice, never used for it."""
        rows = self.aurocs[~self.aurocs.dataset.isin(self.datasets)]
        per_dataset = rows.groupby(["recipe", "group", "dataset"])["auroc"].mean().reset_index()
        wide = per_dataset.pivot_table(index="recipe", columns="group", values="auroc", aggfunc="mean")
        return wide.reindex(index=[r for r in [*self.candidates, REFERENCE] if r in wide.index])

    def transfer(self, pool_size: int) -> pd.DataFrame:
        """Each candidate's AUROC on each reported dataset, mean over seeds: rows (recipe, labels: the budget's
        count, ``pool_size`` for 'all'), columns 'group/dataset' as the report's "Where it transfers" has them."""
        rows = self.aurocs[~self.aurocs.dataset.isin(self.datasets) & self.aurocs.recipe.isin(self.candidates)]
        if rows.empty:
            return pd.DataFrame(index=pd.MultiIndex.from_tuples([], names=["recipe", "labels"]))
        rows = rows.assign(labels=[pool_size if b == "all" else int(b) for b in rows.budget],
                           split=rows.group + "/" + rows.dataset)
        return rows.pivot_table(index=["recipe", "labels"], columns="split", values="auroc", aggfunc="mean",
                                dropna=False)

    def key(self, budget: int | Literal["all"], seed: int) -> ModelKey:
        """The winner's EliCal model at ``budget`` and ``seed``: the report's EliCal."""
        return ModelKey("elical", budget, seed, self.winner)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the winner, the rule, the datasets, the scores and every per-model AUROC."""
        budgets = self.per_budget()
        return {"winner": self.winner, "rule": RULE, "rule_id": RULE_ID, "candidates": self.candidates,
                "datasets": self.datasets, "datasets_used": self.used, "scores": self.scores,
                "scores_per_budget": {r: {b: _number(v) for b, v in budgets.loc[r].items()} for r in budgets.index},
                "aurocs": [{k: _number(v) for k, v in row.items()}
                           for row in self.aurocs.to_dict(orient="records")]}


def _number(value: Any) -> Any:
    """A JSON value: NaN as None, numpy scalars as Python ones."""
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value.item() if isinstance(value, np.generic) else value


def choose_recipe(aurocs: pd.DataFrame, candidates: Sequence[str], datasets: Sequence[str]) -> Selection:
    """The recipe of highest mean AUROC over its (budget, seed, dataset) cells on ``datasets`` (see the
    module docstring); a dataset where AUROC is undefined (one class: the same for every candidate) is left
    out; ValueError when none is left or a candidate has no model there."""
    held = aurocs[aurocs.dataset.isin(datasets) & aurocs.recipe.isin(candidates)]
    defined = held.groupby("dataset")["auroc"].apply(lambda s: bool(s.notna().all()))
    used = [d for d in datasets if bool(defined.get(d, False))]
    if not used:
        raise ValueError(f"train.select_datasets {list(datasets)}: no candidate AUROC is defined there (no models, or "
                         "every answer right or every one wrong); hold out other or larger datasets")
    scores = {}
    for recipe in candidates:
        cells = held[(held.recipe == recipe) & held.dataset.isin(used)].auroc
        if cells.empty:
            raise ValueError(f"stage-2 candidate {recipe!r} has no model scored on {used}")
        scores[recipe] = float(cells.mean())
    best = max(scores.values())
    winner = next(r for r in candidates if scores[r] >= best - 1e-12)
    return Selection(winner, list(candidates), list(datasets), used, scores, aurocs.reset_index(drop=True))


def check_selection_datasets(cfg: RunConfig, pool: Sequence[str], evaluated: Sequence[str]) -> None:
    """Refuse selection datasets that are not evaluated datasets (``evaluated``: the subject's, besides the
    training split) or that have questions in the calibration pool (``pool``), and a selection that leaves
    no dataset to report; one InputError naming the datasets."""
    from elical.core.inputs import InputError

    plan = cfg.train
    if plan.select_on == "none":
        return
    known, in_pool = sorted(set(evaluated)), set(pool)
    open_sets = [d for d in known if d not in in_pool]
    unknown = [d for d in plan.select_datasets if d not in known]
    if unknown:
        raise InputError(f"train.select_datasets: {unknown} are not evaluated datasets of this run; held-out "
                         f"datasets outside the pool: {open_sets or 'none'}")
    pooled = [d for d in plan.select_datasets if d in in_pool]
    if pooled:
        raise InputError(f"train.select_datasets: {pooled} have questions in the calibration pool, so they are not "
                         f"held out; choose among {open_sets or 'none (the pool holds every evaluated dataset)'}")
    if not set(known) - set(plan.select_datasets):
        raise InputError(f"train.select_datasets: {plan.select_datasets} are every evaluated dataset; keep at least "
                         "one to report on")


def select_recipe(cfg: RunConfig, records: Sequence[Record], predictions: Mapping[ModelKey, Predictions],
                  groups: Mapping[str, str]) -> Selection:
    """The run's choice: every candidate and Eli-Only scored on the evaluated ``records``, the winner by
    :func:`choose_recipe` on ``train.select_datasets``."""
    aurocs = model_aurocs(records, predictions, groups)
    return choose_recipe(aurocs, cfg.train.stage2_candidates, cfg.train.select_datasets)


def write_selection(path: Path, selection: Selection, cfg: RunConfig) -> None:
    """stage2_selection.json: the outcome with the run config it was made under."""
    data = {**selection.to_dict(), "config": cfg.model_dump(mode="json")}
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")


def selection_settings(cfg: RunConfig, candidates: Mapping[str, str]) -> dict[str, Any]:
    """What decides the choice (the select step's settings): select_on, the datasets, the candidates, the rule,
    and ``candidates`` (train step name -> its settings digest) as input; with select_on none only that."""
    plan = cfg.train
    if plan.select_on == "none":
        return {"train": {"select_on": plan.select_on}}
    return {"train": {"select_on": plan.select_on, "select_datasets": list(plan.select_datasets),
                      "stage2_candidates": list(plan.stage2_candidates)},
            "rule": RULE_ID, "input": dict(candidates)}


def selection_blocks(selection: Selection) -> list[Block]:
    """The report section: the rule, candidates x selection datasets (Eli-Only beside them), the winner in a
    sentence, and for information the candidates' AUROC on the reported groups."""
    from elical.report.document import Heading, Paragraph, Table

    table = selection.per_dataset()
    shown = pd.DataFrame({"recipe": [_label(r, selection.winner) for r in table.index]})
    for dataset in table.columns:
        shown[dataset] = [_cell(v) for v in table[dataset]]
    shown["score (mean)"] = [_cell(selection.scores.get(r, math.nan)) if r in selection.scores
                             else _cell(float(np.nanmean(table.loc[r].to_numpy(dtype=float))))
                             for r in table.index]
    reported = selection.reported()
    for group in [g for g in ("in-domain", "ood", "mc") if g in reported.columns]:
        shown[f"reported {group} (not used)"] = [_cell(reported[group].get(r, math.nan)) for r in table.index]
    ranked = sorted(selection.scores, key=lambda r: -selection.scores[r])
    runner = next((r for r in ranked if r != selection.winner), None)
    margin = (f", {selection.scores[selection.winner] - selection.scores[runner]:+.3f} over {runner}"
              if runner is not None else "")
    dropped = [d for d in selection.datasets if d not in selection.used]
    blocks: list[Block] = [
        Heading(SECTION),
        Paragraph(f"EliCal was trained once per stage-2 recipe ({', '.join(selection.candidates)}), every one from "
                  "the same stage 1 (Eli-Only of its seed). The recipe was chosen on "
                  f"{_count(len(selection.datasets), 'held-out dataset')} ({', '.join(selection.datasets)}), which are "
                  "neither in the calibration pool nor in any other table or average of this report. Rule: "
                  f"{RULE}. Every AUROC is in stage2_selection.json."),
        Table(shown, "AUROC on the selection datasets, mean over budgets and seeds; the last columns, mean AUROC "
                     "over the reported datasets of each group, are shown for information and were not used"),
        Paragraph(f"**{selection.winner}** was chosen (score {selection.scores[selection.winner]:.3f}{margin}), so "
                  f"EliCal in this report is EliCal with the {selection.winner} recipe, at every budget."
                  + (f" Left out of the choice (AUROC undefined: every answer right or every one wrong): "
                     f"{', '.join(dropped)}." if dropped else "")),
    ]
    return blocks


def _label(recipe: str, winner: str) -> str:
    if recipe == REFERENCE:
        return "Eli-Only (stage 1, reference)"
    return f"{recipe} (chosen)" if recipe == winner else recipe


def _cell(value: float) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.3f}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
