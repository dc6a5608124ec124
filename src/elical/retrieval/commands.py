"""`elical retrieve-eval` from files: records + a confidence file -> curves, figures and a summary."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from elical.annotate.prompts import PromptConfig
from elical.records import Record
from elical.retrieval.config import RetrieveEvalConfig
from elical.retrieval.outcome import RetrievalOutcome, retrieval_outcome


def default_model(subject: str) -> str:
    """The answering model of a subject: the packaged world LM for world, SmolLM2 otherwise."""
    if subject == "world":
        from elical.world import default_lm_path

        return str(default_lm_path())
    return "smollm2"


def model_prompts(model: str) -> PromptConfig:
    """The wording a model answers with: a world LM folder's own (no system prompt), else the defaults."""
    from elical.world.lm import META_FILE

    meta_file = Path(model) / META_FILE
    if not meta_file.is_file():
        return PromptConfig()
    lm = json.loads(meta_file.read_text())["lm"]
    return PromptConfig(system=lm.get("system_prompt") or "", qa=lm["qa_template"], mmlu=lm["mc_template"])


def matched(records: Sequence[Record], confidence: dict[str, float]) -> tuple[list[Record], list[float], list[str]]:
    """The records that have a confidence, their confidences, and notes on what matched nothing."""
    kept = [r for r in records if r.id in confidence]
    if not kept:
        raise ValueError("no record id has a confidence in the predictions file (predictions of other questions?)")
    notes = []
    if len(kept) < len(records):
        notes.append(f"{len(records) - len(kept)} record(s) without a confidence left out")
    ids = {r.id for r in records}
    if extra := sum(1 for rid in confidence if rid not in ids):
        notes.append(f"{extra} prediction id(s) match no record (ignored)")
    return kept, [confidence[r.id] for r in kept], notes


def retrieve_eval_from_files(records: Sequence[str | os.PathLike], predictions: str | os.PathLike, *,
                             out: str | os.PathLike, config: RetrieveEvalConfig) -> RetrievalOutcome:
    """Answer the records' questions with retrieval from the subject's corpus (or ``config.retrieval.corpus``),
    evaluate gated retrieval and abstention by the predictions' confidences, and write everything to ``out``."""
    from elical.annotate.config import AnnotateConfig
    from elical.annotate.judge_factory import judge_maker
    from elical.annotate.run import build_backend
    from elical.model.predictions import read_predictions
    from elical.records import read_records
    from elical.retrieval.corpora import subject_passages
    from elical.retrieval.index import Retriever

    subject, settings = config.subject, config.retrieval
    model = config.model or default_model(subject)
    kept, confidence, notes = matched(read_records(list(records), require=("greedy_correctness",)),
                                      read_predictions(predictions).confidence)
    lm_path = model if subject == "world" else None
    retriever = Retriever(subject_passages(subject, settings.corpus, lm_path))
    annotate = AnnotateConfig(model=model, device=config.device, dtype=config.dtype, batch_size=settings.batch_size)
    backend = build_backend(annotate)
    settings = settings.model_copy(update={"prompts": model_prompts(model)})
    outcome = retrieval_outcome(kept, confidence, retriever, backend, judge_maker(annotate, backend)(config.judge),
                                settings)
    outcome.notes[:0] = notes
    outcome.write(out)
    return outcome
