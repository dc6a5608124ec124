"""Answers with retrieval: search the corpus for each question, answer the augmented prompt, judge the answer.

Generation and judging are annotate's own calls (``generate_safely``, ``Judge.judge_batch``), so an
answer with retrieval is made and judged exactly as the greedy answer without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elical.annotate.backends.base import Backend
from elical.annotate.judges import Judge, JudgeQuery
from elical.annotate.pipeline import Failure, generate_safely
from elical.records import Record
from elical.retrieval.augment import augmented_prompt, record_item
from elical.retrieval.config import RetrievalSettings
from elical.retrieval.index import Retriever


@dataclass
class RetrievedAnswers:
    """Per record: the passages retrieved, the answer (None where generation failed) and its correctness
    (a failed generation counts as wrong)."""

    passages: list[list[str]]
    answers: list[str | None]
    correct: list[int]

    @property
    def failures(self) -> int:
        return sum(a is None for a in self.answers)


def answer_with_retrieval(records: Sequence[Record], retriever: Retriever, backend: Backend, judge: Judge,
                          settings: RetrievalSettings | None = None) -> RetrievedAnswers:
    """Answer every record's question from its top-``k`` passages and judge the answers against the gold."""
    settings = settings or RetrievalSettings()
    items = [record_item(r) for r in records]
    found = retriever.search([item.question for item in items], settings.k)
    prompts = [augmented_prompt(item, passages, settings.prompts) for item, passages in zip(items, found)]
    answers: list[str | None] = []
    for start in range(0, len(prompts), settings.batch_size):
        batch = generate_safely(backend, prompts[start : start + settings.batch_size], settings.generation(),
                                settings.retries)
        answers.extend(None if isinstance(g, Failure) else g[0].text for g in batch)
    queries = [JudgeQuery("correctness", item.question, answer, tuple(item.answers),
                          tuple(item.choices) if item.choices else None)
               for item, answer in zip(items, answers) if answer is not None]
    verdicts = iter(judge.judge_batch(queries) if queries else [])
    correct = [0 if answer is None else int(next(verdicts)) for answer in answers]
    return RetrievedAnswers([[p.id for p in ps] for ps in found], answers, correct)
