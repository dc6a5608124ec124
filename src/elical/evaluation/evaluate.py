"""Join confidences with records, then score every method on every dataset and dataset group.

The output is a long table with the columns ``method, dataset, group, metric, value, ci_low,
ci_high``. Dataset groups (in-domain, OOD, multiple-choice) are averages weighted by the number of
scored questions per dataset; their intervals come from averaging the per-dataset bootstrap
replicates with the same weights. Every method is resampled with the same bootstrap weights over a
dataset's questions (a method's missing scores drop out of its share), so the replicates of two
methods are paired: ``Evaluation.draws`` keeps them for :mod:`elical.evaluation.differences`.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from elical import metrics
from elical.confidence import applicable_estimators, score_records
from elical.evaluation.config import (  # noqa: F401  (importable from here, as before)
    DATASET_GROUPS,
    GROUP_ORDER,
    MAX_ALIGNMENT_REPEATS,
    MAX_ECE_BINS,
    MAX_RESAMPLES,
    EvalConfig,
)
from elical.model.key import ModelKey
from elical.model.predictions import Predictions
from elical.records import Record

if TYPE_CHECKING:
    import pandas as pd

AVERAGE = "average"
COLUMNS = ["method", "dataset", "group", "metric", "value", "ci_low", "ci_high"]


@dataclass
class MethodScores:
    """One method's confidences and the greedy correctness on one dataset (missing ones removed)."""

    confidence: np.ndarray
    correct: np.ndarray
    missing: int
    index: np.ndarray  # positions of the scored questions among the dataset's questions (for paired resampling)


Draws = dict[str, tuple[float, np.ndarray]]  # metric -> (point value, bootstrap replicates)


@dataclass
class Evaluation:
    """The metrics table plus what produced it, what was left out, and the paired bootstrap draws."""

    table: pd.DataFrame
    scores: dict[str, dict[str, MethodScores]]
    config: EvalConfig
    notes: list[str]
    baselines: list[str]  # the training-free methods (scored from the records, not from prediction files)
    draws: dict[tuple[str, str, str], Draws]  # (method, group, dataset or AVERAGE) -> per-metric draws
    models: dict[str, ModelKey] = field(default_factory=dict)  # method -> trained model (from its predictions)

    def to_config_dict(self) -> dict:
        return {"config": self.config.model_dump(), "notes": self.notes}


def collect_scores(
    records: Sequence[Record], predictions: Sequence[Predictions], config: EvalConfig
) -> tuple[dict[str, dict[str, MethodScores]], list[str], list[str]]:
    """Confidences of every method split by dataset, notes, and the training-free method names;
    checks inputs before scoring anything."""
    notes: list[str] = []
    failed = [r for r in records if r.failed]
    if failed:
        notes.append(f"{len(failed)} record(s) marked failed during annotation are left out")
    usable = [r for r in records if not r.failed]
    unlabeled = [r for r in usable if r.greedy_correct is None]
    if unlabeled:
        raise ValueError(
            f"{len(unlabeled)} of {len(usable)} records have no greedy correctness ('greedy_correctness'), "
            f"which evaluation scores against (first: id {unlabeled[0].id}, dataset {unlabeled[0].dataset}); "
            "annotate them with a judge first"
        )
    if not usable:
        raise ValueError("no records to evaluate")

    if config.methods is None:
        estimators, skipped = applicable_estimators(usable)
        notes.extend(f"{name} skipped: {why}" for name, why in skipped.items())
        baseline_scores = score_records(usable, estimators)
    else:
        baseline_scores = score_records(usable, config.methods)

    all_scores = dict(baseline_scores)
    ids = [r.id for r in usable]
    for pred in predictions:
        if pred.method in all_scores:
            raise ValueError(f"two score sources are both called {pred.method!r}; name one otherwise "
                             "(`elical predict --method NAME`, or the 'method' column of a CSV or JSONL file)")
        values = np.array([pred.confidence.get(i, math.nan) for i in ids])
        matched = int(np.isfinite(values).sum())
        if matched == 0:
            raise ValueError(
                f"predictions {pred.method!r} share no ids with the records; were they made from the same records?"
            )
        if matched < len(ids):
            notes.append(f"{pred.method}: {len(ids) - matched} of {len(ids)} records have no prediction")
        all_scores[pred.method] = values

    datasets = sorted({r.dataset for r in usable})
    dataset_of = np.array([r.dataset for r in usable])
    correct = np.array([r.greedy_correct for r in usable], dtype=float)
    out: dict[str, dict[str, MethodScores]] = {}
    for method, values in all_scores.items():
        out[method] = {}
        for dataset in datasets:
            in_dataset = dataset_of == dataset
            valid = in_dataset & np.isfinite(values)
            missing = int(in_dataset.sum() - valid.sum())
            if missing and method in baseline_scores:
                notes.append(f"{method} on {dataset}: {missing} record(s) gave no usable score (counted as missing)")
            index = np.flatnonzero(np.isfinite(values[in_dataset]))
            out[method][dataset] = MethodScores(values[valid], correct[valid], missing, index)
    return out, notes, list(baseline_scores)


def _seed_for(config: EvalConfig, dataset: str) -> int:
    digest = hashlib.sha1(f"{config.seed}:{dataset}".encode()).hexdigest()
    return int(digest[:8], 16)


class _Resampler:
    """Bootstrap weights and alignment splits over each dataset's questions, shared by all methods."""

    def __init__(self, config: EvalConfig, sizes: dict[str, int]):
        self.config = config
        self.sizes = sizes  # questions per dataset, scored by any method
        self._weights: dict[str, np.ndarray] = {}
        self._splits: dict[str, np.ndarray] = {}

    def weights(self, dataset: str, index: np.ndarray) -> np.ndarray:
        """Resampling counts of the questions at ``index`` (the same draws for every method)."""
        if dataset not in self._weights:
            self._weights[dataset] = metrics.bootstrap_weights(
                self.sizes[dataset], self.config.n_resamples, _seed_for(self.config, dataset))
        return self._weights[dataset][:, index]

    def splits(self, dataset: str, index: np.ndarray) -> np.ndarray:
        """Each resample's threshold-selection split, restricted to the questions at ``index``."""
        if dataset not in self._splits:
            seed = _seed_for(self.config, dataset) + 1
            self._splits[dataset] = metrics.calibration_masks(
                self.sizes[dataset], self.config.n_resamples, seed, self.config.alignment_fraction, "elical"
            )
        return self._splits[dataset][:, index]


def _can_split(n: int, config: EvalConfig) -> bool:
    """Whether n questions can be scored for alignment (the paper's rule takes any n >= 1)."""
    return n >= 1 if config.convention == "paper" else 1 <= round(config.alignment_fraction * n) < n


def _dataset_metrics(
    scores: MethodScores, dataset: str, config: EvalConfig, resampler: _Resampler
) -> dict[str, tuple[float, np.ndarray]]:
    """Point value and bootstrap replicates of each metric on one dataset."""
    conf, y = scores.confidence, scores.correct
    n = conf.size
    nan = (math.nan, np.full(config.n_resamples, math.nan))
    if n == 0:
        return {"auroc": nan, config.ece_name: nan, "brier": nan, "alignment": nan}
    weights = resampler.weights(dataset, scores.index)
    single_class = y.min() == y.max()
    unit = conf.min() >= 0 and conf.max() <= 1
    result: dict[str, tuple[float, np.ndarray]] = {}
    result["auroc"] = nan if single_class else (
        metrics.auroc(conf, y), metrics.metric_replicates("auroc", conf, y, weights)
    )
    if unit:
        ece_kwargs: dict[str, Any] = {"n_bins": config.ece_bins, "strategy": config.ece_strategy,
                                      "convention": config.convention}
        result[config.ece_name] = (
            metrics.ece(conf, y, **ece_kwargs),
            metrics.metric_replicates("ece", conf, y, weights, **ece_kwargs),
        )
        result["brier"] = (metrics.brier(conf, y), metrics.metric_replicates("brier", conf, y, weights))
    else:  # e.g. raw log-probabilities: rankable, but not probabilities
        result[config.ece_name] = result["brier"] = nan
    if _can_split(n, config):
        point = metrics.alignment(
            conf, y, config.alignment_repeats, config.seed, config.alignment_fraction, config.convention
        ).mean
        splits = None if config.convention == "paper" else resampler.splits(dataset, scores.index)
        result["alignment"] = (point, metrics.metric_replicates(
            "alignment", conf, y, weights, calibration=splits, convention=config.convention,
            calibration_fraction=config.alignment_fraction))
    else:  # too few questions to choose a threshold on some and score it on the rest
        result["alignment"] = nan
    return result


def _weighted_average(values: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Size-weighted mean over datasets (axis 0), ignoring datasets where the metric is undefined."""
    finite = np.isfinite(values)
    w = np.where(finite, sizes[:, None] if values.ndim == 2 else sizes, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.where(finite, values, 0.0) * w).sum(axis=0) / w.sum(axis=0)


def stored_groups(records: Sequence[Record]) -> dict[str, str]:
    """Dataset -> the group its records store (``extra['group']``, as `elical run`'s subjects write it);
    records of one dataset that store different groups are a ValueError."""
    found: dict[str, set[str]] = defaultdict(set)
    for record in records:
        group = record.extra.get("group")
        if isinstance(group, str) and group:
            found[record.dataset].add(group)
    mixed = {dataset: sorted(groups) for dataset, groups in found.items() if len(groups) > 1}
    if mixed:
        dataset, groups = next(iter(mixed.items()))
        raise ValueError(f"the records of dataset {dataset!r} store different groups ({', '.join(groups)}); "
                         f"choose one with --group {dataset}=NAME")
    return {dataset: groups.pop() for dataset, groups in found.items()}


def evaluate(
    records: Sequence[Record], predictions: Sequence[Predictions] = (), config: EvalConfig | None = None
) -> Evaluation:
    """Score every method on every dataset and group; returns the long metrics table. A dataset's group is
    ``config.groups``' (overrides), else the one its records store, else the paper's split."""
    import pandas as pd  # here, not at the top: EvalConfig (in every run config) stays light

    config = config or EvalConfig()
    config = config.model_copy(update={"groups": {**stored_groups(records), **config.groups}})
    scores, notes, baselines = collect_scores(records, predictions, config)
    unknown = sorted({m for pair in config.compare for m in pair} - set(scores))
    if unknown:
        raise ValueError(f"cannot compare {', '.join(unknown)}: not evaluated (methods: {', '.join(scores)})")
    sizes = {dataset: s.missing + s.confidence.size for by_dataset in scores.values() for dataset, s in by_dataset.items()}
    resampler = _Resampler(config, sizes)
    rows: list[dict] = []
    draws: dict[tuple[str, str, str], Draws] = {}
    for method, by_dataset in scores.items():
        per_group: dict[str, list[tuple[int, dict[str, tuple[float, np.ndarray]]]]] = {}
        for dataset, dataset_scores in by_dataset.items():
            group = config.group_of(dataset)
            values = _dataset_metrics(dataset_scores, dataset, config, resampler)
            draws[(method, group, dataset)] = values
            per_group.setdefault(group, []).append((dataset_scores.confidence.size, values))
            for metric, (point, replicates) in values.items():
                low, high = metrics.percentile_interval(replicates, config.level)
                rows.append(dict(method=method, dataset=dataset, group=group, metric=metric,
                                 value=point, ci_low=low, ci_high=high))
            rows.append(dict(method=method, dataset=dataset, group=group, metric="n",
                             value=float(dataset_scores.confidence.size), ci_low=math.nan, ci_high=math.nan))
            rows.append(dict(method=method, dataset=dataset, group=group, metric="missing",
                             value=float(dataset_scores.missing), ci_low=math.nan, ci_high=math.nan))
        for group, members in per_group.items():
            weights = np.array([size for size, _ in members], dtype=float)
            average: Draws = {}
            for metric in members[0][1]:
                points = np.array([values[metric][0] for _, values in members])
                replicates = _weighted_average(np.stack([values[metric][1] for _, values in members]), weights)
                average[metric] = (float(_weighted_average(points, weights)), replicates)
                low, high = metrics.percentile_interval(replicates, config.level)
                rows.append(dict(method=method, dataset=AVERAGE, group=group, metric=metric,
                                 value=average[metric][0], ci_low=low, ci_high=high))
            draws[(method, group, AVERAGE)] = average
    table = pd.DataFrame(rows, columns=COLUMNS)
    models = {p.method: p.key for p in predictions if p.key is not None}
    return Evaluation(table=table, scores=scores, config=config, notes=notes, baselines=baselines, draws=draws,
                      models=models)
