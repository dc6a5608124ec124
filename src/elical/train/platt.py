"""Platt scaling of a confidence head: a logistic fit of the labels on its logit (``a * logit + b``, a >= 0, so
the ranking is kept), folded into the head's last linear layer. ``stage2: platt`` is this map alone
(elical.train.recalibrate); ``stage2_refit`` starts a trained stage 2 from it (elical.train.loop)."""

from __future__ import annotations

import numpy as np
import torch

from elical.core.inputs import InputError


def fit_platt(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(a, b) of p = sigmoid(a * logit + b) fitted by maximum likelihood (soft labels allowed, as the
    calibration targets are shares of correct samples); a is kept >= 0 (the map never reverses the ranking)."""
    from sklearn.linear_model import LogisticRegression

    x = np.concatenate([logits, logits]).reshape(-1, 1)
    y = np.concatenate([np.ones(len(labels)), np.zeros(len(labels))])
    weight = np.concatenate([labels, 1.0 - labels])  # a soft label as two weighted hard ones
    if weight[: len(labels)].sum() <= 0 or weight[len(labels) :].sum() <= 0:
        raise InputError("stage2 platt needs labels of both kinds (some right, some wrong answers) in the budget")
    fit = LogisticRegression(C=1e6, max_iter=1000).fit(x, y, sample_weight=weight)
    return max(float(fit.coef_[0, 0]), 0.0), float(fit.intercept_[0])


def fold_into_head(head: torch.nn.Module, a: float, b: float) -> None:
    """Make the head output a * logit + b: scale its last linear layer and shift its bias."""
    last = [m for m in head.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.mul_(a)
        if last.bias is None:
            raise ValueError("the head's last layer has no bias to shift")
        last.bias.mul_(a).add_(b)
