"""Any OpenAI-compatible server (vLLM serve, SGLang, llama.cpp server, ...) over HTTP with httpx.

Chat prompts go to ``/chat/completions``, plain strings to ``/completions``; each request asks for
``n`` answers, so the server shares the prompt's prefill. Given several servers, requests are spread
across them (least loaded first) with at most ``concurrency`` in flight on each (elical.annotate.
backends.server_pool). A request is retried on connection errors, 429 and 5xx, on another server when
one is up, else with backoff; a server failing repeatedly is left alone for a while. Token log-probs
are read when the server returns them (``logprobs`` is requested).

Credentials never reach a file or a log line: an API key goes in a bearer header (the caller reads it
from the environment), a ``user:password@`` in the URL is sent as basic auth, and everything this
backend describes or raises passes through :func:`elical.core.redact.redact`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from elical.annotate.backends.base import (
    GREEDY,
    Backend,
    Generation,
    GenerationSettings,
    Prompt,
    UnusableAnswer,
    token_usage,
)
from elical.annotate.backends.server_pool import Server, ServerPool
from elical.core.redact import redact
from elical.records import is_logprob


class ServerError(RuntimeError):
    """The server refused or failed a request after the retries; says the status and body (redacted)."""


class OpenAIBackend(Backend):
    """Generate through an OpenAI-compatible HTTP API."""

    name = "openai"

    def __init__(
        self,
        base_url: str | Sequence[str],
        model: str,
        api_key: str | None = None,
        concurrency: int = 8,
        retries: int = 3,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        backoff: float = 0.5,
        down_after: int = 2,
        down_for: float = 30.0,
    ) -> None:
        """``base_url``: one server or several; ``concurrency``: requests in flight on each server;
        ``down_after`` failures in a row leave a server alone for ``down_for`` seconds."""
        import httpx

        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        self.base_urls = [url.rstrip("/") for url in urls]
        self.model = model
        self.concurrency = concurrency
        self.retries = retries
        self.backoff = backoff
        self._secrets = (api_key,)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        servers = [Server(url, httpx.Client(base_url=url, headers=headers, timeout=timeout)) for url in self.base_urls]
        self.pool = ServerPool(servers, concurrency, down_after=down_after, down_for=down_for)

    def redact(self, text: str) -> str:
        """``text`` without this backend's credentials (URL user info, the API key)."""
        return redact(text, self._secrets)

    def describe(self) -> dict[str, Any]:
        urls = [self.redact(url) for url in self.base_urls]
        return {"backend": self.name, "model": self.model, "base_url": urls[0] if len(urls) == 1 else urls}

    def close(self) -> None:
        for server in self.pool.servers:
            server.client.close()

    def generate(self, prompts: Sequence[Prompt], settings: GenerationSettings = GREEDY) -> list[Generation]:
        workers = max(1, self.concurrency) * len(self.pool.servers)
        pool = ThreadPoolExecutor(max_workers=workers)
        try:
            results = list(pool.map(lambda p: self._one(p, settings), prompts))
        except (ServerError, UnusableAnswer):
            raise
        except Exception as err:  # noqa: BLE001 - httpx and JSON errors may quote the URL: redact, keep the type
            raise ServerError(self.redact(f"{type(err).__name__}: {err}")) from None
        finally:  # on Ctrl-C or an error, wait for no request still in flight (they may run to their timeouts)
            pool.shutdown(wait=False, cancel_futures=True)
        return [g for answers in results for g in answers]

    def _body(self, prompt: Prompt, settings: GenerationSettings) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.model,
            "n": settings.n,
            "max_tokens": settings.max_new_tokens,
            "temperature": settings.temperature if settings.do_sample else 0.0,
            "top_p": settings.top_p if settings.do_sample else 1.0,
            "seed": settings.seed,
        }
        if settings.do_sample and settings.top_k:
            body["top_k"] = settings.top_k  # vLLM / SGLang / llama.cpp extension
        if settings.repetition_penalty != 1.0:
            body["repetition_penalty"] = settings.repetition_penalty
        if isinstance(prompt, str):
            body["prompt"] = prompt
            if settings.logprobs:
                body["logprobs"] = 1
            return "/completions", body
        body["messages"] = list(prompt)
        if settings.logprobs:
            body["logprobs"] = True
        return "/chat/completions", body

    def _post(self, path: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The answering server's address and its JSON reply; a retry goes to a server not yet tried
        when one is up, else waits (backoff) first."""
        tried: list[Server] = []
        for attempt in range(self.retries + 1):
            server = self.pool.acquire(avoid=tried)
            response, last = self._send(server, path, body)
            if response is not None and response.status_code == 200:
                return server.url, response.json()
            if response is not None and not last:  # the server works, the request is wrong (4xx): no retry helps
                raise ServerError(self.redact(f"{server.url}{path}: HTTP {response.status_code}: {response.text[:300]}"))
            tried.append(server)
            if attempt < self.retries and set(tried) >= set(self.pool.up()):
                time.sleep(self.backoff * 2**attempt)
        raise ServerError(self.redact(f"{server.url}{path}: failed after {self.retries + 1} tries: {last}"))

    def _send(self, server: Server, path: str, body: dict[str, Any]) -> tuple[Any, str]:
        """POST to one server and free its slot: (the response, why it counts as the server failing:
        a transport error, 429 or 5xx; "" when it does not). A transport error gives no response."""
        import httpx

        ok = False
        try:
            response = server.client.post(path, json=body)
        except httpx.TransportError as err:
            return None, f"{type(err).__name__}: {err}"
        else:
            ok = response.status_code != 429 and response.status_code < 500
            return response, "" if ok else f"HTTP {response.status_code}: {response.text[:300]}"
        finally:
            self.pool.release(server, ok)

    def _one(self, prompt: Prompt, settings: GenerationSettings) -> list[Generation]:
        path, body = self._body(prompt, settings)
        url, data = self._post(path, body)
        choices = sorted(data.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != settings.n:
            raise ServerError(self.redact(f"{url}{path}: asked for {settings.n} answers, got {len(choices)}"))
        answers = [self._parse(choice, chat=path == "/chat/completions") for choice in choices]
        for index, answer in enumerate(answers):
            problem = self._problem(answer)
            if problem:
                raise UnusableAnswer(self.redact(f"{url}{path}: the server's answer {index} has {problem}; not written "
                                                 "(a broken server or model: fix it, then rerun the same command)"))
        counts = data.get("usage") or {}
        if len(answers) == 1 and all(isinstance(counts.get(k), int) for k in ("prompt_tokens", "completion_tokens")):
            answers[0].usage = token_usage(counts["prompt_tokens"], counts["completion_tokens"])
        return answers

    @staticmethod
    def _problem(answer: Generation) -> str | None:
        """What in a parsed answer no record may hold: a log-prob that is not finite or above 0, a token
        that is not text, or not one log-prob per token; None when it is sound."""
        values = answer.token_logprobs
        if values is None:
            return None
        bad = next((i for i, v in enumerate(values) if not is_logprob(v)), None)
        if bad is not None:
            return f"log-prob {values[bad]!r} at token {bad} (log-probabilities are finite and <= 0)"
        if not all(isinstance(t, str) for t in answer.tokens) or len(answer.tokens) != len(values):
            return f"{len(answer.tokens)} tokens but {len(values)} log-probs (or a token that is not text)"
        return None

    @staticmethod
    def _parse(choice: dict[str, Any], chat: bool) -> Generation:
        logprobs = choice.get("logprobs") or None
        tokens: list[str] = []
        values: list[float] | None = None
        if chat:
            text = (choice.get("message") or {}).get("content") or ""
            if logprobs and logprobs.get("content") is not None:
                tokens = [t["token"] for t in logprobs["content"]]
                values = [float(t["logprob"]) for t in logprobs["content"]]
        else:
            text = choice.get("text") or ""
            if logprobs and logprobs.get("tokens") is not None:
                tokens = list(logprobs["tokens"])
                values = [float(v) for v in logprobs["token_logprobs"]]
        finish = choice.get("finish_reason") or "stop"
        return Generation(text=text.strip(), tokens=tokens, token_logprobs=values, finish_reason=finish)
