"""Validation metrics of a stage and the rule that picks its model (see :class:`Selector`).

Why a rule beyond "lowest validation loss": stage 2 validates on a tenth of ~1k labels (about 100
questions, a dozen of them right for a small model). Its MSE then moves by about as much between
two epochs by chance as by training, and the first epochs run at a warm-up learning rate. Picking the
lowest value, with early stopping counted from the first epoch, kept an almost untrained model
whenever an early epoch happened to score best (issue 10, item 5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

SelectionRule = Literal["noise-aware", "best", "last"]


def validation_metrics(confidences: Sequence[float], targets: Sequence[float],
                       labels: Sequence[float] | None = None) -> dict[str, Any]:
    """MSE of the confidences against the stage's targets, and AUROC against binary labels: the given
    0/1 correctness where every question has it, else the target thresholded at 0.5 (NaN: one class)."""
    from elical.metrics.calibration import auroc_kernel

    conf, y = np.asarray(confidences, dtype=float), np.asarray(targets, dtype=float)
    binary = np.asarray(labels, dtype=float) if labels is not None else np.full(y.size, np.nan)
    against = "correctness"
    if not np.isfinite(binary).all():
        binary, against = (y >= 0.5).astype(float), "target>=0.5"
    auroc = float(auroc_kernel(conf, binary, np.ones((1, conf.size)))[0]) if 0 < binary.sum() < binary.size else math.nan
    return {"val_mse": float(((conf - y) ** 2).mean()), "val_auroc": auroc, "val_auroc_against": against}


def paired_gain(best: Sequence[float], last: Sequence[float], targets: Sequence[float]) -> tuple[float, float]:
    """How much lower the squared error of ``best`` is than that of ``last`` on the same questions:
    (mean of the per-question differences, its standard error)."""
    y = np.asarray(targets, dtype=float)
    diff = (np.asarray(last, dtype=float) - y) ** 2 - (np.asarray(best, dtype=float) - y) ** 2
    se = float(diff.std(ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else math.inf
    return float(diff.mean()), se


@dataclass
class Selector:
    """Which epoch's model a stage keeps, and when it stops early.

    * Epochs that end before the warm-up does (``warmup_steps`` optimizer steps) are never selected
      and do not count towards ``patience``: their learning rate is still ramping up.
    * After warm-up, the epoch with the lowest validation MSE is the candidate.
    * ``noise-aware`` (default): an epoch counts against ``patience`` only when its validation MSE is
      above the candidate's by more than ``z`` standard errors of the paired per-question difference
      (clear overfitting, not noise), and ``patience`` such epochs in a row stop the stage. At the end
      the candidate is kept only when it is that clearly better than the last epoch; otherwise the
      last, fully trained model is kept.
    * ``best``: ``patience`` epochs without a lower validation MSE stop the stage; the candidate is kept
      (the authors' rule, minus the warm-up epochs).
    * ``last``: no early stopping; the last epoch is kept.
    """

    rule: SelectionRule
    warmup_steps: int
    patience: int
    z: float = 2.0

    def eligible(self, global_step: int) -> bool:
        """Whether an epoch ending at ``global_step`` may be selected and counts towards patience."""
        return global_step >= max(1, self.warmup_steps)

    def bad_epochs(self, count: int, improved: bool, best: Sequence[float], current: Sequence[float],
                   targets: Sequence[float]) -> int:
        """The count of epochs against patience after an eligible epoch (``improved``: a new candidate)."""
        if self.rule == "last" or improved:
            return 0
        if self.rule == "best":
            return count + 1
        gain, se = paired_gain(best, current, targets)
        return count + 1 if gain > self.z * se else 0

    def stop_reason(self) -> str:
        """Why ``patience`` epochs stopped the stage, for the log."""
        if self.rule == "best":
            return "without a lower validation MSE"
        return f"in a row with a validation MSE clearly (> {self.z} se) above the lowest"

    def final(self, best_epoch: int, last_epoch: int, best: Sequence[float], last: Sequence[float],
              targets: Sequence[float]) -> tuple[int, str]:
        """The epoch kept at the end and why (best/last validation confidences on the same questions)."""
        if self.rule == "last" or best_epoch in (-1, last_epoch):
            return last_epoch, "last epoch"
        if self.rule == "best":
            return best_epoch, "lowest validation MSE after warm-up"
        gain, se = paired_gain(best, last, targets)
        if gain > self.z * se:
            return best_epoch, f"lowest validation MSE after warm-up, {gain:.4f} below the last epoch (> {self.z} x se {se:.4f})"
        return last_epoch, (f"last epoch: epoch {best_epoch}'s validation MSE is only {gain:.4f} lower "
                            f"(within {self.z} x se {se:.4f})")
