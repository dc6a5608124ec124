"""The generation backend an AnnotateConfig names (used by ``elical annotate`` and by the Ray engine's
workers), and the openai backend's API key."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from elical.annotate.backends.base import Backend
from elical.core.inputs import InputError

if TYPE_CHECKING:
    from elical.annotate.config import AnnotateConfig


def build_backend(config: AnnotateConfig) -> Backend:
    """The generation backend the config names (HF and vLLM load the model; openai needs base_url)."""
    if config.backend == "hf":
        from elical.annotate.backends.hf import HFBackend

        return HFBackend.from_pretrained(
            config.model, dtype=config.dtype, device=config.device, batch_size=config.batch_size, shared_prefix=config.shared_prefix,
            fast_decode=config.fast_decode is True,  # auto: generate until the annotation resolves its path
        )
    if config.backend == "openai":
        from elical.annotate.backends.openai import OpenAIBackend

        return OpenAIBackend(config.base_url or [], config.model, api_key=api_key(config), concurrency=config.concurrency,
                             connect_timeout=config.connect_timeout, read_timeout=config.read_timeout)
    from elical.annotate.backends.vllm import VLLMBackend

    return VLLMBackend.from_pretrained(config.model, dtype=config.dtype, settings=config.vllm)


def api_key(config: AnnotateConfig, environ: Mapping[str, str] = os.environ) -> str | None:
    """The openai backend's API key, from the variable ``config.api_key_env`` names (which must be set)
    or else from OPENAI_API_KEY when set; configs name the variable, never hold the key."""
    if config.api_key_env is None:
        return environ.get("OPENAI_API_KEY") or None
    if not environ.get(config.api_key_env):
        raise InputError(f"api_key_env: the environment variable {config.api_key_env} is not set")
    return environ[config.api_key_env]
