"""Answers for the server: the confidence model's base model through the HF backend, or an upstream
OpenAI-compatible server through the openai backend; retrieved passages go in front of the chat."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence

from elical.annotate.backends import Backend, Generation, GenerationSettings
from elical.annotate.backends.base import Message


class Answerer:
    """Greedy answers to chat messages from one backend. An in-process model answers one request at a
    time (a lock); an upstream server gets requests concurrently."""

    def __init__(self, backend: Backend, max_new_tokens: int = 256, concurrent: bool = False) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.backend = backend
        self.max_new_tokens = max_new_tokens
        self._lock: threading.Lock | None = None if concurrent else threading.Lock()

    @classmethod
    def local(cls, base_model: str, device: str = "auto", max_new_tokens: int = 256) -> Answerer:
        """The HF backend over ``base_model`` (a folder, cached name or packaged alias such as ``smollm2``)."""
        from elical.annotate.backends.hf import HFBackend

        return cls(HFBackend.from_pretrained(base_model, device=device, batch_size=1), max_new_tokens)

    @classmethod
    def upstream(cls, base_url: str, model: str, api_key_env: str | None = None, max_new_tokens: int = 256) -> Answerer:
        """An OpenAI-compatible server at ``base_url`` (its API key read from ``api_key_env``, else
        OPENAI_API_KEY when set)."""
        from elical.annotate.backends.openai import OpenAIBackend

        if api_key_env and api_key_env not in os.environ:
            raise ValueError(f"--upstream-api-key-env: the environment variable {api_key_env} is not set")
        key = os.environ.get(api_key_env or "OPENAI_API_KEY")
        return cls(OpenAIBackend(base_url, model, api_key=key, retries=1), max_new_tokens, concurrent=True)

    @property
    def name(self) -> str:
        """The answering model, as the backend describes it."""
        return str(self.backend.describe().get("model", self.backend.name))

    def answer(self, messages: Sequence[Message], max_tokens: int | None = None) -> Generation:
        """One greedy answer to the chat, with its token ``usage`` where the backend knows it (a local
        model's counts, or the upstream server's own); ``max_tokens`` is capped at the server's
        ``max_new_tokens``."""
        limit = min(max_tokens or self.max_new_tokens, self.max_new_tokens)
        settings = GenerationSettings(max_new_tokens=limit, logprobs=False)
        with self._lock or contextlib.nullcontext():
            return self.backend.generate([list(messages)], settings)[0]


def with_passages(messages: Sequence[Message], passages: Sequence[str]) -> list[Message]:
    """The chat with the retrieved passages put in front of the last user message (any chat template
    accepts that, unlike a system message in the middle)."""
    context = "\n".join(f"[{i}] {text}" for i, text in enumerate(passages, 1))
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    asked = messages[last]["content"]
    return [*messages[:last], {"role": "user", "content": f"Passages that may help:\n{context}\n\n{asked}"},
            *messages[last + 1 :]]
