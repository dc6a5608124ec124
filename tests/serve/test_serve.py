"""`elical serve` as a real uvicorn server process on a tiny trained model, driven over HTTP with
httpx and the openai SDK: confidences, the three decisions (the process answering with the HF base
model; a second server, in this process, retrieving and answering through the first as its
upstream, or abstaining), batching, and bad requests."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="elical serve needs the serve extra: pip install 'elical[serve]'")
pytest.importorskip("uvicorn", reason="elical serve needs the serve extra: pip install 'elical[serve]'")
httpx = pytest.importorskip("httpx")

from elical.honesty.config import REFUSAL
from elical.serve import ServeConfig, build_app
from elical.serve.generation import with_passages
from elical.serve.micro_batch import MicroBatcher

KNOWN, UNKNOWN = "capital France Paris", "fox dog lazy"  # high and low confidence after training
CORPUS = [{"id": "p1", "text": "Paris is the capital of France."},
          {"id": "p2", "text": "The quick brown fox jumps over the lazy dog."}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """An `elical serve` process; its log is kept to show when it fails to start."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        command = [sys.executable, "-m", "elical.cli", "serve", *args, "--port", str(self.port), "--device", "cpu",
                   "--max-new-tokens", "6"]
        self.process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)

    def wait(self, timeout: float = 120) -> Server:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.2)
        raise RuntimeError(f"server did not answer /health within {timeout} s:\n{self.log.read_text()}")

    def post(self, path: str, body: object) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, timeout=60)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


class ThreadServer(Server):
    """The app of :func:`elical.serve.build_app` under uvicorn in a thread of this process (no second
    torch import on a busy machine); a real server all the same."""

    def __init__(self, config: ServeConfig) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(build_app(config), port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def wait(self, timeout: float = 30) -> Server:
        deadline = time.monotonic() + timeout
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.server.started, "in-process server did not start"
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def confidences(trained_model_dir) -> dict[str, float]:
    from elical.model.network import ConfidenceModel

    model = ConfidenceModel.from_pretrained(trained_model_dir, device="cpu")
    return dict(zip([KNOWN, UNKNOWN], model.confidence([KNOWN, UNKNOWN]).tolist()))


@pytest.fixture(scope="module")
def servers(trained_model_dir, confidences, tmp_path_factory):
    """(local, retrieving). local: `elical serve` in a process, answering everything with the HF base
    model (tau 0). retrieving: never answers outright (tau 1), retrieves between the two questions'
    confidences and abstains below, answering through local as its upstream (in this process)."""
    import json

    folder = tmp_path_factory.mktemp("serve")
    (folder / "corpus.jsonl").write_text("".join(json.dumps(p) + "\n" for p in CORPUS))
    assert confidences[KNOWN] > confidences[UNKNOWN] + 0.1
    band = (confidences[KNOWN] + confidences[UNKNOWN]) / 2
    local = Server([str(trained_model_dir), "--tau", "0"], folder / "local.log")
    retrieving = None
    try:
        retrieving = ThreadServer(ServeConfig(trained_model_dir, tau=1.0, retrieve_below=band,
                                              corpus=folder / "corpus.jsonl", upstream=f"{local.url}/v1",
                                              upstream_model="tiny", device="cpu", max_new_tokens=6))
        yield local.wait(), retrieving.wait()
    finally:
        local.stop()
        if retrieving is not None:
            retrieving.stop()


def test_micro_batcher_scores_concurrent_requests_in_one_pass():
    calls: list[list[str]] = []

    def score(questions: list[str]) -> list[float]:
        calls.append(questions)
        return [len(q) / 10 for q in questions]

    async def main() -> list[list[float]]:
        batcher = MicroBatcher(score, max_questions=64, max_wait_ms=20)
        await batcher.start()
        try:
            return await asyncio.gather(*(batcher.confidence(["a" * i, "b"]) for i in range(1, 6)))
        finally:
            await batcher.stop()

    results = asyncio.run(main())
    assert results == [[i / 10, 0.1] for i in range(1, 6)]
    assert len(calls) == 1 and len(calls[0]) == 10


def test_one_bad_request_fails_alone():
    """A pass that fails is retried request by request: the others batched with the bad one get their scores."""
    def score(questions: list[str]) -> list[float]:
        if any("poison" in q for q in questions):
            raise ValueError("cannot score this")
        return [len(q) / 10 for q in questions]

    async def main() -> list[object]:
        batcher = MicroBatcher(score, max_questions=64, max_wait_ms=20)
        await batcher.start()
        try:
            asks = [["a" * i] for i in range(1, 5)] + [["poison"]] + [["bb"]]
            return await asyncio.gather(*(batcher.confidence(q) for q in asks), return_exceptions=True)
        finally:
            await batcher.stop()

    results = asyncio.run(main())
    assert results[:4] == [[i / 10] for i in range(1, 5)] and results[5] == [0.2]
    assert isinstance(results[4], ValueError)


def test_health_models_and_confidence(servers, confidences):
    local, _ = servers
    health = httpx.get(f"{local.url}/health").json()
    assert health["status"] == "ok" and health["tau"] == 0.0 and health["retrieve_below"] is None
    assert httpx.get(f"{local.url}/v1/models").json()["data"][0]["id"] == health["model"]
    got = local.post("/v1/confidence", {"questions": [KNOWN, UNKNOWN]}).json()["confidences"]
    assert got == pytest.approx([confidences[KNOWN], confidences[UNKNOWN]], abs=1e-5)


def test_each_decision_and_the_upstream(servers, confidences):
    local, retrieving = servers
    answered = local.post("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": KNOWN}]}).json()
    assert answered["object"] == "chat.completion" and answered["choices"][0]["message"]["role"] == "assistant"
    assert answered["elical"]["decision"] == "answer" and answered["elical"]["threshold"] == 0.0
    assert answered["elical"]["confidence"] == pytest.approx(confidences[KNOWN], abs=1e-5)

    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": KNOWN}]
    retrieved = retrieving.post("/v1/chat/completions", {"messages": chat}).json()
    assert retrieved["elical"]["decision"] == "retrieve" and retrieved["elical"]["threshold"] == 1.0
    assert retrieved["elical"]["passages"] == ["Paris is the capital of France."]
    # the upstream (local) got the chat with the passages and answered it greedily
    direct = local.post("/v1/chat/completions", {"messages": with_passages(chat, retrieved["elical"]["passages"])})
    assert retrieved["choices"][0]["message"]["content"] == direct.json()["choices"][0]["message"]["content"]

    abstained = retrieving.post("/v1/chat/completions", {"messages": [{"role": "user", "content": UNKNOWN}]}).json()
    assert abstained["elical"]["decision"] == "abstain" and abstained["elical"]["passages"] == []
    assert abstained["choices"][0]["message"]["content"] == REFUSAL


def test_chat_reports_the_time_of_each_step_it_took(servers):
    """elical.timing: milliseconds of the confidence pass, retrieval and generation (null when skipped),
    within the request's wall time as the client sees it."""
    local, retrieving = servers
    start = time.perf_counter()
    answered = local.post("/v1/chat/completions", {"messages": [{"role": "user", "content": KNOWN}]}).json()
    wall_ms = (time.perf_counter() - start) * 1000
    timing = answered["elical"]["timing"]
    assert timing["retrieval_ms"] is None and timing["confidence_ms"] > 0 and timing["generation_ms"] > 0
    assert timing["confidence_ms"] + timing["generation_ms"] < wall_ms

    retrieved = retrieving.post("/v1/chat/completions", {"messages": [{"role": "user", "content": KNOWN}]}).json()
    assert all(retrieved["elical"]["timing"][k] > 0 for k in ("confidence_ms", "retrieval_ms", "generation_ms"))
    abstained = retrieving.post("/v1/chat/completions", {"messages": [{"role": "user", "content": UNKNOWN}]}).json()
    timing = abstained["elical"]["timing"]
    assert timing["confidence_ms"] > 0 and timing["retrieval_ms"] is None and timing["generation_ms"] is None


def test_concurrent_requests_are_batched_and_get_the_sequential_confidences(servers):
    local, _ = servers
    lists = [[f"{KNOWN} {i}", f"{UNKNOWN} {i}"] for i in range(8)]
    sequential = [local.post("/v1/confidence", {"questions": q}).json()["confidences"] for q in lists]
    before = httpx.get(f"{local.url}/health").json()["confidence_passes"]
    start, results = threading.Barrier(len(lists)), [None] * len(lists)

    def ask(i: int) -> None:
        start.wait()
        results[i] = local.post("/v1/confidence", {"questions": lists[i]}).json()["confidences"]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(lists))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert np.allclose(results, sequential, atol=1e-5)
    assert httpx.get(f"{local.url}/health").json()["confidence_passes"] - before < len(lists)


@pytest.mark.parametrize("path, body, status, message", [
    ("/v1/confidence", {"questions": []}, 400, "questions: List should have at least 1 item"),
    ("/v1/confidence", {"questions": "why?"}, 400, "questions: Input should be a valid list"),
    ("/v1/confidence", {"questions": [1]}, 400, "questions.0: Input should be a valid string"),
    ("/v1/confidence", {"questions": [" "]}, 400, "questions.0: must not be blank"),
    ("/v1/confidence", {"question": ["a"]}, 400, "questions: Field required"),
    ("/v1/confidence", ["a"], 400, "the request body must be a JSON object"),
    ("/v1/confidence", {"questions": ["a"] * 257}, 413, "257 questions, at most 256 per request"),
    ("/v1/chat/completions", {"messages": []}, 400, "messages: List should have at least 1 item"),
    ("/v1/chat/completions", {"messages": [{"role": "system", "content": "x"}]}, 400, "no user message"),
    ("/v1/chat/completions", {"messages": [{"role": "bot", "content": "x"}]}, 400, "messages.0.role"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "stream": True}, 400, "not supported"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "n": 2}, 400, "only one answer"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, 400, "max_tokens"),
])
def test_bad_requests_get_a_4xx_json_error(servers, path, body, status, message):
    local, _ = servers
    response = local.post(path, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert message in error["message"] and error["type"] == "invalid_request_error"
    assert "Traceback" not in response.text


@pytest.mark.parametrize("path, raw, message", [
    ("/v1/confidence", rb'{"questions": ["ok", "bad \ud800"]}', "questions.1: is not valid Unicode text"),
    ("/v1/chat/completions", rb'{"messages": [{"role": "user", "content": "\ud800?"}]}', "not valid Unicode text"),
])
def test_text_that_is_not_unicode_is_a_400(servers, path, raw, message):
    """JSON may escape a lone surrogate, which no tokenizer reads: the request fails alone, with a 400."""
    local, _ = servers
    response = httpx.post(f"{local.url}{path}", content=raw, headers={"content-type": "application/json"}, timeout=60)
    assert response.status_code == 400 and message in response.json()["error"]["message"], response.text
    assert local.post("/v1/confidence", {"questions": ["ok"]}).status_code == 200


def test_unparsable_body_and_unknown_route(servers):
    local, _ = servers
    bad_json = httpx.post(f"{local.url}/v1/confidence", content=b"{not json", headers={"content-type": "application/json"})
    assert bad_json.status_code == 400 and "not valid JSON" in bad_json.json()["error"]["message"]
    assert httpx.get(f"{local.url}/v1/nothing").status_code == 404
    assert httpx.get(f"{local.url}/v1/nothing").json()["error"]["message"] == "Not Found"


def test_openai_sdk_gets_the_completion_and_the_gate_verdict(servers, confidences):
    openai = pytest.importorskip("openai")
    local, retrieving = servers
    client = openai.OpenAI(base_url=f"{local.url}/v1", api_key="unused", max_retries=0)
    reply = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": KNOWN}], max_tokens=4)
    assert isinstance(reply.choices[0].message.content, str) and reply.choices[0].finish_reason in ("stop", "length")
    assert reply.model_extra["elical"]["decision"] == "answer"
    assert reply.model_extra["elical"]["confidence"] == pytest.approx(confidences[KNOWN], abs=1e-5)
    refusing = openai.OpenAI(base_url=f"{retrieving.url}/v1", api_key="unused", max_retries=0)
    parts = [{"type": "text", "text": UNKNOWN}]  # content as a list of parts, as the SDK allows
    refused = refusing.chat.completions.create(model="tiny", messages=[{"role": "user", "content": parts}])
    assert refused.choices[0].message.content == REFUSAL and refused.model_extra["elical"]["decision"] == "abstain"
    with pytest.raises(openai.BadRequestError, match="no user message"):
        client.chat.completions.create(model="tiny", messages=[{"role": "system", "content": "hi"}])


def test_failures_are_json_errors_without_internals():
    """A failing confidence pass is a plain 500, an unreachable upstream a 502: no traceback, no message
    text of the failure (which may hold paths or data)."""
    from fastapi.testclient import TestClient

    from elical.model.gate import Gate
    from elical.serve.app import ServeOptions, create_app
    from elical.serve.generation import Answerer

    def broken(questions: list[str]) -> list[float]:
        raise RuntimeError("secret /path/in/the/message")

    upstream = Answerer.upstream(f"http://127.0.0.1:{free_port()}/v1", "none")  # nothing listens there
    for score, path, status in ((broken, "/v1/confidence", 500), (lambda qs: [0.9] * len(qs), "/v1/chat/completions", 502)):
        app = create_app(score, upstream, Gate(0.5, "--tau", 0.0, 0), ServeOptions(model_name="m"))
        with TestClient(app, raise_server_exceptions=False) as client:
            body = {"questions": ["q"]} if path == "/v1/confidence" else {"messages": [{"role": "user", "content": "q"}]}
            response = client.post(path, json=body)
        assert response.status_code == status and "Traceback" not in response.text
        assert "secret" not in response.text and "127.0.0.1" not in response.text
        assert response.json()["error"]["type"] in ("server_error", "upstream_error")


def test_chat_reports_token_usage_and_models_their_creation_time(servers, trained_model_dir):
    import time

    from elical.model.model_folder import MODEL_CONFIG_NAME, find_model_folder

    local, retrieving = servers
    models = httpx.get(f"{local.url}/v1/models").json()["data"][0]
    saved = find_model_folder(trained_model_dir) / MODEL_CONFIG_NAME
    assert models["created"] == int(saved.stat().st_mtime) and 0 < models["created"] <= time.time()
    body = {"messages": [{"role": "user", "content": KNOWN}], "max_tokens": 3}
    usage = local.post("/v1/chat/completions", body).json()["usage"]
    assert usage["prompt_tokens"] > 0 and 1 <= usage["completion_tokens"] <= 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    retrieved = retrieving.post("/v1/chat/completions", body).json()  # through the upstream: its own counts
    assert retrieved["elical"]["decision"] == "retrieve" and retrieved["usage"]["prompt_tokens"] > usage["prompt_tokens"]
    abstained = retrieving.post("/v1/chat/completions", {"messages": [{"role": "user", "content": UNKNOWN}]}).json()
    assert abstained["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    openai = pytest.importorskip("openai")
    reply = openai.OpenAI(base_url=f"{local.url}/v1", api_key="unused", max_retries=0).chat.completions.create(
        model="tiny", messages=body["messages"], max_tokens=3)
    assert reply.usage is not None and reply.usage.total_tokens == usage["total_tokens"]
