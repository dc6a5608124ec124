"""A micro-batcher: concurrent confidence requests wait a few milliseconds so that one forward pass
scores all their questions together (one packed batch instead of one pass per request), and a large
request is split into passes that take turns with the others (it cannot hold the queue)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

Scorer = Callable[[list[str]], "np.ndarray | Sequence[float]"]
Cost = Callable[[str], int]  # what scoring one question costs, in the units of max_cost (tokens, characters)


@dataclass
class _Pending:
    questions: list[str]
    cost: int
    future: asyncio.Future[list[float]]


class MicroBatcher:
    """Collects requests for up to ``max_wait_ms``, then runs ``scorer`` once on up to ``max_questions``
    questions of at most ``max_cost`` in all (each question costs ``cost(question)``; one dearer than that
    is scored alone) in a worker thread (the event loop keeps serving), and hands each request its share.

    A request larger than one pass is split into passes; its next pass queues behind whatever arrived
    meanwhile, so a one-question request waits for at most the pass running when it came. One pass runs
    at a time, so the model is never used by two threads at once. Where a pass fails, each request of it
    is scored alone: a bad request fails by itself."""

    def __init__(self, scorer: Scorer, max_questions: int = 64, max_wait_ms: float = 5.0,
                 max_cost: int = 1024, cost: Cost = len) -> None:
        if max_questions < 1 or max_cost < 1 or max_wait_ms < 0:
            raise ValueError("need max_questions >= 1, max_cost >= 1 and max_wait_ms >= 0; got "
                             f"{max_questions}, {max_cost} and {max_wait_ms}")
        self.scorer = scorer
        self.max_questions = max_questions
        self.max_cost = max_cost
        self.cost = cost
        self.max_wait = max_wait_ms / 1000
        self.passes = 0  # confidence passes run so far, and the questions they scored (see /health)
        self.scored = 0
        self._waiting: deque[_Pending] = deque()
        self._arrived: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the worker on the running event loop (call from the app's startup)."""
        self._arrived = asyncio.Event()
        self._worker = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop the worker; requests still waiting get a RuntimeError."""
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        while self._waiting:
            self._waiting.popleft().future.set_exception(RuntimeError("the server is shutting down"))

    async def confidence(self, questions: Sequence[str]) -> list[float]:
        """The confidence of each question, scored together with whatever else arrives meanwhile; one
        pass of this request at a time."""
        scores: list[float] = []
        for part, cost in self._parts(questions):
            scores += await self._submit(part, cost)
        return scores

    def _parts(self, questions: Sequence[str]) -> Iterator[tuple[list[str], int]]:
        """Consecutive runs of ``questions`` that each fit one pass, with their cost."""
        part: list[str] = []
        total = 0
        for question in questions:
            cost = self.cost(question)
            if part and (len(part) == self.max_questions or total + cost > self.max_cost):
                yield part, total
                part, total = [], 0
            part.append(question)
            total += cost
        if part:
            yield part, total

    async def _submit(self, questions: list[str], cost: int) -> list[float]:
        """Queue one pass's worth of questions and wait for their scores."""
        if self._arrived is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        future: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Pending(questions, cost, future))
        self._arrived.set()
        return await future

    async def _collect(self) -> list[_Pending]:
        """The first waiting request, then those that arrived within the wait, in order, while they fit."""
        assert self._arrived is not None
        while not self._waiting:
            self._arrived.clear()
            await self._arrived.wait()
        batch = [self._waiting.popleft()]
        size, cost = len(batch[0].questions), batch[0].cost
        if self.max_wait and size < self.max_questions and cost < self.max_cost:
            await asyncio.sleep(self.max_wait)
        while (self._waiting and size + len(self._waiting[0].questions) <= self.max_questions
               and cost + self._waiting[0].cost <= self.max_cost):
            batch.append(self._waiting.popleft())
            size, cost = size + len(batch[-1].questions), cost + batch[-1].cost
        return batch

    async def _score(self, questions: list[str]) -> list[float]:
        """One pass of the scorer in a worker thread."""
        scores = [float(s) for s in await asyncio.to_thread(self.scorer, questions)]
        self.passes += 1
        self.scored += len(questions)
        return scores

    async def _run(self) -> None:
        while True:
            batch = [item for item in await self._collect() if not item.future.done()]  # skip abandoned requests
            if not batch:
                continue
            try:
                scores = await self._score([q for item in batch for q in item.questions])
            except Exception as err:  # noqa: BLE001 - the worker lives on
                await self._one_by_one(batch, err)
                continue
            start = 0
            for item in batch:
                if not item.future.done():  # a request whose client went away is skipped
                    item.future.set_result(scores[start : start + len(item.questions)])
                start += len(item.questions)

    async def _one_by_one(self, batch: list[_Pending], err: Exception) -> None:
        """After a failed pass, each request of the batch on its own, so that one bad request fails alone
        and the others batched with it get their confidences."""
        if len(batch) == 1:
            if not batch[0].future.done():
                batch[0].future.set_exception(err)
            return
        for item in batch:
            if item.future.done():
                continue
            try:
                item.future.set_result(await self._score(item.questions))
            except Exception as own:  # noqa: BLE001 - handed to this request only
                item.future.set_exception(own)
