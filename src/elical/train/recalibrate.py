"""EliCal's ``stage2: platt``: keep the stage-1 model whole and map its logit through a logistic fit on the
labels (Platt scaling), folded into the head's last linear layer, so the saved model is an ordinary model
folder and its confidences need nothing new to read. The map is increasing, so stage 1's ranking (and
AUROC on any set) is kept; only calibration changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from elical.train.loop import Stage, StageData
from elical.train.platt import fit_platt, fold_into_head
from elical.train.selection import validation_metrics


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
