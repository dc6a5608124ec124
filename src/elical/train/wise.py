"""EliCal's ``stage2: wise``: the weights part way between where stage 2 starts and where it ends.

Stage 2 is trained as ``full`` from stage 1 with its logit Platt-refitted to the labels (``stage2_refit``), so
the start is the ``platt`` recipe's model: stage 1's ranking, confidences at the labels' accuracy. The model
kept is ``(1 - a) * start + a * trained`` for every trainable weight (LoRA and head), ``a = stage2_wise``:
weight-space ensembling (WiSE-FT, Wortsman et al. 2022, "Robust fine-tuning of zero-shot models"), which keeps
much of what fine-tuning gains in distribution while keeping the starting model's robustness out of it. Here
the labels come from a few datasets, and a full stage 2 learns what separates right from wrong answers there,
which can undo stage 1's ranking on other data (issue 23; docs/measurements.md). ``a = 0`` is ``platt``'s
model, ``a = 1`` is stage 2 as trained.

The trained stage 2 stays in ``stage2-cal/best`` (to interpolate again at another ``a``: :func:`interpolate`);
the kept model is ``stage2-cal/wise``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from elical.core.io import write_json
from elical.model.model_folder import read_saved
from elical.model.network import ConfidenceModel
from elical.train.platt import fold_into_head

WISE_DIR = "wise"  # in the stage's folder, beside best/ (the trained stage 2)


def trainable_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Copies of the trainable weights of ``model`` by name."""
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def interpolate_weights(model: torch.nn.Module, start: Mapping[str, torch.Tensor], alpha: float) -> None:
    """Set every trainable weight w of ``model`` to ``(1 - alpha) * start + alpha * w`` (in place)."""
    params = {name: p for name, p in model.named_parameters() if p.requires_grad}
    if set(params) != set(start):
        missing = sorted(set(params) ^ set(start))[:3]
        raise ValueError(f"the two models have different trainable weights (e.g. {', '.join(missing)})")
    with torch.no_grad():
        for name, p in params.items():
            p.mul_(alpha).add_(start[name].to(device=p.device, dtype=p.dtype), alpha=1 - alpha)  # exact at 0 and 1


def start_model(stage1_dir: str | os.PathLike, refit: Mapping[str, float] | None, device: str | torch.device,
                base_model: str | None = None) -> ConfidenceModel:
    """Where a wise stage 2 started: the selected stage-1 model, its logit mapped by the refit (a, b)."""
    model = ConfidenceModel.load(Path(stage1_dir) / "best", device=device, base_model=base_model, trainable=True)
    if refit:
        fold_into_head(model.head, refit["a"], refit["b"])
    return model


def interpolate(stage1_dir: str | os.PathLike, trained_dir: str | os.PathLike, refit: Mapping[str, float] | None,
                alpha: float, device: str | torch.device = "cpu", base_model: str | None = None) -> ConfidenceModel:
    """The model ``(1 - alpha) * start + alpha * trained``: ``trained_dir`` a stage-2 model folder,
    ``stage1_dir`` the stage-1 folder it started from and ``refit`` the map folded in at its start."""
    start = trainable_weights(start_model(stage1_dir, refit, device, base_model))
    model = ConfidenceModel.load(trained_dir, device=device, base_model=base_model, trainable=True)
    interpolate_weights(model, start, alpha)
    return model


def save_atomically(model: ConfidenceModel, folder: Path, meta: dict[str, Any]) -> None:
    """Write the model folder next to ``folder`` and rename it into place, so a kill leaves none or all of it."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save(partial, meta)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)


def wise_stage(summary: dict[str, Any], stage1_dir: Path, stage_dir: Path, alpha: float, device: str | torch.device,
               base_model: str | None, validate: Any) -> dict[str, Any]:
    """After a trained stage 2 (``summary``, its best model in ``stage_dir/best``): interpolate, save the model
    in ``stage_dir/wise`` and return the summary with ``best`` pointing there and a ``wise`` entry (alpha and the
    interpolated model's validation numbers, from ``validate(model)``). Done once: a resumed stage reads it back."""
    record = stage_dir / "wise.json"
    if record.exists() and (stage_dir / WISE_DIR).exists():
        return json.loads(record.read_text())
    model = interpolate(stage1_dir, stage_dir / "best", summary.get("refit"), alpha, device, base_model)
    model.eval()
    wise = {"alpha": alpha, "trained": str(stage_dir / "best"), **validate(model)}
    saved = read_saved(stage_dir / "best")
    meta: dict[str, Any] = {key: saved[key] for key in ("train", "selection") if key in saved}
    meta["selection"] = {**meta.get("selection", {}), "wise": wise}
    save_atomically(model, stage_dir / WISE_DIR, meta)
    done = {**summary, "wise": wise, "best": str(stage_dir / WISE_DIR)}
    write_json(record, done)  # atomically: a resumed stage reads it whole or redoes the step
    return done
