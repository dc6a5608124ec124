"""The OpenAI-compatible backend against a real local HTTP server (stdlib http.server in a thread)
that serves a tiny model through the HF backend."""

from __future__ import annotations

import json
import threading
import time
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
    """Serves /v1/chat/completions and /v1/completions from an HFBackend; can fail on purpose (the first
    requests, or those whose body holds ``fail_marker``) or die (request ``die_at`` gets no answer and the
    server shuts down); keeps each request's Authorization header."""

    def __init__(self, backend: HFBackend, fail_first: int = 0, status: int = 503, fail_marker: str | None = None,
                 die_at: int | None = None):
        self.backend = backend
        self.die_at = die_at
        self.fail_left = fail_first
        self.status = status
        self.fail_marker = fail_marker
        self.auth: list[str | None] = []
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
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                body = json.loads(raw)
                with server.lock:
                    server.requests += 1
                    server.auth.append(self.headers.get("Authorization"))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    fail = server.fail_left > 0 or (server.fail_marker is not None and server.fail_marker in raw.decode())
                    server.fail_left -= 1
                    dying = server.requests == server.die_at
                if dying:  # no answer: the client sees the connection drop, then nothing listens
                    self.close_connection = True
                    threading.Thread(target=server.__exit__, daemon=True).start()
                    return
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


def test_requests_spread_over_two_servers_and_move_off_one_that_dies(hf):
    prompts = [[{"role": "user", "content": f"Question {i}: who wrote Hamlet?"}] for i in range(24)]
    settings = GenerationSettings(max_new_tokens=4)
    with TinyServer(hf, die_at=3) as dying, TinyServer(hf) as healthy:
        client = OpenAIBackend([dying.url, healthy.url], "tiny", concurrency=2, retries=3, backoff=0.01, down_for=60.0)
        remote = client.generate(prompts, settings)
        client.close()
    local = [hf.generate([p], settings)[0] for p in prompts]
    assert [g.text for g in remote] == [g.text for g in local]  # every question answered, each once
    assert dying.requests == 3 and healthy.requests >= 21  # both served before the death
    first, second = client.pool.servers
    assert first.down_until > time.monotonic() and second.down_until == 0.0
    assert first.sent - dying.requests <= 5  # after its death it is left alone, not tried for every request


def test_pool_picks_the_least_loaded_server_within_its_bound_and_marks_failures_down():
    from elical.annotate.backends.server_pool import Server, ServerPool

    now = [0.0]
    a, b = Server("http://a/v1", None), Server("http://b/v1", None)
    pool = ServerPool([a, b], concurrency=2, down_after=2, down_for=10.0, clock=lambda: now[0])
    taken = [pool.acquire() for _ in range(4)]
    assert sorted(s.url for s in taken) == ["http://a/v1"] * 2 + ["http://b/v1"] * 2  # spread, 2 each at most
    waiting: list = []
    thread = threading.Thread(target=lambda: waiting.append(pool.acquire()))
    thread.start()
    thread.join(timeout=0.3)
    assert not waiting  # every server at its bound: the fifth request waits ...
    pool.release(taken[0], ok=True)
    thread.join(timeout=5)
    assert waiting == [taken[0]]  # ... for the first free slot
    for server in [*taken[1:], *waiting]:
        pool.release(server, ok=True)
    assert pool.acquire(avoid=[a]) is b  # a retry goes to a server this request has not failed on
    pool.release(b, ok=True)
    for _ in range(2):
        pool.release(pool.acquire(avoid=[b]), ok=False)  # a fails twice in a row: down for 10 s
    assert pool.up() == [b] and all(pool.acquire() is b for _ in range(2))
    pool.release(b, ok=False)
    pool.release(b, ok=False)  # b down too: the one due back first (a) is tried
    assert pool.up() == [] and pool.acquire() is a
    pool.release(a, ok=True)
    now[0] = 11.0
    assert pool.up() == [a, b]  # b is tried again once its time is up


def test_several_base_urls_from_the_config(tmp_path):
    from elical.annotate.config import AnnotateConfig
    from elical.annotate.run import build_backend

    urls = [f"http://user:{PASSWORD}@127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]
    cfg = AnnotateConfig(backend="openai", base_url=urls, model="m", concurrency=3)
    backend = build_backend(cfg)
    assert [s.url for s in backend.pool.servers] == urls and backend.pool.concurrency == 3
    assert backend.describe()["base_url"] == ["http://***@127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]
    backend.close()
    cfg.to_yaml(tmp_path / "annotate.yaml")
    assert PASSWORD not in (tmp_path / "annotate.yaml").read_text()
    with pytest.raises(ValueError, match="expected an http:// or https:// address.*got '127.0.0.1:8003'"):
        AnnotateConfig(backend="openai", base_url=[urls[1], "127.0.0.1:8003"])
    with pytest.raises(ValueError, match="needs base_url"):
        AnnotateConfig(backend="openai", base_url=[])


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


# ----------------------------------------------------------------------------- credentials

KEY, PASSWORD = "sk-test-5f1e2d3c4b", "pw-7a8b9c0d1e"


def _written(folder) -> dict[str, bytes]:
    """Every file under ``folder`` and the lock files beside it, by name."""
    files = [*folder.rglob("*"), *folder.parent.glob(f".{folder.name}*")]
    return {str(p): p.read_bytes() for p in files if p.is_file()}


@pytest.mark.parametrize("how", ["OPENAI_API_KEY", "--api-key-env", "user:password@"])
def test_credentials_are_sent_but_never_written(hf, tmp_path, monkeypatch, how):
    import base64

    from typer.testing import CliRunner

    from elical.cli import app
    from elical.records import read_parquet

    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "Who wrote Hamlet?", "answer": ["Shakespeare"]}\n'
                  '{"question": "FAIL: which river flows through Egypt?", "answer": ["Nile"]}\n')
    out = tmp_path / "out"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with TinyServer(hf, status=400, fail_marker="FAIL") as server:
        url, extra, env = server.url, [], {}
        if how == "OPENAI_API_KEY":
            env = {"OPENAI_API_KEY": KEY}
        elif how == "--api-key-env":
            env, extra = {"MY_SERVER_KEY": KEY}, ["--api-key-env", "MY_SERVER_KEY"]
        else:
            url = url.replace("http://", f"http://user:{PASSWORD}@")
        args = ["annotate", str(qa), "--out", str(out), "--backend", "openai", "--base-url", url, "--model", "tiny",
                "--k", "2", "--max-new-tokens", "4", "--concurrency", "2", "--read-timeout", "30", *extra]
        monkeypatch.setattr("sys.argv", ["elical", *args])  # the command line lands in provenance and lock files
        result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    basic = "Basic " + base64.b64encode(f"user:{PASSWORD}".encode()).decode()
    assert set(server.auth) == {basic if how == "user:password@" else f"Bearer {KEY}"}
    failed = [r for r in read_parquet(out / "records.parquet") if r.failed]
    assert len(failed) == 1 and "HTTP 400" in failed[0].failure
    if how == "user:password@":
        assert "http://***@127.0.0.1" in failed[0].failure
    written = _written(out)
    assert {"annotate.yaml", "records.parquet"} <= {name.rsplit("/", 1)[-1] for name in written}
    for name, data in [*written.items(), ("output", result.output.encode())]:
        assert KEY.encode() not in data and PASSWORD.encode() not in data, name


def test_server_errors_never_show_url_credentials():
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAIBackend(f"http://user:{PASSWORD}@127.0.0.1:{port}/v1?api_key={KEY}", "tiny", api_key=KEY,
                           retries=0, backoff=0.0, connect_timeout=2.0)
    assert PASSWORD not in json.dumps(client.describe()) and KEY not in json.dumps(client.describe())
    with pytest.raises(ServerError) as info:
        client.generate(PROMPTS[:1], GenerationSettings(max_new_tokens=3))
    message = str(info.value)
    assert "ConnectError" in message and "***@127.0.0.1" in message
    assert PASSWORD not in message and KEY not in message


@pytest.mark.parametrize("text, expected", [
    ("http://user:pw@host:8000/v1", "http://***@host:8000/v1"),
    ("failed: https://token@api.example.com/v1/chat", "failed: https://***@api.example.com/v1/chat"),
    ("http://host/v1?api_key=abc&x=1", "http://host/v1?api_key=***&x=1"),
    ("Bearer sk-secret in a message", "Bearer *** in a message"),
    ("http://host:8000/v1", "http://host:8000/v1"),
    ("http://user:p@ss-SECRET2@host/v1 failed", "http://***@host/v1 failed"),  # a password holding "@"
    ("http://host/v1/x@y", "http://host/v1/x@y"),  # an "@" in the path is no credential
    ("401: WWW-Authenticate said Authorization: Basic dXNlcjpTRUNSRVQ=", "401: WWW-Authenticate said Authorization: Basic ***"),
    ("echo: bearer abc.def-ghi", "echo: bearer ***"),
    ("Basic authentication failed; Bearer tokens expire", "Basic authentication failed; Bearer tokens expire"),
])
def test_redact(text, expected):
    from elical.core.redact import redact

    assert redact(text, ["sk-secret"]) == expected


def test_timeouts_and_concurrency_reach_the_backend():
    from elical.annotate.config import AnnotateConfig
    from elical.annotate.run import api_key, build_backend

    cfg = AnnotateConfig(backend="openai", base_url="http://127.0.0.1:1/v1", model="m", concurrency=3,
                         connect_timeout=1.5, read_timeout=7.0, api_key_env="MY_KEY")
    with pytest.raises(ValueError, match="MY_KEY is not set"):
        api_key(cfg, {})
    assert api_key(cfg, {"MY_KEY": "k", "OPENAI_API_KEY": "other"}) == "k"
    assert api_key(cfg.model_copy(update={"api_key_env": None}), {"OPENAI_API_KEY": "other"}) == "other"
    backend = build_backend(cfg.model_copy(update={"api_key_env": None}))
    timeout = backend.pool.servers[0].client.timeout
    assert backend.concurrency == 3 and (timeout.connect, timeout.read) == (1.5, 7.0)
    backend.close()


def test_a_saved_config_keeps_no_password_and_is_not_reused_with_a_masked_one(tmp_path):
    from elical.annotate.config import AnnotateConfig

    cfg = AnnotateConfig(backend="openai", base_url=f"http://user:{PASSWORD}@127.0.0.1:8000/v1", model="m")
    assert cfg.base_url == f"http://user:{PASSWORD}@127.0.0.1:8000/v1"  # the run itself keeps it
    cfg.to_yaml(tmp_path / "annotate.yaml")
    assert "base_url: http://***@127.0.0.1:8000/v1" in (tmp_path / "annotate.yaml").read_text()
    with pytest.raises(ValueError, match=r"annotate.yaml: line \d+: base_url: holds a redacted credential"):
        AnnotateConfig.from_yaml(tmp_path / "annotate.yaml")
