"""Differences between methods with paired bootstrap intervals, from an evaluation's stored draws.

Every method of an evaluation is resampled with the same question draws per dataset (and group
averages combine them with the same size weights), so replicate r of method A and replicate r of
method B describe the same resampled questions: their difference is a paired bootstrap replicate of
A - B, and what the two methods share (question difficulty) cancels out of its interval.

A comparison may average several pairs, e.g. EliCal - Cal-Only over training seeds: the value is the
mean of the per-pair differences and replicate r the mean of the per-pair replicate differences. All
seeds are scored on the same draws, so this is the bootstrap of the seed-averaged difference over
questions; the spread between seeds is a separate fact, shown per seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from elical import metrics
from elical.evaluation.evaluate import AVERAGE, Evaluation
from elical.metrics.base import higher_is_better, metric_label

BEST_BASELINE = "best training-free"
DIFFERENCE_COLUMNS = ["method_a", "method_b", "dataset", "group", "metric", "diff", "ci_low", "ci_high",
                      "excludes_zero", "comparison"]

@dataclass(frozen=True)
class Comparison:
    """``label_a - label_b``, the mean over ``pairs`` of (method A, method B) evaluated methods.

    A method B of :data:`BEST_BASELINE` stands for the training-free method with the best value on
    each dataset, group and metric (named in the output row).
    """

    label_a: str
    label_b: str
    pairs: tuple[tuple[str, str], ...]


def best_baseline(evaluation: Evaluation, group: str, dataset: str, metric: str) -> str | None:
    """The training-free method with the best point value on (group, dataset, metric); None if none is defined."""
    values = {m: evaluation.draws[(m, group, dataset)][metric][0] for m in evaluation.baselines
              if (m, group, dataset) in evaluation.draws and metric in evaluation.draws[(m, group, dataset)]}
    values = {m: v for m, v in values.items() if math.isfinite(v)}
    if not values:
        return None
    sign = 1 if higher_is_better(metric) else -1
    return max(values, key=lambda m: sign * values[m])


def _difference(evaluation: Evaluation, pairs: Sequence[tuple[str, str]], key: tuple[str, str], metric: str
                ) -> tuple[float, np.ndarray] | None:
    points, replicates = [], []
    for a, b in pairs:
        draws_a, draws_b = evaluation.draws.get((a, *key)), evaluation.draws.get((b, *key))
        if draws_a is None or draws_b is None or metric not in draws_a or metric not in draws_b:
            return None
        points.append(draws_a[metric][0] - draws_b[metric][0])
        replicates.append(draws_a[metric][1] - draws_b[metric][1])
    return float(np.mean(points)), np.mean(replicates, axis=0)


def paired_differences(evaluation: Evaluation, comparisons: Sequence[Comparison]) -> pd.DataFrame:
    """One row per comparison, dataset or group average, and metric: difference, interval, excludes 0.

    ``method_b`` is the method subtracted (the resolved one for :data:`BEST_BASELINE`); ``comparison``
    names the comparison as asked ('EliCal - best training-free')."""
    metrics_by_split: dict[tuple[str, str], dict[str, None]] = {}
    for (_, group, dataset), draws in evaluation.draws.items():
        metrics_by_split.setdefault((group, dataset), {}).update(dict.fromkeys(draws))
    rows = []
    for comparison in comparisons:
        for (group, dataset), metric_names in metrics_by_split.items():
            for metric in metric_names:
                label_b: str | None = comparison.label_b
                pairs = comparison.pairs
                if label_b == BEST_BASELINE:
                    label_b = best_baseline(evaluation, group, dataset, metric)
                    if label_b is None:
                        continue
                    pairs = tuple((a, label_b) for a, _ in pairs)
                found = _difference(evaluation, pairs, (group, dataset), metric)
                if found is None or not math.isfinite(found[0]):
                    continue
                low, high = metrics.percentile_interval(found[1], evaluation.config.level)
                rows.append({"method_a": comparison.label_a, "method_b": label_b, "dataset": dataset, "group": group,
                             "metric": metric, "diff": found[0], "ci_low": low, "ci_high": high,
                             "excludes_zero": bool(low > 0 or high < 0),
                             "comparison": f"{comparison.label_a} - {comparison.label_b}"})
    return pd.DataFrame(rows, columns=DIFFERENCE_COLUMNS)


def default_comparisons(evaluation: Evaluation) -> list[Comparison]:
    """The config's explicit (A, B) pairs, then every scored prediction file against the best training-free method."""
    explicit = [Comparison(a, b, ((a, b),)) for a, b in evaluation.config.compare]
    predicted = [m for m in evaluation.scores if m not in evaluation.baselines]
    if not evaluation.baselines:
        return explicit
    return explicit + [Comparison(m, BEST_BASELINE, ((m, BEST_BASELINE),)) for m in predicted]


def reading(row: pd.Series, what: str = "") -> str:
    """One sentence of a difference row, e.g. 'EliCal above Cal-Only at 100 labels in-domain (AUROC):
    +0.070 [0.030, 0.110], better'."""
    side = "above" if row["diff"] > 0 else "below" if row["diff"] < 0 else "level with"
    if row["excludes_zero"]:
        verdict = "better" if (row["diff"] > 0) == higher_is_better(row["metric"]) else "worse"
    else:
        verdict = "interval includes 0"
    place = row["group"] if row["dataset"] == AVERAGE else f"{row['group']}/{row['dataset']}"
    label = metric_label(row["metric"], short=True)
    return (f"{row['method_a']} {side} {row['method_b']}{what} {place} ({label}): {row['diff']:+.3f} "
            f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}], {verdict}")
