"""`elical serve` hardening (issue 22): the API key, the request limits, docs off by default, the
warning for a server open beyond this machine, and a bad request failing alone among concurrent ones.
Real requests (httpx over the app's ASGI interface, and one real uvicorn server) to apps built by
:func:`elical.serve.build_app` on the tiny trained model."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

pytest.importorskip("fastapi", reason="elical serve needs the serve extra: pip install 'elical[serve]'")
pytest.importorskip("uvicorn", reason="elical serve needs the serve extra: pip install 'elical[serve]'")
httpx = pytest.importorskip("httpx")

from elical.core.inputs import InputError
from elical.serve import ServeConfig, build_app
from elical.serve.app import ServeOptions
from elical.serve.setup import exposure_warning

KEY_ENV, KEY = "ELICAL_TEST_SERVE_KEY", "s3cret-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
LIMITS = {"max_body_bytes": 20_000, "max_questions": 64, "max_question_chars": 100, "batch_tokens": 64}
QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def limited(trained_model_dir):
    """An app with a key, small limits and at most 64 estimated tokens a confidence pass (a question or two)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_ENV, KEY)
        return build_app(ServeConfig(trained_model_dir, tau=0.0, device="cpu", max_new_tokens=6, api_key_env=KEY_ENV,
                                     **LIMITS))


@pytest.fixture(scope="module")
def open_app(trained_model_dir):
    """An app without a key, with the default limits and the docs on."""
    return build_app(ServeConfig(trained_model_dir, tau=0.0, device="cpu", max_new_tokens=6, docs=True))


@asynccontextmanager
async def client_of(app) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client of the app over ASGI, the app's lifespan (its micro-batcher) running."""
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        yield client


def send(app, *requests: tuple[str, str, dict]) -> list[httpx.Response]:
    """Each (method, path, httpx keywords) sent to the app at once; the responses."""
    async def main() -> list[httpx.Response]:
        async with client_of(app) as client:
            return await asyncio.gather(*(client.request(method, path, **kw) for method, path, kw in requests))

    return asyncio.run(main())


def post(app, path: str, **kw) -> httpx.Response:
    [response] = send(app, ("POST", path, {"headers": AUTH, **kw}))
    return response


def error(response: httpx.Response, status: int) -> dict:
    """The OpenAI-style error of a response that must have ``status``."""
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert set(body) == {"message", "type", "param", "code"} and body["type"] == "invalid_request_error"
    return body


def confidence_body(questions: list[str]) -> dict:
    return {"json": {"questions": questions}}


def chat_body(content: str, **extra: object) -> dict:
    return {"json": {"messages": [{"role": "user", "content": content}], **extra}}


# ---------------------------------------------------------------------------------------- the API key


def test_every_route_but_health_needs_the_key(limited):
    no_key = send(limited, ("GET", "/health", {}), ("GET", "/v1/models", {}), ("GET", "/v1/nothing", {}),
                  ("POST", "/v1/confidence", confidence_body([QUESTION])),
                  ("POST", "/v1/chat/completions", chat_body(QUESTION)))
    assert no_key[0].status_code == 200 and no_key[0].json()["status"] == "ok"
    for response in no_key[1:]:
        body = error(response, 401)
        assert body["code"] == "invalid_api_key" and "Authorization: Bearer" in body["message"]
        assert response.headers["www-authenticate"] == "Bearer"

    wrong = [{"Authorization": f"Bearer {KEY}x"}, {"Authorization": "Bearer s3cret"}, {"Authorization": KEY},
             {"Authorization": f"Basic {KEY}"}]
    for headers in wrong:
        body = error(post(limited, "/v1/confidence", headers=headers, **confidence_body([QUESTION])), 401)
        assert KEY not in body["message"]
    for headers in (AUTH, {"authorization": f"bearer {KEY}"}):
        response = post(limited, "/v1/confidence", headers=headers, **confidence_body([QUESTION]))
        assert response.status_code == 200 and len(response.json()["confidences"]) == 1


def test_an_unset_or_empty_key_variable_refuses_to_start(trained_model_dir, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(InputError, match=f"--api-key-env: the environment variable {KEY_ENV} is not set"):
        build_app(ServeConfig(trained_model_dir, tau=0.0, api_key_env=KEY_ENV))
    monkeypatch.setenv(KEY_ENV, " ")
    with pytest.raises(InputError, match=f"--api-key-env: the environment variable {KEY_ENV} is empty"):
        build_app(ServeConfig(trained_model_dir, tau=0.0, api_key_env=KEY_ENV))

    from typer.testing import CliRunner

    from elical.cli import app

    monkeypatch.delenv(KEY_ENV)
    result = CliRunner().invoke(app, ["serve", str(trained_model_dir), "--tau", "0", "--api-key-env", KEY_ENV])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: --api-key-env: the environment variable {KEY_ENV} is not set"


def test_the_warning_for_a_server_open_beyond_this_machine():
    for host in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"):
        assert exposure_warning(host, None, "http://up/v1") is None
    assert exposure_warning("0.0.0.0", KEY_ENV, "http://up/v1") is None
    plain = exposure_warning("0.0.0.0", None, None)
    assert plain is not None and plain.startswith("warning: listening on 0.0.0.0 without --api-key-env")
    assert "anyone who can reach this port can use the server" in plain and "upstream" not in plain
    loud = exposure_warning("192.168.1.5", None, "http://user:pw@up/v1")
    assert loud is not None and loud.startswith("WARNING: listening on 192.168.1.5 without --api-key-env")
    assert "spends the upstream server's API key" in loud and "pw" not in loud


# ---------------------------------------------------------------------------------------- limits


def test_body_size_at_and_over_the_limit(limited):
    body = b'{"questions": ["' + QUESTION.encode() + b'"]}'
    at = body + b" " * (LIMITS["max_body_bytes"] - len(body))
    headers = {**AUTH, "Content-Type": "application/json"}
    assert post(limited, "/v1/confidence", content=at, headers=headers).status_code == 200
    over = error(post(limited, "/v1/confidence", content=at + b" ", headers=headers), 413)
    assert over["message"] == "request body: 20001 bytes, over the limit of 20000 bytes" and over["param"] == "body"

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit is found while reading
        for _ in range(30):
            yield b" " * 1000

    streamed = error(post(limited, "/v1/chat/completions", content=chunks(), headers=headers), 413)
    assert streamed["message"] == "request body: more than 20000 bytes, over the limit of 20000 bytes"


def test_questions_per_request_at_and_over_the_limit(limited):
    assert len(post(limited, "/v1/confidence", **confidence_body(["q"] * 64)).json()["confidences"]) == 64
    over = error(post(limited, "/v1/confidence", **confidence_body(["q"] * 65)), 413)
    assert over["message"] == "questions: 65 questions, at most 64 per request" and over["param"] == "questions"


def test_characters_per_question_at_and_over_the_limit(limited):
    assert post(limited, "/v1/confidence", **confidence_body(["ok", "q" * 100])).status_code == 200
    over = error(post(limited, "/v1/confidence", **confidence_body(["ok", "q" * 101])), 400)
    assert over["message"] == "questions.1: 101 characters, over the limit of 100 characters per question"
    assert over["param"] == "questions.1"
    assert post(limited, "/v1/chat/completions", **chat_body("q" * 100)).status_code == 200
    chat = error(post(limited, "/v1/chat/completions", **chat_body("q" * 101)), 400)
    assert "101 characters, over the limit of 100 characters per question" in chat["message"]


def test_max_tokens_at_and_over_the_servers_limit(limited):
    for name in ("max_tokens", "max_completion_tokens"):
        answered = post(limited, "/v1/chat/completions", **chat_body(QUESTION, **{name: 6}))
        assert answered.status_code == 200 and answered.json()["elical"]["decision"] == "answer"
        over = error(post(limited, "/v1/chat/completions", **chat_body(QUESTION, **{name: 7})), 400)
        assert over["message"] == f"{name}: 7, over this server's limit of 6 tokens" and over["param"] == name
    huge = error(post(limited, "/v1/chat/completions", **chat_body(QUESTION, max_tokens=10**30)), 400)
    assert huge["message"] == "max_tokens: 1e+30, over this server's limit of 6 tokens"
    vast = error(post(limited, "/v1/chat/completions", **chat_body(QUESTION, max_tokens=10**400)), 400)
    assert vast["message"] == "max_tokens: a 401-digit number, over this server's limit of 6 tokens"
    for value in (0, -1, True, 2.0, "3"):
        assert post(limited, "/v1/chat/completions", **chat_body(QUESTION, max_tokens=value)).status_code == 400


def test_limits_must_be_positive():
    for name in ("max_body_bytes", "max_questions", "max_question_chars", "batch_tokens"):
        with pytest.raises(ValueError, match=f"{name} must be a positive integer, got 0"):
            ServeOptions(model_name="m", **{name: 0})


def test_the_command_line_defaults_are_the_configs():
    import typer

    from elical.cli import app

    options = {p.name: p.default for p in typer.main.get_command(app).commands["serve"].params}
    for name in ("max_body_bytes", "max_questions", "max_question_chars", "batch_tokens", "docs", "api_key_env",
                 "max_new_tokens"):
        assert options[name] == getattr(ServeConfig, name), name


# ---------------------------------------------------------------------------------------- docs


def test_docs_are_off_by_default_and_on_when_asked(limited, open_app):
    paths = ("/docs", "/redoc", "/openapi.json")
    assert [r.status_code for r in send(limited, *(("GET", p, {"headers": AUTH}) for p in paths))] == [404] * 3
    assert [r.status_code for r in send(open_app, *(("GET", p, {}) for p in paths))] == [200] * 3


# ---------------------------------------------------------------------------------------- one request among others


def test_a_poisoned_request_fails_alone_among_concurrent_ones(open_app):
    """Good requests sent with poisoned ones (bad Unicode, bad JSON, over a limit) get their own
    confidences; and a question the tokenizer rejects, put straight into the micro-batcher beside
    them, fails that call alone."""
    questions = [f"{QUESTION} {i}" for i in range(12)]
    [alone] = send(open_app, ("POST", "/v1/confidence", confidence_body(questions)))
    expected = alone.json()["confidences"]
    headers = {"Content-Type": "application/json"}
    poisoned = [("POST", "/v1/confidence", {"content": b'{"questions": ["ok \\ud800"]}', "headers": headers}),
                ("POST", "/v1/confidence", {"content": b'{"questions": ["ok"', "headers": headers}),
                ("POST", "/v1/confidence", confidence_body(["q"] * 257)),
                ("POST", "/v1/confidence", confidence_body(["q" * 20_001]))]
    good = [("POST", "/v1/confidence", confidence_body([q])) for q in questions]

    async def main() -> list[httpx.Response | BaseException]:
        async with client_of(open_app) as client:
            direct = open_app.state.batcher.confidence(["ok", "\ud800"])  # past the app's validation
            return await asyncio.gather(
                *(client.request(m, p, **kw) for m, p, kw in [*poisoned[:2], *good[:6], *poisoned[2:], *good[6:]]),
                direct, return_exceptions=True)

    *responses, raised = asyncio.run(main())
    statuses = [r.status_code for r in responses]
    assert statuses == [400, 400, *[200] * 6, 413, 400, *[200] * 6], [r.text for r in responses]
    got = [r.json()["confidences"][0] for r in responses if r.status_code == 200]
    assert got == pytest.approx(expected, abs=1e-5)
    assert isinstance(raised, TypeError)  # the tokenizer's own error, to that call only


def test_a_large_request_does_not_hold_a_small_one(limited):
    """Past --batch-tokens a request is split into passes that take turns: a one-question request sent
    while 64 questions are being scored is answered before them."""
    large = [f"{QUESTION} and the river {i} that runs through it?" for i in range(64)]

    async def main() -> tuple[bool, list[float], int]:
        async with client_of(limited) as client:
            batcher = limited.state.batcher
            before = batcher.passes
            big = asyncio.create_task(client.post("/v1/confidence", headers=AUTH, json={"questions": large}))
            while batcher.passes < before + 2:
                await asyncio.sleep(0.001)
            small = await client.post("/v1/confidence", headers=AUTH, json={"questions": [QUESTION]})
            small.raise_for_status()
            ahead = not big.done()
            return ahead, (await big).json()["confidences"], batcher.passes - before

    ahead, scores, passes = asyncio.run(main())
    assert ahead and len(scores) == 64 and passes >= 64 + 1  # each question (83 tokens estimated) a pass of its own
    reference = post(limited, "/v1/confidence", **confidence_body(large[:2])).json()["confidences"]
    assert scores[:2] == pytest.approx(reference, abs=1e-5)


# ---------------------------------------------------------------------------------------- a real server


@pytest.fixture
def served(limited) -> Iterator[str]:
    """``limited`` under uvicorn on a free localhost port: its URL."""
    import socket

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(limited, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_real_server_answers_an_oversized_body_and_keeps_serving(served):
    """The 413 comes before the body is read; uvicorn drains the rest and the connection serves on."""
    with httpx.Client(base_url=served, headers=AUTH, timeout=30) as client:
        refused = client.post("/v1/confidence", content=b"x" * 4_000_000, headers={"Content-Type": "application/json"})
        assert error(refused, 413)["message"] == "request body: 4000000 bytes, over the limit of 20000 bytes"
        assert client.post("/v1/confidence", json={"questions": [QUESTION]}).status_code == 200
        assert httpx.get(f"{served}/v1/models").status_code == 401
