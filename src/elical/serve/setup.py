"""Build the server's app from a model folder and the command-line options: the API key, the
confidence model, the gate (``gate.json``, options override it), the answering backend and the
retriever; and the warning for a server open beyond this machine."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import threading
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI

from elical.core.inputs import InputError
from elical.model.gate import Gate, load_gate
from elical.serve.app import Retrieve, ServeOptions, create_app
from elical.serve.generation import Answerer

if TYPE_CHECKING:
    from elical.model.network import ConfidenceModel


@dataclass(frozen=True)
class ServeConfig:
    """Everything ``elical serve`` is told."""

    model_dir: Path
    _: KW_ONLY  # every setting but the model folder by name
    tau: float | None = None
    retrieve_below: float | None = None
    corpus: Path | None = None
    upstream: str | None = None
    upstream_model: str | None = None
    upstream_api_key_env: str | None = None
    device: str = "auto"
    max_new_tokens: int = 256  # also the largest max_tokens a request may ask for
    passages: int = 3
    api_key_env: str | None = None  # environment variable holding the key clients must send
    docs: bool = ServeOptions.docs
    max_body_bytes: int = ServeOptions.max_body_bytes
    max_questions: int = ServeOptions.max_questions
    max_question_chars: int = ServeOptions.max_question_chars
    batch_tokens: int = ServeOptions.batch_tokens


def read_api_key(name: str) -> str:
    """The API key in the environment variable ``name``; an error when it is unset or blank."""
    key = os.environ.get(name)
    if key is None:
        raise InputError(f"--api-key-env: the environment variable {name} is not set")
    if not key.strip():
        raise InputError(f"--api-key-env: the environment variable {name} is empty")
    return key.strip()


def is_local(host: str) -> bool:
    """Whether ``host`` is this machine only: ``localhost`` or a loopback address."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, api_key_env: str | None, upstream: str | None) -> str | None:
    """The warning for a server that listens beyond this machine without an API key (louder when it
    answers through an upstream server, whose key it spends); None when there is nothing to warn of."""
    if api_key_env or is_local(host):
        return None
    if upstream:
        return (f"WARNING: listening on {host} without --api-key-env while answering through --upstream: anyone "
                "who can reach this port spends the upstream server's API key. Set --api-key-env NAME (clients "
                "then send 'Authorization: Bearer <key>') or listen on 127.0.0.1.")
    return (f"warning: listening on {host} without --api-key-env: anyone who can reach this port can use the "
            "server. Set --api-key-env NAME (clients then send 'Authorization: Bearer <key>') or listen on "
            "127.0.0.1.")


def token_bound(model: ConfidenceModel) -> Callable[[str], int]:
    """An upper bound on the tokens the model reads for a question: the prompt's own tokens plus one per
    byte of the question (no token is shorter than a byte), at most the model's ``max_length``. The
    batcher sizes its passes with it without tokenizing on the event loop."""
    from elical.model.network import qa_prompt

    empty = qa_prompt(model.tokenizer, "", model.config)
    overhead = len(model.tokenizer(empty, add_special_tokens=False)["input_ids"])
    cap = model.config.max_length

    def bound(question: str) -> int:
        return min(overhead + len(question.encode("utf-8", "surrogatepass")), cap)

    return bound


def resolve_gate(model_dir: Path, tau: float | None, retrieve_below: float | None, corpus: bool) -> Gate:
    """The folder's gate with ``tau``/``retrieve_below`` overriding it. Without a gate.json, ``tau`` is
    needed; with a corpus and no retrieval threshold anywhere, everything below tau is retrieved."""
    if retrieve_below is not None and not corpus:
        raise InputError("--retrieve-below needs --corpus (the passages to retrieve from)")
    for name, value in (("--tau", tau), ("--retrieve-below", retrieve_below)):
        if value is not None and not 0 <= value <= 1:
            raise InputError(f"{name}: expected a confidence threshold in [0, 1], got {value}")
    gate = load_gate(model_dir)
    if gate is None:
        if tau is None:
            raise InputError(f"{model_dir}: no gate.json (choose one with `elical gate`) and no --tau given")
        gate = Gate(tau, "--tau", float("nan"), 0)
    band = retrieve_below if retrieve_below is not None else gate.retrieve_below
    if corpus and band is None:
        band = 0.0
    chosen_tau = gate.tau if tau is None else tau
    if band is not None and band > chosen_tau:
        raise InputError(f"--retrieve-below {band} is above tau {chosen_tau}: the retrieval band is [retrieve-below, tau)")
    return dataclasses.replace(gate, tau=chosen_tau, retrieve_below=band)


def load_retriever(corpus: Path, k: int) -> Retrieve:
    """Passages for a question from a JSONL corpus or a saved retriever folder (BM25, top ``k``)."""
    from elical.retrieval.index import Retriever

    retriever = Retriever.load(corpus) if corpus.is_dir() else Retriever.from_jsonl(corpus)
    lock = threading.Lock()

    def retrieve(question: str) -> list[str]:
        with lock:
            [found] = retriever.search([question], k)
        return [p.indexed_text() for p in found]

    return retrieve


def build_app(config: ServeConfig) -> FastAPI:
    """Check the key and the limits, load the model, the gate, the answerer and the retriever, and wire
    them into the app."""
    from elical.model.model_folder import MODEL_CONFIG_NAME, find_model_folder
    from elical.model.network import ConfidenceModel

    api_key = read_api_key(config.api_key_env) if config.api_key_env else None
    if config.upstream and not config.upstream_model:
        raise InputError("--upstream needs --upstream-model (the model name the upstream server serves)")
    folder = find_model_folder(config.model_dir)
    saved = folder / MODEL_CONFIG_NAME
    options = ServeOptions(model_name=os.path.basename(os.path.normpath(config.model_dir)), api_key=api_key,
                           docs=config.docs, max_body_bytes=config.max_body_bytes, max_questions=config.max_questions,
                           max_question_chars=config.max_question_chars, batch_tokens=config.batch_tokens,
                           created=int(saved.stat().st_mtime) if saved.exists() else int(time.time()))
    gate = resolve_gate(folder, config.tau, config.retrieve_below, config.corpus is not None)
    retrieve = load_retriever(config.corpus, config.passages) if config.corpus else None
    model = ConfidenceModel.from_pretrained(folder, device=config.device)
    if config.upstream and config.upstream_model:
        answerer = Answerer.upstream(config.upstream, config.upstream_model, config.upstream_api_key_env,
                                     config.max_new_tokens)
    else:
        answerer = Answerer.local(model.config.base_model, str(next(model.parameters()).device), config.max_new_tokens)
    return create_app(model.confidence, answerer, gate, options, retrieve, token_bound(model))
