"""The OpenAI-compatible backend against a real local HTTP server (stdlib http.server in a thread)
that serves a tiny model through the HF backend."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from elical.annotate.backends.base import GenerationSettings
from elical.annotate.backends.hf import HFBackend
from elical.annotate.backends.openai import OpenAIBackend, ServerError

PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Who wrote Hamlet?"}],
    [{"role": "user", "content": "Which river flows through Egypt?"}],
    [{"role": "user", "content": "In which year did it happen?"}],
]


class TinyServer:
    """Serves /v1/chat/completions and /v1/completions from an HFBackend; can fail on purpose."""

    def __init__(self, backend: HFBackend, fail_first: int = 0, status: int = 503):
        self.backend = backend
        self.fail_left = fail_first
        self.status = status
        self.lock = threading.Lock()
        self.model_lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests += 1
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    fail = server.fail_left > 0
                    server.fail_left -= 1
                try:
                    if fail:
                        self._send(server.status, {"error": "try again"})
                        return
                    self._send(200, server.answer(self.path, body))
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _send(self, code, payload):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, path: str, body: dict) -> dict:
        temperature = body.get("temperature", 1.0)
        settings = GenerationSettings(
            do_sample=temperature > 0,
            n=body.get("n", 1),
            temperature=temperature or 1.0,
            top_p=body.get("top_p", 1.0),
            top_k=body.get("top_k", 0),
            max_new_tokens=body.get("max_tokens", 16),
            seed=body.get("seed", 0),
        )
        prompt = body["messages"] if path.endswith("/chat/completions") else body["prompt"]
        with self.model_lock:  # one generate at a time on the shared model
            gens = self.backend.generate([prompt], settings)
        choices = []
        for i, g in enumerate(gens):
            if path.endswith("/chat/completions"):
                logprobs = {"content": [{"token": t, "logprob": v} for t, v in zip(g.tokens, g.token_logprobs)]}
                choices.append({"index": i, "message": {"role": "assistant", "content": g.text}, "logprobs": logprobs, "finish_reason": g.finish_reason})
            else:
                logprobs = {"tokens": g.tokens, "token_logprobs": g.token_logprobs}
                choices.append({"index": i, "text": g.text, "logprobs": logprobs, "finish_reason": g.finish_reason})
        return {"object": "chat.completion", "model": body["model"], "choices": choices}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def hf(tiny_tokenizer, tiny_llama):
    return HFBackend(tiny_llama, tiny_tokenizer, batch_size=8)


def test_greedy_over_http_equals_the_local_backend(hf):
    with TinyServer(hf) as server:
        client = OpenAIBackend(server.url, "tiny", concurrency=2)
        remote = client.generate(PROMPTS, GenerationSettings(max_new_tokens=6))
        client.close()
    local = [hf.generate([p], GenerationSettings(max_new_tokens=6))[0] for p in PROMPTS]
    assert [g.text for g in remote] == [g.text for g in local]
    for r, g in zip(remote, local):
        assert r.tokens == g.tokens
        assert r.token_logprobs == pytest.approx(g.token_logprobs, abs=1e-6)


def test_plain_string_prompts_use_completions(hf):
    with TinyServer(hf) as server:
        client = OpenAIBackend(server.url, "tiny")
        out = client.generate(["Question: Who wrote Hamlet?"], GenerationSettings(max_new_tokens=5))
    assert len(out) == 1 and out[0].token_logprobs is not None and len(out[0].tokens) == len(out[0].token_logprobs)


def test_n_samples_per_request_and_bounded_concurrency(hf):
    with TinyServer(hf) as server:
        client = OpenAIBackend(server.url, "tiny", concurrency=2)
        out = client.generate(PROMPTS * 2, GenerationSettings(do_sample=True, n=3, max_new_tokens=4))
    assert len(out) == 8 * 3
    assert server.requests == 8  # one request per prompt, n answers each
    assert 1 <= server.max_in_flight <= 2


def test_retries_transient_errors(hf):
    with TinyServer(hf, fail_first=2, status=503) as server:
        client = OpenAIBackend(server.url, "tiny", concurrency=1, retries=3, backoff=0.01)
        out = client.generate(PROMPTS[:1], GenerationSettings(max_new_tokens=3))
    assert len(out) == 1 and server.requests == 3


def test_gives_up_with_a_clear_error(hf):
    with TinyServer(hf, fail_first=100, status=503) as server:
        client = OpenAIBackend(server.url, "tiny", concurrency=1, retries=1, backoff=0.01)
        with pytest.raises(ServerError, match="failed after 2 tries: HTTP 503"):
            client.generate(PROMPTS[:1], GenerationSettings(max_new_tokens=3))
    with TinyServer(hf, fail_first=100, status=400) as server:
        client = OpenAIBackend(server.url, "tiny", retries=3, backoff=0.01)
        with pytest.raises(ServerError, match="HTTP 400"):
            client.generate(PROMPTS[:1], GenerationSettings(max_new_tokens=3))
        assert server.requests == 1  # client errors are not retried
