"""A saved confidence model's folder: where it is, which base model it needs, and the plain files that
let it load without elical.

A folder holds ``elical_model.json`` (the model config, with the base model under the name a user
passes, e.g. ``smollm2`` or ``org/name``, plus its path and fingerprint when saved, for information),
``head.safetensors`` + ``head_config.json`` (the head: layer sizes, weights and biases),
``prompt.json`` (how a question becomes the prompt the head reads), and with LoRA a standard peft
adapter (``adapter_config.json`` + ``adapter_model.safetensors``, the head in ``modules_to_save``).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

MODEL_CONFIG_NAME = "elical_model.json"
HEAD_WEIGHTS_NAME = "head.safetensors"
HEAD_CONFIG_NAME = "head_config.json"
PROMPT_NAME = "prompt.json"
ADAPTER_WEIGHTS_NAME = "adapter_model.safetensors"
ADAPTER_HEAD_PREFIX = "base_model.model.score."


def find_model_folder(path: str | os.PathLike) -> Path:
    """The saved model folder at ``path``, or ``path/model`` when ``path`` is an ``elical train`` output."""
    path = Path(path)
    if not (path / MODEL_CONFIG_NAME).exists() and (path / "model" / MODEL_CONFIG_NAME).exists():
        return path / "model"
    return path


def read_saved(path: Path) -> dict[str, Any]:
    """The folder's ``elical_model.json``; a folder without one is a FileNotFoundError saying so."""
    config_file = path / MODEL_CONFIG_NAME
    if not config_file.exists():
        raise FileNotFoundError(f"{config_file} not found: {path} is not a saved elical model folder "
                                "(expected the model/ folder of an `elical train` output, or that output)")
    return json.loads(config_file.read_text())


def write_json(path: Path, payload: Mapping[str, Any]) -> None:
    """Write JSON atomically (a reader never sees half a file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    os.replace(tmp, path)


def head_sizes(hidden: int, kind: str) -> list[int]:
    """Layer widths of a head: linear H -> 1, or the paper's MLP H -> H/2 -> H/4 -> 1 (ReLU between)."""
    if kind == "linear":
        return [hidden, 1]
    if kind == "mlp":
        return [hidden, hidden // 2, hidden // 4, 1]
    raise ValueError(f"unknown head {kind!r}; expected 'linear' or 'mlp'")


def write_head_files(path: Path, kind: str, sizes: list[int], state: Mapping[str, torch.Tensor]) -> None:
    """``head.safetensors`` (the head module's state dict: ``weight``/``bias`` for linear, ``0.weight``...
    for the MLP, as ``torch.nn`` names them) and ``head_config.json`` (kind and layer sizes)."""
    from safetensors.torch import save_file

    save_file({k: v.detach().float().cpu().contiguous() for k, v in state.items()}, str(path / HEAD_WEIGHTS_NAME))
    write_json(path / HEAD_CONFIG_NAME, {"kind": kind, "sizes": sizes, "activation": "relu",
                                         "confidence": "sigmoid of the last layer's output"})


def adapter_head_state(path: Path) -> dict[str, torch.Tensor]:
    """The head's tensors inside a saved peft adapter (``modules_to_save``), named as in the head module."""
    from safetensors.torch import load_file

    adapter = load_file(str(path / ADAPTER_WEIGHTS_NAME))
    return {k.removeprefix(ADAPTER_HEAD_PREFIX): v for k, v in adapter.items() if k.startswith(ADAPTER_HEAD_PREFIX)}


def write_prompt_file(path: Path, system: str | None, template: str, max_length: int) -> None:
    """``prompt.json``: the system prompt and QA template, rendered with the base tokenizer's chat
    template (generation prompt added) when it has one, else the user message alone; longer prompts
    keep their last ``max_length`` tokens."""
    write_json(path / PROMPT_NAME, {"system": system, "template": template, "max_length": max_length})


def base_model_record(spec: str) -> dict[str, Any]:
    """How a saved model names its base model: the portable name, and for information the local path
    and a fingerprint of the files it was trained on (None when not local)."""
    from elical.loading import model_version, portable_name, resolve_model

    try:
        path: str | None = resolve_model(spec).path
    except (FileNotFoundError, ImportError):
        path = None
    return {"name": portable_name(spec), "path": path, "version": model_version(spec)}


def check_base_model(folder: Path, saved: Mapping[str, Any], spec: str, overridden: bool) -> None:
    """Fail clearly when the base model cannot be found; warn when its files differ from the recorded ones."""
    from elical.loading import model_version, resolve_model

    if not spec:
        raise ValueError(f"{folder / MODEL_CONFIG_NAME} names no base model; pass base_model= (--base-model)")
    try:
        resolve_model(spec)
    except (FileNotFoundError, ImportError) as err:
        hint = "" if overridden else f"{folder} was trained on base model {spec!r}, which is not found here; "
        raise FileNotFoundError(f"{hint}{err}. Pass base_model= (--base-model) with its folder, "
                                ".gguf file or alias") from None
    recorded = (saved.get("base_model") or {}).get("version")
    current = model_version(spec)
    if recorded and current and recorded != current:
        warnings.warn(f"base model {spec!r} (files {current}) is not the one {folder} was trained on "
                      f"(files {recorded}); confidences may differ", stacklevel=3)
