"""Resumable training state: light checkpoints holding only what trains (LoRA + head) and the optimizer.

The frozen backbone is never written (it is the base model on disk). Nothing is pickled, so loading a
checkpoint cannot run code: tensors go to safetensors files, everything else (optimizer settings,
scheduler, stage state) to JSON. A checkpoint folder holds

    params.safetensors      trainable parameters by name
    optimizer.safetensors   optimizer tensors (AdamW moments, step counts)
    optimizer.json          the optimizer's state dict with tensors replaced by references
    rng.safetensors         torch CPU (and CUDA) random generator states
    scheduler.json          the learning-rate scheduler's state dict
    state.json              where the stage stands (:class:`StageState`)

Under FSDP, where parameters and optimizer state are sharded, accelerate's ``save_state``/``load_state``
does the work (loaded with ``weights_only=True``: tensors and allow-listed types only).
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

_TENSOR, _TUPLE, _ITEMS = "__tensor__", "__tuple__", "__items__"
LEGACY_FILES = ("trainable.pt", "scheduler.pt")  # pickles written by earlier elical versions; never loaded


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed (unsafe or damaged); the message says what to delete."""


@dataclass
class StageState:
    """Where a stage stands: epoch, step inside the epoch, the running loss of the epoch, the epoch with
    the lowest validation MSE so far (after warm-up), early stopping, and the per-epoch history."""

    epoch: int = 0
    step_in_epoch: int = 0
    global_step: int = 0
    loss_sum: float = 0.0
    loss_steps: int = 0
    best_val: float = math.inf
    best_epoch: int = -1
    bad_epochs: int = 0
    stopped: bool = False
    fingerprint: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)
    best_confidences: list[float] = field(default_factory=list)  # validation confidences of best_epoch
    last_confidences: list[float] = field(default_factory=list)  # and of the last epoch run


def to_json_tree(obj: Any, tensors: dict[str, torch.Tensor], prefix: str = "t") -> Any:
    """``obj`` (dicts, lists, tuples, tensors, scalars) as JSON values; tensors move into ``tensors``."""
    if isinstance(obj, torch.Tensor):
        key = f"{prefix}.{len(tensors)}"
        tensors[key] = obj.detach().cpu().contiguous().clone()
        return {_TENSOR: key}
    if isinstance(obj, tuple):
        return {_TUPLE: [to_json_tree(v, tensors, prefix) for v in obj]}
    if isinstance(obj, list):
        return [to_json_tree(v, tensors, prefix) for v in obj]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and k not in (_TENSOR, _TUPLE, _ITEMS) for k in obj):
            return {k: to_json_tree(v, tensors, prefix) for k, v in obj.items()}
        return {_ITEMS: [[to_json_tree(k, tensors, prefix), to_json_tree(v, tensors, prefix)] for k, v in obj.items()]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot store a {type(obj).__name__} in a checkpoint (only tensors, containers and scalars)")


def from_json_tree(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """Inverse of :func:`to_json_tree`."""
    if isinstance(obj, list):
        return [from_json_tree(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {_TENSOR}:
            return tensors[obj[_TENSOR]]
        if set(obj) == {_TUPLE}:
            return tuple(from_json_tree(v, tensors) for v in obj[_TUPLE])
        if set(obj) == {_ITEMS}:
            return {from_json_tree(k, tensors): from_json_tree(v, tensors) for k, v in obj[_ITEMS]}
        return {k: from_json_tree(v, tensors) for k, v in obj.items()}
    return obj


def _save_tree(obj: Any, json_file: Path, tensor_file: Path) -> None:
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    tree = to_json_tree(obj, tensors)
    save_file(tensors, str(tensor_file))
    json_file.write_text(json.dumps(tree))


def _load_tree(json_file: Path, tensor_file: Path) -> Any:
    from safetensors.torch import load_file

    return from_json_tree(json.loads(json_file.read_text()), load_file(str(tensor_file)))


def rng_state() -> dict[str, torch.Tensor]:
    """The torch random generator states of this process (CPU, and each CUDA device)."""
    states = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        states.update({f"cuda.{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())})
    return states


def set_rng_state(states: dict[str, torch.Tensor]) -> None:
    """Restore :func:`rng_state` (CUDA states only where the same devices exist)."""
    torch.set_rng_state(states["cpu"])
    cuda = [states[f"cuda.{i}"] for i in range(len(states) - 1) if f"cuda.{i}" in states]
    if cuda and torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
        torch.cuda.set_rng_state_all(cuda)


def _is_fsdp(accelerator) -> bool:
    from accelerate.utils import DistributedType

    return accelerator.distributed_type == DistributedType.FSDP


def save_checkpoint(path: Path, accelerator, wrapped, optimizer, scheduler, state: StageState) -> None:
    """Write the checkpoint of a stage (all processes call this)."""
    from safetensors.torch import save_file

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
        params = {n: p.detach().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad}
        save_file(params, str(tmp / "params.safetensors"))
        _save_tree(optimizer.state_dict(), tmp / "optimizer.json", tmp / "optimizer.safetensors")
        save_file(rng_state(), str(tmp / "rng.safetensors"))
    accelerator.wait_for_everyone()  # every rank's shards are written before tmp is renamed
    if accelerator.is_main_process:
        (tmp / "scheduler.json").write_text(json.dumps(to_json_tree(scheduler.state_dict(), {})))
        (tmp / "state.json").write_text(json.dumps(asdict(state), indent=1))
        old = path.with_name(path.name + ".old")
        if path.exists():
            path.rename(old)
        tmp.rename(path)
        if old.exists():
            shutil.rmtree(old)
    accelerator.wait_for_everyone()


def load_checkpoint(path: Path, accelerator, wrapped, optimizer, scheduler) -> StageState | None:
    """Restore a stage from its checkpoint; None when there is none.

    Raises :class:`CheckpointError` for a checkpoint holding pickles (never unpickled: that can run
    code) or files that do not parse."""
    old = path.with_name(path.name + ".old")
    if not (path / "state.json").exists() and (old / "state.json").exists():
        path = old  # killed between the two renames: the previous checkpoint is complete
    legacy = [name for name in LEGACY_FILES if (path / name).exists()]
    if legacy:
        raise CheckpointError(
            f"{path} holds {', '.join(legacy)}: a pickle, which elical does not load because unpickling can run "
            f"code (checkpoints are safetensors + JSON). Delete {path} to restart this stage from its beginning."
        )
    if not (path / "state.json").exists():
        return None
    try:
        if _is_fsdp(accelerator):
            accelerator.load_state(str(path / "accelerate"), load_kwargs={"weights_only": True})
        else:
            _load_trainable(path, accelerator, wrapped, optimizer)
        scheduler.load_state_dict(from_json_tree(json.loads((path / "scheduler.json").read_text()), {}))
        return StageState(**json.loads((path / "state.json").read_text()))
    except CheckpointError:
        raise
    except Exception as err:  # a damaged or foreign file: say which checkpoint, never fall back to pickle
        raise CheckpointError(f"cannot resume from {path} ({type(err).__name__}: {err}); delete {path} to "
                              "restart this stage from its beginning") from err


def _load_trainable(path: Path, accelerator, wrapped, optimizer) -> None:
    """Parameters, optimizer and RNG state of a single-process or DDP checkpoint."""
    from safetensors.torch import load_file

    saved = load_file(str(path / "params.safetensors"))
    model = accelerator.unwrap_model(wrapped)
    params = dict(model.named_parameters())
    unknown = sorted(set(saved) - set(params))
    if unknown:
        raise CheckpointError(f"checkpoint {path} does not fit this model (unknown parameters {unknown[:3]})")
    with torch.no_grad():
        for name, value in saved.items():
            params[name].copy_(value.to(params[name].device, params[name].dtype))
    optimizer.load_state_dict(_load_tree(path / "optimizer.json", path / "optimizer.safetensors"))
    set_rng_state(load_file(str(path / "rng.safetensors")))
