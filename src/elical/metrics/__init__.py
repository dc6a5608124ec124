"""Calibration and honesty metrics, each a pure function of ``(confidence, correct)``.

Every metric has a *weighted kernel* that scores many weightings of the same data at once
(rows of a weight matrix). Bootstrap resamples are weightings (multinomial counts), so a
confidence interval costs one vectorised pass instead of hundreds of calls.

Conventions: ``convention="elical"`` (default) is the corrected one; ``convention="paper"``
reproduces the authors' evaluation code exactly (:mod:`elical.metrics.paper`) so a number can be
set beside the paper's.
"""

from elical.metrics.alignment import AlignmentResult, alignment, calibration_masks
from elical.metrics.base import ArrayLike, BinStrategy, Convention, higher_is_better
from elical.metrics.bootstrap import (
    Estimate,
    Metric,
    bootstrap,
    bootstrap_weights,
    metric_replicates,
    paired_difference,
    percentile_interval,
)
from elical.metrics.calibration import ReliabilityBins, auroc, bin_assignments, brier, ece, reliability_bins
from elical.metrics.honesty import HonestyScores, honesty_scores
from elical.metrics.selective import RiskCoverage, aurc, optimal_aurc, risk_coverage

__all__ = [
    "AlignmentResult", "ArrayLike", "BinStrategy", "Convention", "Estimate", "HonestyScores", "Metric",
    "ReliabilityBins", "RiskCoverage", "alignment", "aurc", "auroc", "bin_assignments", "bootstrap",
    "bootstrap_weights", "brier", "calibration_masks", "ece", "higher_is_better", "honesty_scores",
    "metric_replicates", "optimal_aurc", "paired_difference", "percentile_interval", "reliability_bins",
    "risk_coverage",
]
