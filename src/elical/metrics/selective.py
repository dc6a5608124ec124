"""Selective answering (abstention): the risk-coverage curve and the area under it (AURC).

Answer the most confident questions first: at coverage ``c`` (the share answered) the risk is the
error rate among the answered. AURC (Geifman & El-Yaniv) is the mean risk over the n coverages
1/n, ..., n/n; lower is better. Questions of equal confidence form one group: a rule must answer
all of them or none, so the curve has one point per distinct confidence, and inside a group the
risk is its expectation over the group's orders (errors spread evenly), which makes AURC the
expected AURC over random tie-breaking: a constant confidence scores the error rate, and a
perfect ranking (correct answers above wrong ones) scores :func:`optimal_aurc`, the lowest any
confidence can reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from elical.metrics.base import ArrayLike, check_inputs, tie_groups


@dataclass
class RiskCoverage:
    """One point per distinct confidence, most confident first: answering every question whose
    confidence is at least ``threshold`` covers ``coverage`` of them with error rate ``risk``."""

    threshold: np.ndarray
    coverage: np.ndarray
    risk: np.ndarray
    aurc: float


def _expected_risks(counts: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """The expected risk at each of the n coverages, given group sizes and errors (most confident first)."""
    n = int(counts.sum())
    group = np.repeat(np.arange(counts.size), counts)
    answered = np.arange(1, n + 1)
    before = np.cumsum(counts) - counts  # answered before the group starts
    errors_before = np.cumsum(errors) - errors
    inside = answered - before[group]
    expected_errors = errors_before[group] + inside * errors[group] / counts[group]
    return expected_errors / answered


def risk_coverage(confidence: ArrayLike, correct: ArrayLike) -> RiskCoverage:
    """The risk-coverage curve of a confidence and its AURC (ties grouped; see the module doc)."""
    conf, y = check_inputs(confidence, correct, unit_interval=False)
    order, starts = tie_groups(-conf)  # descending confidence
    counts = np.diff(np.r_[starts, conf.size])
    errors = np.add.reduceat(1.0 - y[order], starts)
    answered = np.cumsum(counts)
    return RiskCoverage(
        threshold=conf[order][starts],
        coverage=answered / conf.size,
        risk=np.cumsum(errors) / answered,
        aurc=float(_expected_risks(counts, errors).mean()),
    )


def aurc(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Area under the risk-coverage curve (lower is better)."""
    return risk_coverage(confidence, correct).aurc


def optimal_aurc(correct: ArrayLike) -> float:
    """The AURC of a perfect ranking of these answers: the least AURC any confidence can reach."""
    y = np.asarray(correct, dtype=float).ravel()
    return aurc(y, y)
