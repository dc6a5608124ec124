"""Resumable training state: light checkpoints holding only what trains (LoRA + head) and the optimizer.

The frozen backbone is never written (it is the base model on disk). Under FSDP, where parameters and
optimizer state are sharded, accelerate's own ``save_state``/``load_state`` does the work.
Writes are atomic (temporary folder, then rename), so a run killed mid-save keeps its last checkpoint.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch


@dataclass
class StageState:
    """Where a stage stands: epoch, step inside the epoch, best validation loss so far."""

    epoch: int = 0
    step_in_epoch: int = 0
    global_step: int = 0
    best_val: float = math.inf
    best_epoch: int = -1
    bad_epochs: int = 0
    fingerprint: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)


def trainable_names(model: torch.nn.Module) -> list[str]:
    """Names of parameters that train (LoRA and head)."""
    return [name for name, param in model.named_parameters() if param.requires_grad]


def _is_fsdp(accelerator) -> bool:
    from accelerate.utils import DistributedType

    return accelerator.distributed_type == DistributedType.FSDP


def save_checkpoint(path: Path, accelerator, wrapped, optimizer, scheduler, state: StageState) -> None:
    """Write the checkpoint of a stage (all processes call this)."""
    tmp = path.with_name(path.name + ".tmp")
    if accelerator.is_main_process:
        if tmp.exists():
            shutil.rmtree(tmp)
        # Made before the barrier: under FSDP every rank writes its shards into tmp/accelerate.
        (tmp / "accelerate" if _is_fsdp(accelerator) else tmp).mkdir(parents=True)
    accelerator.wait_for_everyone()
    if _is_fsdp(accelerator):
        accelerator.save_state(str(tmp / "accelerate"))
    elif accelerator.is_main_process:
        model = accelerator.unwrap_model(wrapped)
        params = {n: p.detach().cpu() for n, p in model.named_parameters() if p.requires_grad}
        torch.save({"params": params, "optimizer": optimizer.state_dict()}, tmp / "trainable.pt")
    accelerator.wait_for_everyone()  # every rank's shards are written before tmp is renamed
    if accelerator.is_main_process:
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        (tmp / "state.json").write_text(json.dumps(asdict(state), indent=1))
        old = path.with_name(path.name + ".old")
        if path.exists():
            path.rename(old)
        tmp.rename(path)
        if old.exists():
            shutil.rmtree(old)
    accelerator.wait_for_everyone()


def load_checkpoint(path: Path, accelerator, wrapped, optimizer, scheduler) -> StageState | None:
    """Restore a stage from its checkpoint; None when there is none."""
    old = path.with_name(path.name + ".old")
    if not (path / "state.json").exists() and (old / "state.json").exists():
        path = old  # killed between the two renames: the previous checkpoint is complete
    if not (path / "state.json").exists():
        return None
    if _is_fsdp(accelerator):
        accelerator.load_state(str(path / "accelerate"))
    else:
        saved = torch.load(path / "trainable.pt", map_location="cpu", weights_only=False)
        model = accelerator.unwrap_model(wrapped)
        params = dict(model.named_parameters())
        missing = sorted(set(saved["params"]) - set(params))
        if missing:
            raise ValueError(f"checkpoint {path} does not fit this model (unknown parameters {missing[:3]})")
        with torch.no_grad():
            for name, value in saved["params"].items():
                params[name].copy_(value.to(params[name].device, params[name].dtype))
        optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    return StageState(**json.loads((path / "state.json").read_text()))
