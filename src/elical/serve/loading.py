"""Build the server's app from a model folder and the command-line options: the confidence model,
the gate (``gate.json``, options override it), the answering backend and the retriever."""

from __future__ import annotations

import dataclasses
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI

from elical.gate import Gate, load_gate
from elical.inputs import InputError
from elical.serve.app import Retrieve, ServeOptions, create_app
from elical.serve.generation import Answerer


@dataclass(frozen=True)
class ServeConfig:
    """Everything ``elical serve`` is told."""

    model_dir: Path
    tau: float | None = None
    retrieve_below: float | None = None
    corpus: Path | None = None
    upstream: str | None = None
    upstream_model: str | None = None
    upstream_api_key_env: str | None = None
    device: str = "auto"
    max_new_tokens: int = 256
    passages: int = 3


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
    """Load the model, the gate, the answerer and the retriever, and wire them into the app."""
    from elical.model import ConfidenceModel
    from elical.model_folder import find_model_folder

    if config.upstream and not config.upstream_model:
        raise InputError("--upstream needs --upstream-model (the model name the upstream server serves)")
    folder = find_model_folder(config.model_dir)
    gate = resolve_gate(folder, config.tau, config.retrieve_below, config.corpus is not None)
    retrieve = load_retriever(config.corpus, config.passages) if config.corpus else None
    model = ConfidenceModel.from_pretrained(folder, device=config.device)
    if config.upstream and config.upstream_model:
        answerer = Answerer.upstream(config.upstream, config.upstream_model, config.upstream_api_key_env,
                                     config.max_new_tokens)
    else:
        answerer = Answerer.local(model.config.base_model, str(next(model.parameters()).device), config.max_new_tokens)
    name = os.path.basename(os.path.normpath(config.model_dir))
    return create_app(model.confidence, answerer, gate, ServeOptions(model_name=name), retrieve)
