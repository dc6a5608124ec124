"""EliCal's ``stage2: platt``: keep the stage-1 model whole and map its logit through a logistic fit on the
labels (Platt scaling), folded into the head's last linear layer, so the saved model is an ordinary model
folder and its confidences need nothing new to read. The map is increasing, so stage 1's ranking (and
AUROC on any set) is kept; only calibration changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from elical.core.inputs import InputError
from elical.train.loop import Stage, StageData
from elical.train.selection import validation_metrics


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


def platt_stage(model: Any, data: StageData, features: torch.Tensor, stage: Stage, stage_dir: Path,
                save_best: Any) -> dict[str, Any]:
    """Fit on the stage's training labels, report validation before (epoch 0) and after (epoch 1), save."""
    head = model.head
    device = next(head.parameters()).device
    val_targets = [data.targets[i] for i in data.val]

    def logits(indices: list[int]) -> torch.Tensor:
        with torch.no_grad():
            return head(features[indices].to(device)).squeeze(-1).float().cpu()

    def validate(epoch: int) -> dict[str, Any]:
        conf = torch.sigmoid(logits(data.val)).tolist()
        return {"epoch": epoch, "step": 0, "lr": None, "train_loss": None,
                **validation_metrics(conf, val_targets, data.val_labels())}

    head.eval()
    history = [validate(0)]
    a, b = fit_platt(logits(data.train).numpy(), np.array([data.targets[i] for i in data.train], dtype=float))
    fold_into_head(head, a, b)
    history.append(validate(1))
    save_best(model, stage_dir / "best", {"stage": stage.name, "epoch": 1, "platt": {"a": a, "b": b}})
    return {"stage": stage.name, "best_val_mse": history[1]["val_mse"], "best_epoch": 1, "selection": "platt",
            "selection_rule": "platt", "platt": {"a": a, "b": b}, "epochs_run": 1, "steps": 0, "history": history,
            "train_size": len(data.train), "val_size": len(data.val), "best": str(stage_dir / "best")}
