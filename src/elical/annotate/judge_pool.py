"""The rule-based judges on several CPU cores: a batch's queries split over worker processes.

The rules (``match``, ``mention``, ``exact``, ``paper``, and the rules of the ``answer`` and ``verified``
judges, whose embeddings stay in this process) are pure Python, so threads would share one core through the GIL;
processes do not. Each worker runs the judge's own rules on its slice, so every decision is the one the
judge makes in this process; dedup and the on-disk cache stay in front (:class:`~elical.annotate.judges.CachedJudge`
wraps the pooled judge under the same name). Pays where judging would otherwise hold generation back:
many cores beside a fast GPU (``annotate.judges.workers``); on 2 cores there is no core to spare.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any, cast

from elical.annotate.consistency import Comparison
from elical.annotate.judge_registry import VERIFIED_RULES
from elical.annotate.judges import Judge, JudgeQuery, compare_query

MIN_SLICE = 64  # queries per worker below which a batch is judged here (the hand-off costs more)


def judge_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` fresh worker processes (spawned: no copy of this process's threads, model or GPU)."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def _slices(queries: Sequence[JudgeQuery], workers: int) -> list[list[JudgeQuery]]:
    """Consecutive slices of about equal size, at least :data:`MIN_SLICE` each, at most ``workers``."""
    count = max(1, min(workers, len(queries) // MIN_SLICE))
    size = -(-len(queries) // count)
    return [list(queries[i : i + size]) for i in range(0, len(queries), size)]


def _rules(judge: Judge, queries: list[JudgeQuery]) -> list[bool]:
    return judge.judge_batch(queries)


def _comparisons(queries: list[JudgeQuery]) -> list[Comparison]:
    return [compare_query(q) for q in queries]


def _spread(pool: Executor, workers: int, queries: Sequence[JudgeQuery], run: Callable[[list[JudgeQuery]], list[Any]],
            remote: Callable[..., list[Any]], *args: Any) -> list[Any]:
    """``run`` over the queries here when they are few, else ``remote(*args, slice)`` over the pool, in order."""
    slices = _slices(queries, workers)
    if len(slices) == 1:
        return run(list(queries))
    return [value for part in pool.map(remote, *([a] * len(slices) for a in args), slices) for value in part]


class PooledRules(Judge):
    """A rule-based judge (picklable, no model) whose batches are split over the pool's processes."""

    def __init__(self, inner: Judge, pool: Executor, workers: int) -> None:
        self.inner, self.pool, self.workers = inner, pool, workers
        self.name = inner.name

    def answer_key(self, query: JudgeQuery) -> str:
        return self.inner.answer_key(query)

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        return _spread(self.pool, self.workers, queries, self.inner.judge_batch, _rules, self.inner)


def pooled_answer_judge(inner: Any, pool: Executor, workers: int) -> Any:
    """The answer judge with its rules (:meth:`comparisons`) over the pool; its embeddings and its decision
    (:meth:`judge_batch`) are the judge's own, in this process."""
    serial = inner.comparisons

    def comparisons(queries: Sequence[JudgeQuery]) -> list[Comparison]:
        return _spread(pool, workers, queries, serial, _comparisons)

    setattr(inner, "comparisons", comparisons)  # noqa: B010 - this instance's rules, on the pool
    return inner


POOLED_RULES = {"match", "mention", "exact", "paper"}  # judge kinds that are rules alone


def pooled(kind: str, judge: Judge, pool: Executor, workers: int) -> Judge:
    """The judge of ``kind`` with its rules on the pool, or the judge itself where it has none to spread."""
    if kind in POOLED_RULES:
        return PooledRules(judge, pool, workers)
    if kind == "answer":
        return pooled_answer_judge(judge, pool, workers)
    if kind == "verified":  # its rules on the pool; the veto's embeddings here
        from elical.annotate.judge_models import VerifiedJudge

        verified = cast(VerifiedJudge, judge)
        verified.rules = {task: pooled(VERIFIED_RULES[task], rule, pool, workers) for task, rule in verified.rules.items()}
    return judge
