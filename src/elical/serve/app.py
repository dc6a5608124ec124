"""The OpenAI-compatible HTTP app: confidence before generation, then answer, retrieve-and-answer or
abstain (the rule of :class:`elical.model.gate.Gate`).

Routes: ``GET /health``, ``GET /v1/models``, ``POST /v1/confidence`` ({"questions": [...]} ->
{"confidences": [...]}) and ``POST /v1/chat/completions`` (an OpenAI chat completion plus
``"elical": {"confidence", "decision", "threshold", "retrieve_below", "passages", "timing"}``; ``timing``
holds ``confidence_ms``, ``retrieval_ms`` and ``generation_ms``, null for a step not taken). With an API
key, every route but ``/health`` needs ``Authorization: Bearer <key>`` (401 otherwise). Bad requests and
requests over a limit of :class:`ServeOptions` get a 4xx response with an OpenAI-style JSON error naming
the limit and the value; unexpected failures a 500 without any traceback. ``/docs``, ``/redoc`` and
``/openapi.json`` exist only when asked for.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from elical.annotate.backends.base import Generation, Message, token_usage
from elical.annotate.backends.openai import ServerError
from elical.honesty.config import REFUSAL
from elical.model.gate import Gate
from elical.serve.generation import Answerer, with_passages
from elical.serve.micro_batch import Cost, MicroBatcher, Scorer

log = logging.getLogger("elical.serve")
Retrieve = Callable[[str], list[str]]


def _readable_text(text: str) -> str:
    """A question a tokenizer can read: not blank, and valid Unicode (no lone surrogate)."""
    if not text.strip():
        raise ValueError("must not be blank")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:  # a lone surrogate ("\ud800") is no text a tokenizer can read
        raise ValueError(f"is not valid Unicode text (at character {err.start}: {text[err.start]!r})") from None
    return text


Question = Annotated[str, AfterValidator(_readable_text)]


@dataclass(frozen=True)
class ServeOptions:
    """What the app serves under, its API key (None: open) and its limits."""

    model_name: str
    refusal: str = REFUSAL
    created: int = field(default_factory=lambda: int(time.time()))  # /v1/models: when the model was saved (Unix time)
    api_key: str | None = field(default=None, repr=False)
    docs: bool = False  # serve /docs, /redoc and /openapi.json
    max_body_bytes: int = 8 * 1024 * 1024  # per request body (413 above)
    max_questions: int = 256  # per /v1/confidence request (413 above)
    max_question_chars: int = 20_000  # per question, and per chat's last user message (400 above)
    batch_questions: int = 64  # per confidence forward pass
    batch_tokens: int = 1024  # per confidence forward pass, as the cost function estimates them
    batch_wait_ms: float = 5.0  # how long a confidence request waits for others to batch with

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_questions", "max_question_chars", "batch_questions", "batch_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must not be empty (None: no key)")


class ConfidenceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    questions: list[Question] = Field(min_length=1)


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        """The message's text (text parts joined; other parts ignored)."""
        if isinstance(self.content, list):
            return "\n".join(p.text for p in self.content if p.type == "text" and p.text)
        return self.content or ""

    def plain(self) -> Message:
        """As a backend reads it: system for the developer role, text content."""
        return {"role": "system" if self.role == "developer" else self.role, "content": self.text()}


class ChatRequest(BaseModel):
    """An OpenAI chat completion request; sampling options are accepted and ignored (answers are greedy)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    n: int = 1
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    max_completion_tokens: StrictInt | None = Field(default=None, ge=1)


class ApiError(StarletteHTTPException):
    """An HTTP error about one field of the request (``param``)."""

    def __init__(self, status_code: int, message: str, param: str | None = None) -> None:
        super().__init__(status_code, message)
        self.param = param


def error_body(message: str, kind: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error object."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class BearerAuth:
    """ASGI middleware: a 401 for every HTTP request but those to ``open_paths`` that lacks
    ``Authorization: Bearer <key>`` (compared in constant time)."""

    def __init__(self, app: ASGIApp, key: str, open_paths: frozenset[str] = frozenset({"/health"})) -> None:
        self.app = app
        self.key = key.encode()
        self.open_paths = open_paths

    def _authorized(self, scope: Scope) -> bool | None:
        """True for the right key, False for a wrong one, None when no bearer key was sent."""
        sent = dict(scope["headers"]).get(b"authorization")
        scheme, _, token = (sent or b"").strip().partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            return None
        return hmac.compare_digest(token.strip(), self.key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            return await self.app(scope, receive, send)
        authorized = self._authorized(scope)
        if authorized:
            return await self.app(scope, receive, send)
        message = ("no API key: send the header 'Authorization: Bearer <key>'" if authorized is None
                   else "invalid API key in the Authorization header")
        response = JSONResponse(error_body(message, param="authorization", code="invalid_api_key"), status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)


class BodyLimit:
    """ASGI middleware: a 413 for an HTTP request body over ``max_bytes``, told by its Content-Length or
    found while reading it (a chunked body); the app gets a body within the limit read in full."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, size: str) -> None:
        message = f"request body: {size}, over the limit of {self.max_bytes} bytes"
        response = JSONResponse(error_body(message, param="body"), status_code=413)  # uvicorn drains the rest
        await response(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self._too_large(scope, receive, send, f"{int(declared)} bytes")
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                return await self._too_large(scope, receive, send, f"more than {self.max_bytes} bytes")
        sent = False

        async def replay() -> AsgiMessage:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


def _validation_message(err: RequestValidationError) -> tuple[str, str | None]:
    """``field: problem`` for each invalid field of the body, and the first field's name."""
    problems, first = [], None
    for e in err.errors():
        loc = [str(p) for p in e["loc"] if p != "body"]
        if e["type"] == "json_invalid":
            return f"the request body is not valid JSON ({e.get('ctx', {}).get('error', 'decode error')})", None
        if not loc and e["type"] in ("model_attributes_type", "dict_type"):
            return "the request body must be a JSON object (sent with Content-Type: application/json)", None
        where = ".".join(loc)
        first = first or where or None
        message = e["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems), first


def add_error_handlers(app: FastAPI) -> None:
    """4xx JSON errors for bad requests; a plain 500 (traceback only in the server log) for the rest."""

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(err)
        return JSONResponse(error_body(message, param=param), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, err: StarletteHTTPException) -> JSONResponse:
        kind = "invalid_request_error" if err.status_code < 500 else "server_error"
        return JSONResponse(error_body(str(err.detail), kind, getattr(err, "param", None)), status_code=err.status_code)

    @app.exception_handler(ServerError)
    async def upstream_failed(_: Request, err: ServerError) -> JSONResponse:
        log.error("upstream server failed: %s", err)  # its address stays in the server's log
        return JSONResponse(error_body("the upstream server failed to answer", "upstream_error"), status_code=502)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, err: Exception) -> JSONResponse:
        log.error("request failed", exc_info=err)
        return JSONResponse(error_body(f"internal server error ({type(err).__name__})", "server_error"),
                            status_code=500)


def last_user_question(messages: list[ChatMessage], max_chars: int) -> str:
    """The text of the last user message; a 400 when there is none, or it is blank or over ``max_chars``."""
    users = [m for m in messages if m.role == "user"]
    if not users:
        raise HTTPException(400, "messages: no user message to answer")
    question = users[-1].text()
    try:
        _readable_text(question)
    except ValueError as err:
        raise HTTPException(400, f"messages: the last user message {err}") from None
    if len(question) > max_chars:
        raise ApiError(400, f"messages: the last user message has {len(question)} characters, over the limit of "
                            f"{max_chars} characters per question", "messages")
    return question


def check_questions(questions: list[str], options: ServeOptions) -> None:
    """A 413 for more questions than ``options.max_questions``, a 400 for one over ``max_question_chars``."""
    if len(questions) > options.max_questions:
        raise ApiError(413, f"questions: {len(questions)} questions, at most {options.max_questions} per request",
                       "questions")
    for i, question in enumerate(questions):
        if len(question) > options.max_question_chars:
            raise ApiError(400, f"questions.{i}: {len(question)} characters, over the limit of "
                                f"{options.max_question_chars} characters per question", f"questions.{i}")


def check_max_tokens(body: ChatRequest, limit: int) -> None:
    """A 400 for ``max_tokens`` or ``max_completion_tokens`` above the server's ``limit``."""
    for param in ("max_tokens", "max_completion_tokens"):
        value = getattr(body, param)
        if value is not None and value > limit:
            digits = len(str(value))  # JSON ints reach Python's 4,300-digit limit, floats only 309 digits
            shown = str(value) if digits <= 15 else f"{value:.3g}" if digits <= 300 else f"a {digits}-digit number"
            raise ApiError(400, f"{param}: {shown}, over this server's limit of {limit} tokens", param)


def _finite(value: float | None) -> float | None:
    """JSON has no infinity: an infinite threshold (never answer) is null."""
    return value if value is not None and math.isfinite(value) else None


def create_app(score: Scorer, answerer: Answerer, gate: Gate, options: ServeOptions,
               retrieve: Retrieve | None = None, cost: Cost = len) -> FastAPI:
    """The app: ``score`` gives confidences of questions (batched across requests; ``cost`` estimates a
    question's tokens, default its characters), ``answerer`` answers, ``retrieve`` (None: no corpus)
    gives passages for a question."""
    batcher = MicroBatcher(score, options.batch_questions, options.batch_wait_ms, options.batch_tokens, cost)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="elical serve", lifespan=lifespan, docs_url="/docs" if options.docs else None,
                  redoc_url="/redoc" if options.docs else None, openapi_url="/openapi.json" if options.docs else None)
    app.state.batcher = batcher
    add_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=options.max_body_bytes)
    if options.api_key is not None:
        app.add_middleware(BearerAuth, key=options.api_key)  # added last: runs first, before any body is read

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": options.model_name, "tau": _finite(gate.tau),
                "retrieve_below": gate.retrieve_below if retrieve else None,
                "confidence_passes": batcher.passes, "questions_scored": batcher.scored}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": options.model_name, "object": "model", "created": options.created,
                                            "owned_by": "elical"}]}

    @app.post("/v1/confidence")
    async def confidence(body: ConfidenceRequest) -> dict[str, list[float]]:
        check_questions(body.questions, options)
        return {"confidences": await batcher.confidence(body.questions)}

    @app.post("/v1/chat/completions")
    async def chat(body: ChatRequest) -> dict[str, Any]:
        if body.stream:
            raise HTTPException(400, "stream: streaming is not supported; send stream: false")
        if body.n != 1:
            raise HTTPException(400, f"n: only one answer per request is supported, got {body.n}")
        check_max_tokens(body, answerer.max_new_tokens)
        question = last_user_question(body.messages, options.max_question_chars)
        start = time.perf_counter()
        [conf] = await batcher.confidence([question])
        timing: dict[str, float | None] = {"confidence_ms": _ms_since(start), "retrieval_ms": None,
                                           "generation_ms": None}
        decision = gate.decide(conf, can_retrieve=retrieve is not None)
        passages: list[str] = []
        usage: dict[str, int] | None = token_usage(0, 0)  # abstaining runs no generation
        text, finish = options.refusal, "stop"
        if decision != "abstain":
            answer, passages = await respond(body, question, answerer, retrieve if decision == "retrieve" else None,
                                             timing)
            text, finish, usage = answer.text, answer.finish_reason, answer.usage
        verdict = {"confidence": conf, "decision": decision, "threshold": _finite(gate.tau),
                   "retrieve_below": gate.retrieve_below if retrieve else None, "passages": passages,
                   "timing": timing}
        return completion(options.model_name, text, finish, verdict, usage)

    return app


async def respond(body: ChatRequest, question: str, answerer: Answerer, retrieve: Retrieve | None,
                  timing: dict[str, float | None]) -> tuple[Generation, list[str]]:
    """(answer, passages): the chat answered, after retrieving passages for the question
    when ``retrieve`` is given; model calls run in worker threads. Each step's wall time goes into
    ``timing`` (generation includes waiting for an in-process model busy with another request)."""
    messages = [m.plain() for m in body.messages]
    passages: list[str] = []
    if retrieve is not None:
        start = time.perf_counter()
        passages = await asyncio.to_thread(retrieve, question)
        timing["retrieval_ms"] = _ms_since(start)
        messages = with_passages(messages, passages)
    start = time.perf_counter()
    answer = await asyncio.to_thread(answerer.answer, messages, body.max_completion_tokens or body.max_tokens)
    timing["generation_ms"] = _ms_since(start)
    return answer, passages


def _ms_since(start: float) -> float:
    """Milliseconds since ``start`` (a :func:`time.perf_counter` reading), to 0.01 ms."""
    return round((time.perf_counter() - start) * 1000, 2)


def completion(model: str, text: str, finish_reason: str, verdict: dict[str, Any],
               usage: dict[str, int] | None = None) -> dict[str, Any]:
    """A chat completion object (``usage`` null where the upstream server gave none) with the gate's verdict
    under ``elical``."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason,
                     "logprobs": None}],
        "usage": usage,
        "elical": verdict,
    }
