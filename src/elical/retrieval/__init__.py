"""Adaptive retrieval: a BM25 retriever over a passage corpus, the subjects' corpora, retrieval-augmented
answers, and the evaluation of confidence-gated retrieval and of abstention (risk-coverage, AURC).

Needs the ``retrieval`` extra (bm25s): ``pip install 'elical[retrieval]'``.
"""

from elical.retrieval.answer import RetrievedAnswers, answer_with_retrieval
from elical.retrieval.augment import augmented_prompt, record_item
from elical.retrieval.config import RetrievalSettings
from elical.retrieval.corpora import geo_passages, packaged_world, subject_passages, world_passages
from elical.retrieval.evaluate import (
    RetrievalOutcome,
    gated_curve,
    retrieval_outcome,
    retrievals_needed,
    risk_coverage_table,
)
from elical.retrieval.index import Retriever
from elical.retrieval.passages import Passage, read_passages, write_passages

__all__ = [
    "Passage", "RetrievalOutcome", "RetrievalSettings", "RetrievedAnswers", "Retriever", "answer_with_retrieval",
    "augmented_prompt", "gated_curve", "geo_passages", "packaged_world", "read_passages", "record_item",
    "retrieval_outcome", "retrievals_needed", "risk_coverage_table", "subject_passages", "world_passages",
    "write_passages",
]
