"""A saved confidence model's folder: where it is, which base model it needs, and the plain files that
let it load without elical.

A folder holds ``elical_model.json`` (the model config, with the base model under the name a user
passes, e.g. ``smollm2`` or ``org/name``, plus its path and fingerprint when saved, for information),
``head.safetensors`` + ``head_config.json`` (the head: layer sizes, weights and biases),
``prompt.json`` (how a question becomes the prompt the head reads), ``README.md`` (the model card), and
with LoRA a standard peft adapter (``adapter_config.json`` + ``adapter_model.safetensors``, the head in
``modules_to_save``; its base model named as in ``elical_model.json``).
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from elical.core.io import write_json

MODEL_CONFIG_NAME = "elical_model.json"
HEAD_WEIGHTS_NAME = "head.safetensors"
HEAD_CONFIG_NAME = "head_config.json"
PROMPT_NAME = "prompt.json"
MODEL_CARD_NAME = "README.md"
ADAPTER_CONFIG_NAME = "adapter_config.json"
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


def head_sizes(hidden: int, kind: str) -> list[int]:
    """Layer widths of a head: linear H -> 1, or the paper's MLP H -> H/2 -> H/4 -> 1 (ReLU between)."""
    if kind == "linear":
        return [hidden, 1]
    if kind == "mlp":
        return [hidden, hidden // 2, hidden // 4, 1]
    raise ValueError(f"unknown head {kind!r}; expected 'linear' or 'mlp'")


def write_head_files(path: Path, kind: str, sizes: list[int], state: Mapping[str, torch.Tensor],
                     lens: int = 0) -> None:
    """``head.safetensors`` (the head module's state dict: ``weight``/``bias`` for linear, ``0.weight``...
    for the MLP, as ``torch.nn`` names them) and ``head_config.json`` (kind, layer sizes and what it reads;
    ``lens``: how many of the next-token distribution's largest log-probabilities follow the hidden state,
    then its entropy; 0: none, no lens)."""
    from safetensors.torch import save_file

    save_file({k: v.detach().float().cpu().contiguous() for k, v in state.items()}, str(path / HEAD_WEIGHTS_NAME))
    largest = "the largest log-probability" if lens == 1 else f"the {lens} largest log-probabilities (largest first)"
    reads = ("the final-layer hidden state at the prompt's last token"
             + (f", then {largest} and the entropy of the base model's next-token distribution "
                "there (LoRA off: log_softmax of its hidden state times its output layer's transpose)" if lens else ""))
    write_json(path / HEAD_CONFIG_NAME, {"kind": kind, "sizes": sizes, "activation": "relu", "inputs": reads,
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


def name_adapter_base(path: Path, name: str) -> None:
    """Record the base model in peft's ``adapter_config.json`` by its portable name, not the local path."""
    config_file = path / ADAPTER_CONFIG_NAME
    write_json(config_file, {**json.loads(config_file.read_text()), "base_model_name_or_path": name})


_MODES = {
    "elical": "EliCal: stage 1 on self-consistency (free labels from sampled answers), stage 2 on the labelled budget",
    "eli-only": "Eli-Only: self-consistency targets only, no correctness labels",
    "cal-only": "Cal-Only: the labelled budget only",
    "head-only": "head only on the frozen base model's features (no LoRA)",
}


def write_model_card(path: Path, config: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
    """``README.md``: what the model is, how it was trained (mode, budget, seed, data, the selected epoch and its
    validation numbers, where ``meta`` holds them) and how to load it, with elical and without."""
    base = config["base_model"]
    train = meta.get("train") or {}
    settings = train.get("config") or {}
    chosen = meta.get("selection") or {}
    adapter = f"LoRA (r={config['lora_r']}, alpha={config['lora_alpha']}, {config['target_modules']}) and a" \
        if config["lora"] else "a"
    lines = [
        "---", "library_name: peft" if config["lora"] else "library_name: transformers",
        *([f"base_model: {base}"] if "/" in base and not Path(base).is_absolute() else []),
        "tags: [elical, confidence-estimation, calibration]", "---", "",
        "# elical confidence model", "",
        (f"Reads a question and gives, before any answer is generated, the probability that the base model `{base}` "
         f"answers it correctly: {adapter} {config['head']} head on the prompt's last token, then a sigmoid. "
         "It scores the base model's own answers, not another model's."), "",
        "## Training", "",
    ]
    if settings:
        budget = settings.get("budget")
        lines += [f"- mode: {_MODES.get(settings.get('mode', ''), settings.get('mode'))}",
                  f"- label budget: {'all labelled questions' if budget is None else f'{budget} labelled questions'}",
                  f"- seed: {train.get('seed', settings.get('seed'))}",
                  f"- data: {', '.join(f'`{p}`' for p in train.get('inputs') or []) or 'not recorded'}"]
    else:
        lines.append("- not recorded (saved outside `elical train`)")
    if chosen:
        auroc, mse = chosen.get("val_auroc"), chosen.get("val_mse")
        measured = [*([f"MSE {mse:.4f}"] if mse is not None else []),
                    *([f"AUROC {auroc:.3f} against {chosen.get('val_auroc_against')}"]
                      if auroc is not None and math.isfinite(auroc) else [])]
        lines.append(f"- selected: {chosen.get('stage')} epoch {chosen.get('epoch')}"
                     + (f"; validation {', '.join(measured)}" if measured else "")
                     + " (the training's held-out validation questions; ECE is not measured at training: "
                     "`elical predict`, then `elical evaluate` on your evaluation set, measure it)")
    lines += [
        "", "## Use", "", ("With elical (`pip install elical`; the base model must be found under the name above: an "
                           "alias, a local folder or a Hugging Face name already in the local cache):"), "", "```python",
        "from elical import ConfidenceModel", "",
        'model = ConfidenceModel.from_pretrained("path/to/this/folder")  # base_model="..." if the base model moved',
        'model.confidence(["What is the capital of France?"])  # numpy array in [0, 1]', "```", "",
        "or `elical predict path/to/this/folder questions.jsonl -o confidences.parquet`.", "",
        "With transformers and peft only: load the base model with `AutoModelForSequenceClassification"
        ".from_pretrained(base, num_labels=1, dtype=torch.float32)`, replace its `score` with the head of "
        "`head_config.json` (layer sizes; ReLU between layers; `inputs` says what it reads) loaded from `head.safetensors`"
        + (", wrap it with `PeftModel.from_pretrained(model, folder)`" if config["lora"] else "")
        + ", render each question with `prompt.json` (system prompt and template, in the tokenizer's chat template) "
        "and take the sigmoid of the logit; elical's README (\"A trained confidence model\") has the full recipe.", "",
    ]
    (path / MODEL_CARD_NAME).write_text("\n".join(lines), encoding="utf-8")


def base_model_record(spec: str) -> dict[str, Any]:
    """How a saved model names its base model: the portable name, and for information the local path
    and a fingerprint of the files it was trained on (None when not local)."""
    from elical.model.loading import model_version, portable_name, resolve_model

    try:
        path: str | None = resolve_model(spec).path
    except (FileNotFoundError, ImportError):
        path = None
    return {"name": portable_name(spec), "path": path, "version": model_version(spec)}


def check_base_model(folder: Path, saved: Mapping[str, Any], spec: str, overridden: bool) -> None:
    """Fail clearly when the base model cannot be found; warn when its files differ from the recorded ones."""
    from elical.model.loading import model_version, resolve_model

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
