"""Several label selection strategies in one run (``train.label_selection`` a list; issue 26).

Cal-Only and EliCal are trained once per strategy at each budget below all, every one from the same Eli-Only of
its seed (``ModelKey.selection`` names the strategy; random's models keep their names, and 'all' labels are
the same questions for every strategy, so those models are trained once and shared). Every other report
section shows the first strategy's models; this module compares the strategies: the label curve gets one line
per method and strategy, and a table gives each one's AUROC per budget with its paired difference against
random (the same seed's random model, scored on the same bootstrap draws; :mod:`elical.evaluation.differences`).

The comparison is scored in an evaluation of its own (:func:`strategy_evaluation`), with the run's evaluation
settings: the draws depend on the settings and the dataset only, so its numbers for the first strategy's models
are those of the run's evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from elical.evaluation.differences import Comparison, paired_differences
from elical.evaluation.evaluate import AVERAGE, Evaluation
from elical.model.key import METHOD_NAMES, ModelKey
from elical.run.results import seed_summary

if TYPE_CHECKING:
    from elical.evaluation.config import EvalConfig
    from elical.model.predictions import Predictions
    from elical.records import Record
    from elical.report.document import Block
    from elical.run.config import TrainPlan

LABELLED = ("cal-only", "elical")
REFERENCE = "random"  # the strategy the others are compared with
SPLITS = ("in-domain", "ood")
TABLE_COLUMNS = ["method", "strategy", "budget", "split", "auroc", "seeds", "diff", "ci_low", "ci_high",
                 "excludes_zero"]


def strategy_evaluation(records: Sequence[Record], trained: Mapping[ModelKey, Predictions],
                        config: EvalConfig) -> Evaluation:
    """Every Cal-Only and EliCal model of every strategy scored on ``records`` with the run's evaluation
    ``config`` (no training-free method: the run's evaluation has those)."""
    from elical.evaluation.evaluate import evaluate

    predictions = [p for key, p in trained.items() if key.method in LABELLED]
    return evaluate(records, predictions, config.model_copy(update={"methods": [], "compare": []}))


def line_label(method: str, strategy: str) -> str:
    """The legend and table name of one method's models of one strategy: 'EliCal · uncertainty'."""
    return f"{METHOD_NAMES[method]} \N{MIDDLE DOT} {strategy}"


@dataclass(frozen=True)
class StrategyComparison:
    """The strategies (the run's order), ``summary`` (seed_summary's columns plus ``strategy``: mean and sd
    over seeds per method, strategy, labels, split and metric; the all-labels models repeated for every
    strategy, whose labels they are too) and ``table`` (TABLE_COLUMNS: AUROC per method, strategy, budget
    and split, with the seed-averaged paired difference against random where random's model of a seed is there)."""

    strategies: list[str]
    summary: pd.DataFrame
    table: pd.DataFrame


def _rows(evaluation: Evaluation, plan: TrainPlan, pool_size: int) -> pd.DataFrame:
    """Per-seed values of every model: method (display), strategy, budget (labels), seed, split, metric, value."""
    rows: list[dict[str, Any]] = []
    table = evaluation.table[~evaluation.table.metric.isin(["n", "missing"])]
    for name, dataset, group, metric, value in zip(table.method, table.dataset, table.group, table.metric, table.value):
        key = evaluation.models.get(name)
        if key is None or key.method not in LABELLED:
            continue
        strategies = plan.strategies() if key.budget == "all" else [plan.strategy_of(key)]
        for strategy in strategies:
            rows.append({"method": METHOD_NAMES[key.method], "strategy": strategy, "budget": key.labels(pool_size),
                         "seed": key.seed, "split": group if dataset == AVERAGE else f"{group}/{dataset}",
                         "metric": metric, "value": value})
    return pd.DataFrame(rows, columns=["method", "strategy", "budget", "seed", "split", "metric", "value"])


def compare_strategies(evaluation: Evaluation, plan: TrainPlan, pool_size: int) -> StrategyComparison:
    """The comparison of ``plan``'s strategies from their :func:`strategy_evaluation`."""
    rows = _rows(evaluation, plan, pool_size)
    summary = seed_summary(rows, by=("strategy",))
    return StrategyComparison(plan.strategies(), summary, _table(evaluation, plan, rows, pool_size))


def _table(evaluation: Evaluation, plan: TrainPlan, rows: pd.DataFrame, pool_size: int) -> pd.DataFrame:
    """AUROC per method x strategy x budget below all x split, and the paired difference against random."""
    by_key: dict[tuple[str, str, int], dict[int, str]] = {}  # (method, strategy, labels) -> {seed: model name}
    for name, key in evaluation.models.items():
        if key.method in LABELLED and key.budget not in (None, "all") and name in evaluation.scores:
            by_key.setdefault((key.method, plan.strategy_of(key), key.labels(pool_size)), {})[key.seed] = name
    auroc = rows[rows.metric == "auroc"]
    out: list[dict[str, Any]] = []
    for method in LABELLED:
        for strategy in plan.strategies():
            for budget in sorted({b for (m, _, b) in by_key if m == method}):
                models = by_key.get((method, strategy, budget), {})
                reference = by_key.get((method, REFERENCE, budget), {})
                seeds = sorted(set(models) & set(reference)) if strategy != REFERENCE else []
                differences = pd.DataFrame()
                if seeds:
                    pairs = tuple((models[s], reference[s]) for s in seeds)
                    compared = Comparison(line_label(method, strategy), line_label(method, REFERENCE), pairs)
                    differences = paired_differences(evaluation, [compared])
                for split in SPLITS:
                    values = auroc[(auroc.method == METHOD_NAMES[method]) & (auroc.strategy == strategy)
                                   & (auroc.budget == budget) & (auroc.split == split)]["value"]
                    if values.empty:
                        continue
                    found = differences[(differences.group == split) & (differences.dataset == AVERAGE)
                                        & (differences.metric == "auroc")] if not differences.empty else differences
                    diff = found.iloc[0] if not found.empty else None
                    out.append({"method": METHOD_NAMES[method], "strategy": strategy, "budget": budget,
                                "split": split, "auroc": float(values.mean()), "seeds": int(values.size),
                                "diff": math.nan if diff is None else float(diff["diff"]),
                                "ci_low": math.nan if diff is None else float(diff["ci_low"]),
                                "ci_high": math.nan if diff is None else float(diff["ci_high"]),
                                "excludes_zero": None if diff is None else bool(diff["excludes_zero"])})
    return pd.DataFrame(out, columns=TABLE_COLUMNS)


def _cell(row: pd.Series) -> str:
    """'0.712' or, with a difference against random, '0.712 (+0.010 [-0.020, 0.040])', * where it excludes 0."""
    if not np.isfinite(row["diff"]):
        return f"{row['auroc']:.3f}"
    star = "*" if row["excludes_zero"] else ""
    return (f"{row['auroc']:.3f} ({row['diff']:+.3f} [{row['ci_low']:.3f},\N{NO-BREAK SPACE}{row['ci_high']:.3f}]"
            f"{star})")


def shown_table(comparison: StrategyComparison) -> pd.DataFrame:
    """The report's table: one row per method, strategy and budget; one column per split."""
    table = comparison.table
    if table.empty:
        return pd.DataFrame()
    table = table.assign(cell=[_cell(row) for _, row in table.iterrows()])
    wide = table.pivot_table(index=["method", "strategy", "budget"], columns="split", values="cell",
                             aggfunc="first", sort=False)
    wide = wide[[s for s in SPLITS if s in wide.columns]].reset_index().fillna("–")
    wide.columns = [str(c) if c in ("method", "strategy", "budget") else f"{c} AUROC (- random)" for c in wide.columns]
    return wide.rename(columns={"budget": "labels"})


def strategy_blocks(comparison: StrategyComparison, level: float, resamples: int) -> list[Block]:
    """The label-strategy part of the 'Confidence vs labels' section: what was compared, and the table."""
    from elical.report.document import Paragraph, Table

    others = [s for s in comparison.strategies if s != REFERENCE]
    versus = (f"In brackets: the strategy's AUROC minus random's at the same budget, mean over the seeds both were "
              f"trained with, with its {round(100 * level)} % paired bootstrap interval ({resamples} resamples over "
              "the same questions; * where it excludes 0)." if REFERENCE in comparison.strategies and others
              else "Random is not among the strategies, so no difference against it is shown.")
    blocks: list[Block] = [Paragraph(
        f"Label selection strategies compared ({', '.join(comparison.strategies)}; train.label_selection): Cal-Only and "
        "EliCal trained once per strategy at each budget, all from the same Eli-Only of each seed; the curves above "
        f"have one line per method and strategy (all labels are the same questions for every strategy). Every other "
        f"section shows the first strategy, {comparison.strategies[0]}. {versus} All rows: label_strategies.csv.")]
    shown = shown_table(comparison)
    if not shown.empty:
        blocks.append(Table(shown, "AUROC per label selection strategy and budget, mean over seeds (group averages)"))
    return blocks
