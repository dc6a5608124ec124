"""Alignment: accuracy of ``conf >= t`` on held-out data, t chosen on a threshold-selection split."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from elical.metrics.base import ArrayLike, Convention, check_inputs, tie_groups
from elical.metrics.paper import paper_alignment_kernel, paper_calibration_mask


def alignment_kernel(conf: np.ndarray, y: np.ndarray, weights: np.ndarray, calibration: np.ndarray) -> np.ndarray:
    """Per row: pick t maximising accuracy of (conf >= t) on the calibration part, score the rest.

    ``calibration`` is a boolean matrix (rows x n) marking each row's threshold-selection split.
    Candidate thresholds are the distinct confidences plus +inf (refuse everything); ties in
    calibration accuracy go to the lowest threshold.
    """
    order, starts = tie_groups(conf)
    y_sorted = y[order]

    def group_sums(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.add.reduceat(w * y_sorted, starts, axis=1)
        neg = np.add.reduceat(w * (1 - y_sorted), starts, axis=1)
        return pos, neg

    def accuracy_per_threshold(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
        # Threshold at group g answers groups >= g: right on positives there, on negatives below.
        pos_at_or_above = np.cumsum(pos[:, ::-1], axis=1)[:, ::-1]
        neg_below = np.cumsum(neg, axis=1) - neg
        right = np.concatenate([pos_at_or_above + neg_below, neg.sum(axis=1, keepdims=True)], axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return right / (pos.sum(axis=1) + neg.sum(axis=1))[:, None]

    cal_mask = calibration[:, order]
    w = weights[:, order]
    cal_acc = accuracy_per_threshold(*group_sums(w * cal_mask))
    eval_acc = accuracy_per_threshold(*group_sums(w * ~cal_mask))
    best = np.argmax(cal_acc, axis=1)
    return eval_acc[np.arange(len(best)), best]


def calibration_masks(n: int, n_repeats: int, seed: int, fraction: float, convention: Convention) -> np.ndarray:
    """Threshold-selection splits: seeded random ``fraction`` of n per repeat (paper: first int(fraction * n), once)."""
    if convention == "paper":
        return paper_calibration_mask(n, fraction)[None, :]
    size = int(round(fraction * n))
    if size < 1 or size >= n:
        raise ValueError(f"cannot split {n} examples into a {fraction:.0%} threshold split and the rest")
    rng = np.random.default_rng(seed)
    ranks = rng.random((n_repeats, n)).argsort(axis=1).argsort(axis=1)
    return ranks < size


def weighted_alignment(
    conf: np.ndarray, y: np.ndarray, weights: np.ndarray, calibration: np.ndarray, convention: Convention
) -> np.ndarray:
    """Alignment under each row of ``weights`` with its own threshold split, by the convention's rule."""
    kernel = paper_alignment_kernel if convention == "paper" else alignment_kernel
    return kernel(conf, y, weights, calibration)


@dataclass
class AlignmentResult:
    """Accuracy of thresholded confidence on held-out data, over repeated random splits."""

    mean: float
    std: float
    values: np.ndarray


def alignment(
    confidence: ArrayLike,
    correct: ArrayLike,
    n_repeats: int = 10,
    seed: int = 0,
    calibration_fraction: float = 0.2,
    convention: Convention = "elical",
) -> AlignmentResult:
    """Alignment: choose a threshold on a random 20 % split, report accuracy of ``conf >= t`` on the 80 %.

    ``convention="paper"`` is the authors' ``get_alignment`` bit for bit: thresholds 0.01..0.99 chosen
    on the first ``int(0.2 * n)`` rows (see :mod:`elical.metrics.paper`), one value, std 0.
    """
    conf, y = check_inputs(confidence, correct, unit_interval=False)
    masks = calibration_masks(conf.size, n_repeats, seed, calibration_fraction, convention)
    values = weighted_alignment(conf, y, np.ones(masks.shape), masks, convention)
    return AlignmentResult(float(values.mean()), float(values.std()), values)
