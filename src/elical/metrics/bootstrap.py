"""Bootstrap intervals: resamples are weightings (multinomial counts) scored by the weighted kernels."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from elical.metrics.alignment import alignment, calibration_masks, weighted_alignment
from elical.metrics.base import ArrayLike, BinStrategy, Convention, check_inputs
from elical.metrics.calibration import auroc, auroc_kernel, brier, brier_kernel, ece, ece_kernel

METRIC_NAMES = ("auroc", "ece", "brier", "alignment")


@dataclass
class Estimate:
    """A metric's value with a bootstrap confidence interval."""

    value: float
    ci_low: float
    ci_high: float
    replicates: np.ndarray


Metric = Callable[[np.ndarray, np.ndarray], float]


def metric_replicates(
    name: str,
    confidence: ArrayLike,
    correct: ArrayLike,
    weights: np.ndarray,
    *,
    n_bins: int = 10,
    strategy: BinStrategy = "uniform",
    convention: Convention = "elical",
    seed: int = 0,
    calibration_fraction: float = 0.2,
    calibration: np.ndarray | None = None,
) -> np.ndarray:
    """Value of metric ``name`` ('auroc', 'ece', 'brier', 'alignment') under each row of ``weights``.

    For alignment, each row also gets its own random threshold split (``calibration`` masks, made
    from ``seed`` unless given), so the interval covers split randomness as well as sampling; the
    paper convention keeps its one file-order split for every row.
    """
    conf, y = check_inputs(confidence, correct, unit_interval=name in ("ece", "brier"))
    if name == "auroc":
        return auroc_kernel(conf, y, weights)
    if name == "ece":
        return ece_kernel(conf, y, weights, n_bins, strategy, convention)
    if name == "brier":
        return brier_kernel(conf, y, weights)
    if name == "alignment":
        if calibration is None:
            masks = calibration_masks(conf.size, weights.shape[0], seed, calibration_fraction, convention)
            calibration = np.broadcast_to(masks, weights.shape)
        return weighted_alignment(conf, y, weights, calibration, convention)
    raise ValueError(f"unknown metric {name!r} (use {', '.join(METRIC_NAMES)})")


def bootstrap_weights(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """Multinomial resampling counts: row r says how often each example occurs in resample r."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_resamples).astype(float)


def percentile_interval(replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval, ignoring replicates where the metric was undefined."""
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def _point(name: str, conf: np.ndarray, y: np.ndarray, seed: int) -> float:
    if name == "alignment":
        return alignment(conf, y, seed=seed).mean
    return {"auroc": auroc, "ece": ece, "brier": brier}[name](conf, y)


def bootstrap(
    metric: str | Metric,
    confidence: ArrayLike,
    correct: ArrayLike,
    n_resamples: int = 200,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Point value and percentile bootstrap interval of any metric.

    A built-in metric name ('auroc', 'ece', 'brier', 'alignment') runs vectorised; any other
    callable ``metric(confidence, correct) -> float`` is called once per resample.
    """
    conf, y = check_inputs(confidence, correct, unit_interval=False)
    if isinstance(metric, str):
        if metric not in METRIC_NAMES:
            raise ValueError(f"unknown metric {metric!r} (use {', '.join(METRIC_NAMES)} or a callable)")
        point = _point(metric, conf, y, seed)
        replicates = metric_replicates(metric, conf, y, bootstrap_weights(conf.size, n_resamples, seed), seed=seed + 1)
    else:
        point = metric(conf, y)
        rng = np.random.default_rng(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            replicates = np.array(
                [metric(conf[idx], y[idx]) for idx in rng.integers(0, conf.size, size=(n_resamples, conf.size))]
            )
    low, high = percentile_interval(replicates, level)
    return Estimate(float(point), low, high, replicates)


def paired_difference(
    metric: str,
    confidence_a: ArrayLike,
    confidence_b: ArrayLike,
    correct: ArrayLike,
    n_resamples: int = 200,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Metric of A minus metric of B on the same questions, with a paired bootstrap interval.

    Both methods are scored on the same resampled questions (and, for alignment, the same threshold
    splits), so what the two share cancels out of the interval.
    """
    conf_a, y = check_inputs(confidence_a, correct, unit_interval=False)
    conf_b, _ = check_inputs(confidence_b, correct, unit_interval=False)
    if metric not in METRIC_NAMES:
        raise ValueError(f"unknown metric {metric!r} (use {', '.join(METRIC_NAMES)})")
    weights = bootstrap_weights(y.size, n_resamples, seed)
    splits = calibration_masks(y.size, n_resamples, seed + 1, 0.2, "elical") if metric == "alignment" else None
    replicates = (metric_replicates(metric, conf_a, y, weights, calibration=splits)
                  - metric_replicates(metric, conf_b, y, weights, calibration=splits))
    low, high = percentile_interval(replicates, level)
    return Estimate(_point(metric, conf_a, y, seed) - _point(metric, conf_b, y, seed), low, high, replicates)
