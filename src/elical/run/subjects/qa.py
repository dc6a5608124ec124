"""The ``qa`` subject: any QA data, the paper's setting. A training pool (every question annotated, labels
drawn from it by budget) and evaluation sets (in-domain, OOD, multiple choice), kept apart by question.

A source named in both ``pool`` and ``eval`` is split by question: evaluation takes
``questions.max_eval_per_dataset`` of its questions (or ``qa.eval_share`` of them when there is no cap),
the pool the rest. Any other pool question whose normalised text is also evaluated is dropped from the
pool, with a note. Pool sources are the pool whatever their file names say (``nq_test.jsonl`` too).
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from elical.data.items import QAItem
from elical.records import Record
from elical.run.config import QAConfig
from elical.run.subjects.subject import Subject, subsample

if TYPE_CHECKING:
    from elical.run.config import RunConfig


class _Question(Protocol):
    question: str
    dataset: str


QT = TypeVar("QT", bound=_Question)  # a QAItem to annotate, or a Record already annotated


def question_key(question: str) -> str:
    """The normalised question text that decides whether two questions are the same one."""
    text = unicodedata.normalize("NFKC", question).casefold()
    return re.sub(r"\W+", " ", text).strip()


def _load(source: str) -> list[QAItem]:
    from elical.data.loaders import load_items

    return load_items(source)


def _split_shared(items: list[QAItem], n_eval: int | None, share: float, seed: int) -> tuple[list[QAItem], list[QAItem]]:
    """A source in both pool and eval, split by question text: (pool part, eval part)."""
    keys = sorted({question_key(it.question) for it in items})
    random.Random(f"{seed}:{items[0].dataset}").shuffle(keys)
    n = min(len(keys) - 1, n_eval if n_eval is not None else round(share * len(keys)))
    held = set(keys[:max(1, n)])
    pool = [it for it in items if question_key(it.question) not in held]
    return pool, [it for it in items if question_key(it.question) in held]


def gather_questions(qa: QAConfig, max_eval: int | None, seed: int) -> tuple[list[QAItem], list[QAItem]]:
    """(pool items, split 'train'; eval items, split 'test') of the pool and eval sources; a source in both
    is split by question."""
    pool: list[QAItem] = []
    evaluated: list[QAItem] = []
    for source in dict.fromkeys(qa.pool + qa.eval):
        items = _load(source)
        if source in qa.pool and source in qa.eval:
            part_pool, part_eval = _split_shared(items, max_eval, qa.eval_share, seed)
        else:
            part_pool, part_eval = (items, []) if source in qa.pool else ([], items)
        pool += [replace(it, split="train", meta={**it.meta, "source": source}) for it in part_pool]
        evaluated += [replace(it, split="test", meta={**it.meta, "source": source}) for it in part_eval]
    return pool, evaluated


def gather_records(qa: QAConfig) -> tuple[list[Record], list[Record]]:
    """(pool records, eval records) of already-annotated files: a file whose name says ``train`` is pool."""
    from elical.records import read_records

    records = read_records(qa.records, require=("greedy_correctness",))
    return [r for r in records if r.split == "train"], [r for r in records if r.split != "train"]


def apart(pool: Sequence[QT], evaluated: Sequence[QT], log: Callable[[str], None]) -> tuple[list[QT], list[QT]]:
    """Pool and evaluation without shared questions (normalised text): a question evaluated is dropped from
    the pool, with a note; inside each side a (dataset, question) pair is kept once."""
    held = {question_key(it.question) for it in evaluated}
    kept = [it for it in pool if question_key(it.question) not in held]
    if len(kept) < len(pool):
        log(f"qa: {len(pool) - len(kept)} pool question(s) are also evaluated and were dropped from the pool")
    return _unique(kept), _unique(evaluated)


def _unique(items: Sequence[QT]) -> list[QT]:
    """Each (dataset, question) once: a question repeated inside one split is asked once."""
    seen: set[tuple[str, str]] = set()
    out = []
    for it in items:
        key = (it.dataset, question_key(it.question))
        if key not in seen:
            seen.add(key)
            out.append(it)
    return out


def qa_subject(cfg: RunConfig, log: Callable[[str], None] = print) -> Subject:
    """The run's questions from its ``qa:`` section, answered by ``cfg.model`` (or already annotated)."""
    from elical.evaluation.evaluate import DATASET_GROUPS

    qa, q = cfg.qa, cfg.questions
    if qa.records and (qa.pool or qa.eval):
        raise ValueError("subject qa: give qa.records (already annotated) or qa.pool and qa.eval, not both")
    if not qa.records and not (qa.pool and qa.eval):
        raise ValueError("subject qa: name the training pool (qa.pool) and the evaluation sets (qa.eval), "
                         "or annotated records (qa.records)")
    if not cfg.model:
        raise ValueError("subject qa: set `model` (an alias such as smollm2, a folder, or a hub name)")
    pool, evaluated = (apart(*gather_records(qa), log) if qa.records
                       else apart(*gather_questions(qa, q.max_eval_per_dataset, q.seed), log))
    items: list[Any] = subsample([*pool, *evaluated], q.max_train, q.max_eval_per_dataset, q.seed)
    groups = {it.dataset: qa.groups.get(it.dataset) or DATASET_GROUPS.get(it.dataset.lower(), "other")
              for it in items if it.split != "train"}
    info = {"pool_sources": qa.pool, "eval_sources": qa.eval, "record_sources": qa.records,
            "pool_questions": sum(it.split == "train" for it in items)}
    if qa.records:
        return Subject(model=cfg.model, items=[], groups=groups, info=info, records=items)
    return Subject(model=cfg.model, items=items, groups=groups, info=info)
