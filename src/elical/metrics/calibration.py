"""AUROC, ECE (with reliability bins) and Brier score, each with a weighted kernel for the bootstrap."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from elical.metrics.base import ArrayLike, BinStrategy, Convention, check_inputs, ones, tie_groups
from elical.metrics.paper import paper_ece, paper_ece_kernel


def auroc_kernel(conf: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """AUROC for each row of weights: P(c_pos > c_neg) + 0.5 P(tie), as sklearn's roc_auc_score."""
    order, starts = tie_groups(conf)
    w = weights[:, order]
    pos = np.add.reduceat(w * y[order], starts, axis=1)
    neg = np.add.reduceat(w * (1 - y[order]), starts, axis=1)
    neg_below = np.cumsum(neg, axis=1) - neg
    total_pos, total_neg = pos.sum(axis=1), neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (pos * (neg_below + 0.5 * neg)).sum(axis=1) / (total_pos * total_neg)


def auroc(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Area under the ROC curve of confidence against correctness (NaN, with a warning, if one class)."""
    conf, y = check_inputs(confidence, correct, unit_interval=False)
    if y.min() == y.max():
        warnings.warn("AUROC is undefined when every answer is correct or every answer is wrong; returning NaN", stacklevel=2)
        return float("nan")
    return float(auroc_kernel(conf, y, ones(conf.size))[0])


def bin_assignments(confidence: ArrayLike, n_bins: int = 10, strategy: BinStrategy = "uniform") -> np.ndarray:
    """Bin index of each confidence: equal-width bins with 1.0 in the last, or equal-mass bins."""
    conf = np.asarray(confidence, dtype=float)
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    if strategy == "uniform":
        return np.clip(np.floor(conf * n_bins).astype(int), 0, n_bins - 1)
    if strategy == "quantile":
        # Edges at the quantiles; equal confidences always share a bin, so mass is only near-equal.
        inner_edges = np.unique(np.quantile(conf, np.linspace(0, 1, n_bins + 1)[1:-1]))
        return np.searchsorted(inner_edges, conf, side="right")
    raise ValueError(f"unknown binning strategy {strategy!r} (use 'uniform' or 'quantile')")


@dataclass
class ReliabilityBins:
    """Per-bin counts, mean confidence and accuracy: the data of a reliability diagram."""

    count: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    n_bins: int
    strategy: str


def reliability_bins(
    confidence: ArrayLike, correct: ArrayLike, n_bins: int = 10, strategy: BinStrategy = "uniform"
) -> ReliabilityBins:
    """Bin the predictions and return each bin's size, mean confidence and accuracy (NaN if empty)."""
    conf, y = check_inputs(confidence, correct)
    bins = bin_assignments(conf, n_bins, strategy)
    count = np.bincount(bins, minlength=n_bins).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(bins, conf, minlength=n_bins) / count
        accuracy = np.bincount(bins, y, minlength=n_bins) / count
    return ReliabilityBins(count, mean_conf, accuracy, n_bins, strategy)


def _check_ece_options(strategy: BinStrategy, convention: Convention) -> None:
    if strategy == "quantile" and convention == "paper":
        raise ValueError("the paper convention only defines equal-width ('uniform') bins")


def ece_kernel(
    conf: np.ndarray, y: np.ndarray, weights: np.ndarray, n_bins: int, strategy: BinStrategy, convention: Convention
) -> np.ndarray:
    """ECE under each row of ``weights``."""
    _check_ece_options(strategy, convention)
    if convention == "paper":
        return paper_ece_kernel(conf, y, weights, n_bins)
    bins = bin_assignments(conf, n_bins, strategy)
    onehot = np.zeros((conf.size, n_bins))
    onehot[np.arange(conf.size), bins] = 1.0
    gap = np.abs(weights @ (onehot * y[:, None]) - weights @ (onehot * conf[:, None]))
    return gap.sum(axis=1) / weights.sum(axis=1)


def ece(
    confidence: ArrayLike,
    correct: ArrayLike,
    n_bins: int = 10,
    strategy: BinStrategy = "uniform",
    convention: Convention = "elical",
) -> float:
    """Expected calibration error: sum over bins of |B|/n * |accuracy(B) - confidence(B)|.

    Confidence exactly 1.0 falls in the last bin; ``convention="paper"`` is the authors' ``compute_ece``
    bit for bit (``np.digitize`` edges: 0.3, 0.6, 0.7 in the bin below, 1.0 in no bin but counted in n).
    """
    conf, y = check_inputs(confidence, correct)
    _check_ece_options(strategy, convention)
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    if convention == "paper":
        return paper_ece(conf, y, n_bins)
    return float(ece_kernel(conf, y, ones(conf.size), n_bins, strategy, convention)[0])


def brier_kernel(conf: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Brier score under each row of ``weights``."""
    return weights @ ((conf - y) ** 2) / weights.sum(axis=1)


def brier(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Mean squared error between confidence and correctness."""
    conf, y = check_inputs(confidence, correct)
    return float(brier_kernel(conf, y, ones(conf.size))[0])
