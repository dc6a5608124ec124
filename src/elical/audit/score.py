"""A judge's quality on a labelled sheet, estimated for the whole run: population-weighted error,
precision (share of its positive decisions that are right) and recall, with stratified bootstrap
intervals, overall and per dataset and category.

Weights come from the sheet (:mod:`elical.audit.sample`): an item stands for ``weight`` items of its
stratum. The bootstrap resamples items within each stratum, as the draw did, so intervals keep the
draw's design. The rows of the table are plain dicts; rendering is :func:`render_quality`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

ALL = "all"


@dataclass(frozen=True)
class Labelled:
    """One labelled item: a judge decision against the hand label, with its weight and groups."""

    decision: bool
    label: bool
    weight: float
    stratum: str
    dataset: str
    category: str


def rates(items: Sequence[Labelled]) -> dict[str, float]:
    """Weighted error, precision, recall and positive rates of the decisions against the labels."""
    w = np.array([i.weight for i in items], dtype=float)
    d = np.array([i.decision for i in items], dtype=bool)
    y = np.array([i.label for i in items], dtype=bool)
    total = w.sum()
    decided, labelled = w[d].sum(), w[y].sum()
    return {
        "error": float(w[d != y].sum() / total) if total else float("nan"),
        "precision": float(w[d & y].sum() / decided) if decided else float("nan"),
        "recall": float(w[d & y].sum() / labelled) if labelled else float("nan"),
        "judged_positive": float(decided / total) if total else float("nan"),
        "labelled_positive": float(labelled / total) if total else float("nan"),
    }


def bootstrap(items: Sequence[Labelled], n_resamples: int = 1000, seed: int = 0,
              level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Percentile intervals of :func:`rates`, resampling items within each stratum."""
    strata: dict[str, list[Labelled]] = defaultdict(list)
    for item in items:
        strata[item.stratum].append(item)
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = defaultdict(list)
    groups = list(strata.values())
    for _ in range(n_resamples):
        sample = [g[j] for g in groups for j in rng.integers(0, len(g), len(g))]
        for name, value in rates(sample).items():
            draws[name].append(value)
    tail = (1 - level) / 2 * 100
    return {name: (float(np.nanpercentile(v, tail)), float(np.nanpercentile(v, 100 - tail)))
            for name, v in draws.items() if not np.all(np.isnan(v))}


def quality_table(items: Sequence[Labelled], by: Sequence[str] = ("dataset", "category"), n_resamples: int = 1000,
                  seed: int = 0) -> list[dict[str, object]]:
    """One row for all items, then one per value of each grouping: n, weighted rates and intervals."""
    groups: list[tuple[str, str, list[Labelled]]] = [(ALL, ALL, list(items))]
    for field in by:
        values: dict[str, list[Labelled]] = defaultdict(list)
        for item in items:
            values[getattr(item, field)].append(item)
        groups += [(field, value, values[value]) for value in sorted(values)]
    rows = []
    for field, value, members in groups:
        row: dict[str, object] = {"group": field, "value": value, "n": len(members), **rates(members)}
        for name, (low, high) in bootstrap(members, n_resamples, seed).items():
            row[f"{name}_low"], row[f"{name}_high"] = low, high
        rows.append(row)
    return rows


def agreement(first: Sequence[int], second: Sequence[int]) -> dict[str, float]:
    """How often two labellers of the same items agree: the share of items with equal labels and Cohen's kappa
    (agreement beyond what the two labellers' own rates of 1s give by chance; nan where both give one label
    throughout), with the count of each kind of disagreement. Unweighted: it measures the labellers, not the run."""
    from sklearn.metrics import cohen_kappa_score

    if len(first) != len(second) or not first:
        raise ValueError(f"agreement needs the same items labelled twice, got {len(first)} and {len(second)} labels")
    a, b = np.asarray(first, dtype=int), np.asarray(second, dtype=int)
    one_label = len(set(a.tolist()) | set(b.tolist())) == 1
    return {"n": int(a.size), "agree": float((a == b).mean()),
            "kappa": float("nan") if one_label else float(cohen_kappa_score(a, b)),
            "first_1_second_0": int(((a == 1) & (b == 0)).sum()), "first_0_second_1": int(((a == 0) & (b == 1)).sum())}


def weighted_auroc(confidence: Sequence[float], correct: Sequence[bool], weights: Sequence[float]) -> float:
    """AUROC of a confidence against correctness, each item standing for ``weight`` items; nan where
    one class is missing."""
    from sklearn.metrics import roc_auc_score

    y = np.asarray(correct, dtype=int)
    if y.min(initial=1) == y.max(initial=0):
        return float("nan")
    return float(roc_auc_score(y, np.asarray(confidence, dtype=float), sample_weight=np.asarray(weights, dtype=float)))


def quality_cell(row: Mapping[str, object], name: str) -> str:
    """One rate of a :func:`quality_table` row as a percentage with its 95 % interval; "-" where it is undefined."""
    value = row.get(name)
    if not isinstance(value, float) or np.isnan(value):
        return "-"
    low, high = row.get(f"{name}_low"), row.get(f"{name}_high")
    if isinstance(low, float) and isinstance(high, float):
        return f"{100 * value:.1f} [{100 * low:.1f}, {100 * high:.1f}]"
    return f"{100 * value:.1f}"


def render_quality(rows: Sequence[Mapping[str, object]], title: str) -> str:
    """A markdown table of :func:`quality_table` rows (percentages with 95 % intervals)."""
    lines = [f"**{title}**", "", "| group | n | error | precision | recall | judged positive | labelled positive |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        name = ALL if row["group"] == ALL else f"{row['group']}: {row['value']}"
        cells = [quality_cell(row, k) for k in ("error", "precision", "recall", "judged_positive", "labelled_positive")]
        lines.append(f"| {name} | {row['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
