"""A micro-batcher: concurrent confidence requests wait a few milliseconds so that one forward pass
scores all their questions together (one packed batch instead of one pass per request)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Scorer = Callable[[list[str]], "np.ndarray | Sequence[float]"]


@dataclass
class _Pending:
    questions: list[str]
    future: asyncio.Future[list[float]]


class MicroBatcher:
    """Collects requests for up to ``max_wait_ms`` or ``max_questions`` questions, then runs ``scorer``
    once on all of them in a worker thread (the event loop keeps serving) and hands each request its
    share. One batch runs at a time, so the model is never used by two threads at once. Where a pass
    fails, each request of it is scored alone: a bad request fails by itself."""

    def __init__(self, scorer: Scorer, max_questions: int = 64, max_wait_ms: float = 5.0) -> None:
        if max_questions < 1 or max_wait_ms < 0:
            raise ValueError(f"need max_questions >= 1 and max_wait_ms >= 0; got {max_questions} and {max_wait_ms}")
        self.scorer = scorer
        self.max_questions = max_questions
        self.max_wait = max_wait_ms / 1000
        self.passes = 0  # confidence passes run so far, and the questions they scored (see /health)
        self.scored = 0
        self._queue: asyncio.Queue[_Pending] | None = None
        self._worker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the worker on the running event loop (call from the app's startup)."""
        self._queue = asyncio.Queue()
        self._worker = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop the worker; requests still waiting get a RuntimeError."""
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        while self._queue is not None and not self._queue.empty():
            self._queue.get_nowait().future.set_exception(RuntimeError("the server is shutting down"))

    async def confidence(self, questions: Sequence[str]) -> list[float]:
        """The confidence of each question, scored together with whatever else arrives meanwhile."""
        if self._queue is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        future: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(list(questions), future))
        return await future

    async def _collect(self, queue: asyncio.Queue[_Pending]) -> list[_Pending]:
        """The first waiting request, then those that arrived within the wait, up to the size limit."""
        batch = [await queue.get()]
        size = len(batch[0].questions)
        if self.max_wait and size < self.max_questions:
            await asyncio.sleep(self.max_wait)
        while size < self.max_questions and not queue.empty():
            batch.append(queue.get_nowait())
            size += len(batch[-1].questions)
        return batch

    async def _score(self, questions: list[str]) -> list[float]:
        """One pass of the scorer in a worker thread."""
        scores = [float(s) for s in await asyncio.to_thread(self.scorer, questions)]
        self.passes += 1
        self.scored += len(questions)
        return scores

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            batch = await self._collect(self._queue)
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
