"""A ``.gguf`` model converted once into a Hugging Face folder (float32 safetensors, config, tokenizer), so
later loads skip the GGUF reader: transformers parses the file's metadata again for the config, the tokenizer
and the weights and de-quantizes every tensor on each load (SmolLM2-135M on a 2-core CPU: 34.1 s from the file,
5.3 s from the folder, in a fresh process; ``benchmarks/results/gguf_cache_cpu.txt``). The folder holds the same
weights bit for bit and the same tokenizer and chat template (``tests/model/test_gguf_cache.py``); it takes 517 MB
for SmolLM2 (float32, as transformers de-quantizes).

Where: ``$ELICAL_CACHE_DIR/gguf/``, else ``$XDG_CACHE_HOME/elical/gguf/``, else ``~/.cache/elical/gguf/``;
``ELICAL_CACHE_DIR=off`` turns the cache off. A folder is named after the file and its version
(:func:`elical.core.fingerprint.path_version`), so a changed file gets a new one. Processes that load the same
file at once (``train.workers``) convert it once, under a lock; a cache that cannot be written is skipped with a
warning, and the model is loaded from the file as before.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

CACHE_ENV = "ELICAL_CACHE_DIR"
DONE = ".converted"  # written last: a folder without it is an interrupted conversion


def cache_root() -> Path | None:
    """The cache's folder (None: turned off with ``ELICAL_CACHE_DIR=off``)."""
    given = os.environ.get(CACHE_ENV)
    if given is not None:
        return None if given.strip().lower() in ("off", "0", "none", "") else Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "elical"


def gguf_folder(folder: str, gguf_file: str) -> Path | None:
    """The converted folder of ``folder/gguf_file``, converting it first if no finished one exists; None where
    the cache is off or cannot be written (the caller loads from the file)."""
    from filelock import FileLock

    from elical.core.fingerprint import path_version

    root = cache_root()
    if root is None:
        return None
    source = Path(folder) / gguf_file
    target = root / "gguf" / f"{source.stem}-{path_version(source)}"
    if (target / DONE).is_file():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{target}.lock"):
            if not (target / DONE).is_file():  # another process may have converted it meanwhile
                _convert(folder, gguf_file, target)
    except OSError as err:
        warnings.warn(f"the GGUF cache {root} cannot be written ({err}); loading {source} from the file "
                      f"(set {CACHE_ENV} to a writable folder, or to off)", stacklevel=3)
        return None
    return target


def _convert(folder: str, gguf_file: str, target: Path) -> None:
    """De-quantize the file into a temporary sibling of ``target``, then move it into place."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    files = {"gguf_file": gguf_file, "local_files_only": True}
    kwargs: dict[str, object] = {}
    try:  # transformers 5 keeps the file's quantizer unless told to de-quantize, and cannot save it then
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(gguf_file=gguf_file, dequantize=True)
    except ImportError:
        pass
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)  # an interrupted conversion (no DONE mark)
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **files, **kwargs)
        model.save_pretrained(partial)
        AutoTokenizer.from_pretrained(folder, **files).save_pretrained(partial)
        (partial / DONE).write_text(f"{Path(folder) / gguf_file}\n", encoding="utf-8")
        os.replace(partial, target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
