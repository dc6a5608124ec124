"""The run's method differences: EliCal - Cal-Only and EliCal - best training-free, per budget and seed.

Models are per (method, budget, seed). Each seed's difference pairs the two models of that seed on the
same bootstrap draws; the ``seed = "mean"`` row averages the per-seed differences and, replicate by
replicate, the per-seed replicate differences (see :mod:`elical.evaluation.differences`): its interval is over
questions for the seed-averaged models, and ``better_in_seeds`` (counted from the per-seed results,
results.csv) says how consistently the seeds agree.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from elical.evaluation.differences import BEST_BASELINE, Comparison, paired_differences, reading
from elical.evaluation.evaluate import AVERAGE, Evaluation
from elical.metrics import higher_is_better
from elical.model.key import METHOD_NAMES

RUN_DIFFERENCE_COLUMNS = ["method_a", "method_b", "budget", "seed", "dataset", "group", "metric", "diff", "ci_low",
                          "ci_high", "excludes_zero", "better_in_seeds", "comparison"]
SEED_MEAN = "mean"


def _trained_models(evaluation: Evaluation, pool_size: int) -> dict[tuple[str, int], dict[int, str]]:
    """(method, labels) -> {seed: evaluated method name} of every trained model (``Evaluation.models``)."""
    out: dict[tuple[str, int], dict[int, str]] = {}
    for name, key in evaluation.models.items():
        if name in evaluation.scores:
            out.setdefault((key.method, key.labels(pool_size)), {})[key.seed] = name
    return out


def _comparisons(evaluation: Evaluation, pool_size: int) -> list[tuple[Comparison, int, str]]:
    """(comparison, budget, seed or 'mean') for EliCal vs Cal-Only and vs the best training-free method."""
    models = _trained_models(evaluation, pool_size)
    out = []
    for (method, budget), elical in sorted(models.items(), key=lambda kv: kv[0][1]):
        if method != "elical":
            continue
        against = [("cal-only", models.get(("cal-only", budget), {}))]
        if evaluation.baselines:
            against.append((BEST_BASELINE, dict.fromkeys(elical, BEST_BASELINE)))
        for other, other_models in against:
            seeds = sorted(set(elical) & set(other_models))
            if not seeds:
                continue
            label_b = METHOD_NAMES.get(other, other)
            pairs = [(elical[s], other_models[s]) for s in seeds]
            out += [(Comparison("EliCal", label_b, (pair,)), budget, str(s)) for s, pair in zip(seeds, pairs)]
            out.append((Comparison("EliCal", label_b, tuple(pairs)), budget, SEED_MEAN))
    return out


def seeds_better(results: pd.DataFrame, row: pd.Series) -> tuple[int, int]:
    """(seeds where A is better than B, seeds compared) for a difference row, from the per-seed results."""
    split = row["group"] if row["dataset"] == AVERAGE else f"{row['group']}/{row['dataset']}"
    at = results[(results.split == split) & (results.metric == row["metric"])]
    a = at[(at.method == row["method_a"]) & (at.budget == row["budget"])].set_index("seed")["value"]
    b_rows = at[at.method == row["method_b"]]
    if b_rows.seed.isna().all():  # a training-free method: one value for every seed
        b = pd.Series(b_rows.value.iloc[0] if len(b_rows) else np.nan, index=a.index)
    else:
        b = b_rows[b_rows.budget == row["budget"]].set_index("seed")["value"]
    both = a.index.intersection(b.index)
    gap = a[both] - b[both]
    better = (gap > 0) if higher_is_better(row["metric"]) else (gap < 0)
    return int(better.sum()), int(gap.notna().sum())


def run_differences(evaluation: Evaluation, results: pd.DataFrame, pool_size: int) -> pd.DataFrame:
    """Every comparison of the run, per seed and seed-averaged, with 'k/n' seeds better on the mean rows."""
    frames = []
    for comparison, budget, seed in _comparisons(evaluation, pool_size):
        frame = paired_differences(evaluation, [comparison])
        frame.insert(2, "budget", budget)
        frame.insert(3, "seed", seed)
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=RUN_DIFFERENCE_COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    out["better_in_seeds"] = ["{}/{}".format(*seeds_better(results, row)) if row["seed"] == SEED_MEAN else ""
                              for _, row in out.iterrows()]
    return out[RUN_DIFFERENCE_COLUMNS]


def budget_label(budget: int, pool_size: int) -> str:
    """'100 labels' or 'all (1200) labels'."""
    return f"all ({budget}) labels" if budget == pool_size else f"{budget} labels"


def readings(differences: pd.DataFrame, pool_size: int, metric: str = "auroc") -> list[str]:
    """Sentences for the seed-averaged group averages of one metric, with how many seeds agree."""
    rows = differences[(differences.seed == SEED_MEAN) & (differences.dataset == AVERAGE)
                       & (differences.metric == metric)]
    out = []
    for _, row in rows.iterrows():
        k, n = row["better_in_seeds"].split("/")
        out.append(reading(row, f" at {budget_label(int(row['budget']), pool_size)}")
                   + f"; better in {k} of {n} seeds")
    return out


def summary_table(differences: pd.DataFrame, metrics: list[str], pool_size: int) -> pd.DataFrame:
    """Seed-averaged group-average differences as 'diff [low, high]' (* where the interval excludes 0; the
    training-free method subtracted is named where the comparison is with the best one)."""
    rows = differences[(differences.seed == SEED_MEAN) & (differences.dataset == AVERAGE)
                       & differences.metric.isin(metrics)].copy()
    if rows.empty:
        return pd.DataFrame()
    rows["row"] = [f"{c}, {budget_label(int(b), pool_size)}" for c, b in zip(rows.comparison, rows.budget)]
    rows["cell"] = [f"{d:+.3f} [{lo:.3f},\N{NO-BREAK SPACE}{hi:.3f}]" + ("*" if ex else "")  # wraps before '['
                    + ("" if c.endswith(f" - {b}") else f" vs {b}")
                    for d, lo, hi, ex, c, b in zip(rows["diff"], rows.ci_low, rows.ci_high, rows.excludes_zero,
                                                   rows.comparison, rows.method_b)]
    rows["column"] = rows.group + ": " + rows.metric
    wide = rows.pivot_table(index="row", columns="column", values="cell", aggfunc="first", sort=False)
    return wide.reset_index().rename(columns={"row": "comparison"}).fillna("–")
