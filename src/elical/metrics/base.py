"""Types and input checks shared by the metrics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from elical.core.choices import BinStrategy, Convention  # noqa: F401  (the metrics' own names for them)

ArrayLike = Sequence[float] | np.ndarray
LOWER_IS_BETTER_PREFIXES = ("ece", "brier")  # ECE (any bins: 'ece@10-uniform') and Brier are errors


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of ``metric`` is better (AUROC, alignment) or worse (ECE, Brier)."""
    return not metric.startswith(LOWER_IS_BETTER_PREFIXES)


def metric_label(metric: str, short: bool = False) -> str:
    """Human name of a metric: 'ece@10-uniform' -> 'ECE (10 uniform bins)', or 'ECE' when ``short``."""
    if metric.startswith("ece@"):
        bins, _, rest = metric[4:].partition("-")
        return "ECE" if short else f"ECE ({bins} {rest.replace('-', ', ')} bins)"
    return {"auroc": "AUROC", "alignment": "Alignment", "brier": "Brier"}.get(metric, metric)


def check_inputs(
    confidence: ArrayLike, correct: ArrayLike, *, unit_interval: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Both inputs as float arrays, after checking shape, emptiness, NaNs, 0/1 labels and (optionally) [0, 1]."""
    conf = np.asarray(confidence, dtype=float).ravel()
    y = np.asarray(correct, dtype=float).ravel()
    if conf.shape != y.shape:
        raise ValueError(f"confidence has {conf.size} values but correct has {y.size}")
    if conf.size == 0:
        raise ValueError("empty input: no (confidence, correct) pairs to score")
    if np.isnan(conf).any():
        raise ValueError(f"confidence holds {int(np.isnan(conf).sum())} NaN value(s); drop missing scores first")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("correct must hold only 0/1 (or booleans)")
    if unit_interval and ((conf < 0).any() or (conf > 1).any()):
        raise ValueError(f"confidence must lie in [0, 1]; got range [{conf.min():.4g}, {conf.max():.4g}]")
    return conf, y


def ones(n: int) -> np.ndarray:
    """The single weighting that counts every example once."""
    return np.ones((1, n))


def tie_groups(conf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ascending sort order and the start index of each run of equal confidences in it."""
    order = np.argsort(conf, kind="stable")
    sorted_conf = conf[order]
    starts = np.flatnonzero(np.r_[True, sorted_conf[1:] != sorted_conf[:-1]])
    return order, starts
