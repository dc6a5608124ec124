"""Adaptive retrieval: a BM25 retriever over a passage corpus, the subjects' corpora, retrieval-augmented
answers, and the evaluation of confidence-gated retrieval and of abstention (risk-coverage, AURC).

Needs the ``retrieval`` extra (bm25s): ``pip install 'elical[retrieval]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from elical.core._lazy import lazy_exports

if TYPE_CHECKING:
    from elical.retrieval.answer import RetrievedAnswers, answer_with_retrieval
    from elical.retrieval.augment import augmented_prompt, record_item
    from elical.retrieval.config import RetrievalSettings
    from elical.retrieval.corpora import geo_passages, packaged_world, subject_passages, world_passages
    from elical.retrieval.index import Retriever
    from elical.retrieval.outcome import (
        RetrievalOutcome,
        gated_curve,
        retrieval_outcome,
        retrievals_needed,
        risk_coverage_table,
    )
    from elical.retrieval.passages import Passage, read_passages, write_passages

_LAZY = {  # name -> the submodule that defines it, imported on first use (PEP 562)
    "RetrievedAnswers": "elical.retrieval.answer",
    "answer_with_retrieval": "elical.retrieval.answer",
    "augmented_prompt": "elical.retrieval.augment",
    "record_item": "elical.retrieval.augment",
    "RetrievalSettings": "elical.retrieval.config",
    "geo_passages": "elical.retrieval.corpora",
    "packaged_world": "elical.retrieval.corpora",
    "subject_passages": "elical.retrieval.corpora",
    "world_passages": "elical.retrieval.corpora",
    "RetrievalOutcome": "elical.retrieval.outcome",
    "gated_curve": "elical.retrieval.outcome",
    "retrieval_outcome": "elical.retrieval.outcome",
    "retrievals_needed": "elical.retrieval.outcome",
    "risk_coverage_table": "elical.retrieval.outcome",
    "Retriever": "elical.retrieval.index",
    "Passage": "elical.retrieval.passages",
    "read_passages": "elical.retrieval.passages",
    "write_passages": "elical.retrieval.passages",
}
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "Passage", "RetrievalOutcome", "RetrievalSettings", "RetrievedAnswers", "Retriever", "answer_with_retrieval",
    "augmented_prompt", "gated_curve", "geo_passages", "packaged_world", "read_passages", "record_item",
    "retrieval_outcome", "retrievals_needed", "risk_coverage_table", "subject_passages", "world_passages",
    "write_passages",
]
