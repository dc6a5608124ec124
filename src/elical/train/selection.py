"""Validation metrics of a stage and the rule that picks its model (see :class:`Selector`).

Why a rule beyond "lowest validation loss" (issue 10, item 5): stage 2 validates on a tenth of ~1k
labels (about 100 questions, a dozen of them right for a small model), and its MSE against soft
targets tracks the ranking poorly. Stage 2 starts from confidences fitted to self-consistency, far
above the accuracy; the first epochs pull them down, often through a phase where they are nearly
constant (AUROC near 0.5) before the ranking is relearned. The validation MSE is then lowest in an
early epoch (the first runs at the warm-up learning rate, ~7 optimizer steps), and "lowest MSE,
stop after ``patience`` epochs without a lower one, counted from epoch 1" kept that barely trained
model and stopped before the recovery: an EliCal seed that looks like Eli-Only.

Measured on the embedded world (CPU; world LM, MLP head, 2724-question pool, EliCal with 1000 labels:
900 train / 100 validation, batch 128, 20 stage-2 epochs, warm-up 16 steps, patience 3), in-domain
AUROC for seeds 0 / 1 / 2 (Eli-Only 0.665 / 0.647 / 0.578):

======================  ======================  ======================  =====================
stage-2 lr              old rule                ``best`` after warm-up  ``noise-aware``
======================  ======================  ======================  =====================
1e-3                    0.739 / 0.726 / 0.627   0.739 / 0.726 / 0.627   0.737 / 0.724 / 0.702
3e-4                    0.735 / 0.724 / 0.654   0.735 / 0.724 / 0.654   0.735 / 0.724 / 0.659
3e-3 (= stage-1 lr)     0.639 / 0.742 / 0.633   0.716 / 0.742 / 0.551   0.741 / 0.707 / 0.500
======================  ======================  ======================  =====================

At 1e-3 the old rule kept epoch 2 of seed 2 (stopped at epoch 5, during the near-constant phase);
``noise-aware`` trains on and keeps epoch 20. At 3e-3 stage 2 itself breaks down for seed 2 (its
confidences stay nearly constant; no epoch is good): lower ``lr_stage2`` there. Refitting the stage-1
head to the labels (an affine map of its logit) before stage 2 was tried and dropped: no consistent
gain (3e-4: 0.721 / 0.703 / 0.676).

Later (issue 23, lens on, 135 training / 15 validation labels) one seed's stage 2 fell to a near-constant
confidence again at 1e-3 (in-domain AUROC 0.620 from Eli-Only's 0.779). That was not this rule's doing: the
epoch kept (the last) still ranked its 15 validation questions at AUROC 0.705, so no rule on them could have
refused it. The cause was the start: the MLP head, fitted to self-consistency, outputs sigmoid(its last bias)
~ 0.49 wherever its last ReLU layer is silent, and stage 2 lowered confidences by silencing units (55 % of
the evaluation questions ended on that one value). ``stage2_refit`` (TrainSettings) starts stage 2 from stage
1's logit refitted to the labels instead (benchmarks/results/world_stage2_collapse_cpu.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

SelectionRule = Literal["noise-aware", "best", "last"]


def auroc_labels(targets: Sequence[float], labels: Sequence[float] | None = None) -> tuple[np.ndarray, str]:
    """The binary labels the validation AUROC is measured against, and what they are: the given 0/1
    correctness where every question has it, else the target thresholded at 0.5."""
    y = np.asarray(targets, dtype=float)
    binary = np.asarray(labels, dtype=float) if labels is not None else np.full(y.size, np.nan)
    if np.isfinite(binary).all():
        return binary, "correctness"
    return (y >= 0.5).astype(float), "target>=0.5"


def validation_metrics(confidences: Sequence[float], targets: Sequence[float],
                       labels: Sequence[float] | None = None) -> dict[str, Any]:
    """MSE of the confidences against the stage's targets, and AUROC against :func:`auroc_labels` (NaN
    where they hold one class)."""
    from elical.metrics.calibration import auroc_kernel

    conf, y = np.asarray(confidences, dtype=float), np.asarray(targets, dtype=float)
    binary, against = auroc_labels(targets, labels)
    auroc = float(auroc_kernel(conf, binary, np.ones((1, conf.size)))[0]) if 0 < binary.sum() < binary.size else math.nan
    return {"val_mse": float(((conf - y) ** 2).mean()), "val_auroc": auroc, "val_auroc_against": against}


def one_class_note(targets: Sequence[float], labels: Sequence[float] | None = None) -> str | None:
    """Why the validation AUROC is undefined (every validation label alike), or None when it is defined."""
    binary, against = auroc_labels(targets, labels)
    if 0 < binary.sum() < binary.size:
        return None
    high, one = bool(binary.size and binary[0]), binary.size == 1
    alike = (f"{'is' if one else 'are all'} answered {'correctly' if high else 'wrongly'}" if against == "correctness"
             else f"{'has' if one else 'all have'} a target {'>=' if high else '<'} 0.5")
    which = "the one validation question" if one else f"the {binary.size} validation questions"
    return (f"{which} {alike}, so there is no validation AUROC (it needs both "
            "classes) and the epoch kept is chosen on validation MSE; more validation questions (--budget, "
            "--set val_fraction=...) can hold both")


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
