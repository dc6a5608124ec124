"""The stages of an annotation run, and their overlap: generate a batch, judge it, write its chunk.

:func:`batch_plan` fixes which questions are generated together before anything runs (the batches depend
on the shard's questions and the batch and chunk sizes only, never on timing or on where an earlier run
stopped), so the serial and the pipelined run, and a run resumed after a kill, generate the same batches
and so the same answers (a batch's sampling seed is derived from its prompts).

:class:`Behind` judges the answered batches in a thread while the caller generates the next ones and
writes the judged ones, with at most ``depth`` answered batches waiting (memory stays flat); :class:`InTurn`
is the serial path, one stage after the other. :class:`StageClock` sums each stage's busy seconds, recorded in the
shard's meta file, so a run says where its time went.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from types import TracebackType
from typing import Generic, TypeVar

from elical.data.items import QAItem

T = TypeVar("T")

PIPELINE_DEPTH = 2  # answered batches that may wait for the judges (each holds batch_size sequences)


def batch_plan(mine: Sequence[QAItem], done: set[str], per_step: int,
               chunk_size: int) -> list[tuple[list[QAItem], bool]]:
    """The batches still to annotate, each with whether it closes a chunk: the shard's questions in blocks
    of ``chunk_size``, each block cut into batches of ``per_step``, the questions in ``done`` left out. A
    rerun batches what is left as the first run did, so its answers are the uninterrupted run's."""
    plan: list[tuple[list[QAItem], bool]] = []
    for start in range(0, len(mine), chunk_size):
        block = mine[start : start + chunk_size]
        batches = [[it for it in block[i : i + per_step] if it.id not in done] for i in range(0, len(block), per_step)]
        batches = [b for b in batches if b]
        plan += [(b, j == len(batches) - 1) for j, b in enumerate(batches)]
    return plan


@dataclass
class StageClock:
    """Busy seconds of each stage, summed over batches: generating (answers), judging, writing shard
    files, and generation's wait for the judges (pipelined: the judging that generation could not hide)."""

    generate: float = 0.0
    judge: float = 0.0
    write: float = 0.0
    wait: float = 0.0

    @contextmanager
    def timing(self, stage: str) -> Iterator[None]:
        """Add the seconds the block takes to ``stage``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, stage, getattr(self, stage) + time.perf_counter() - start)

    def as_dict(self, wall: float) -> dict[str, float]:
        """Each stage's seconds and share of ``wall`` (pipelined, generate + judge may exceed wall)."""
        out: dict[str, float] = {"wall_s": round(wall, 3)}
        for stage in ("generate", "judge", "write", "wait"):
            seconds = getattr(self, stage)
            out[f"{stage}_s"] = round(seconds, 3)
            out[f"{stage}_share"] = round(seconds / wall, 4) if wall > 0 else 0.0
        return out


Answered = tuple[list[QAItem], bool, T]  # a batch, whether it closes a chunk, its records


class InTurn(Generic[T]):
    """The serial path: each answered batch judged as it is handed over."""

    def __init__(self, judge: Callable[[T], None]) -> None:
        self.judge = judge
        self.judged: list[Answered[T]] = []

    def __enter__(self) -> InTurn[T]:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        return None

    def put(self, item: Answered[T]) -> None:
        """Judge an answered batch now."""
        self.judge(item[2])
        self.judged.append(item)

    def ready(self) -> Iterator[Answered[T]]:
        """The batches judged since the last call, in order (an error of the judges is raised after the
        batches judged before it)."""
        out, self.judged = self.judged, []
        yield from out

    def rest(self) -> Iterator[Answered[T]]:
        """Every batch handed over and not yet returned, judged."""
        yield from self.ready()


class Behind(InTurn[T]):
    """Judges answered batches in a thread, behind the generation of the next ones (which stays in the
    calling thread: torch's CPU threads run fastest from the thread that made them, and a GPU's work stays
    in one thread). At most ``depth`` batches wait to be judged (``put`` blocks then), so memory stays
    flat; judged batches come back in order. An error of the judges is raised by the next call; leaving
    the block stops the thread after its current batch."""

    def __init__(self, judge: Callable[[T], None], depth: int = PIPELINE_DEPTH,
                 clock: StageClock | None = None) -> None:
        super().__init__(judge)
        self.clock = clock
        self.todo: queue.Queue[object] = queue.Queue(maxsize=max(1, depth))
        self.done: queue.Queue[object] = queue.Queue()
        self.waiting = 0  # handed over, not yet returned
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._work, name="elical-annotate-judge", daemon=True)

    def __enter__(self) -> Behind[T]:
        self.thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop.set()
        while self.thread.is_alive():  # the batch in flight is finished, the rest dropped
            try:
                self.todo.get_nowait()
            except queue.Empty:
                self.thread.join(0.05)

    def put(self, item: Answered[T]) -> None:
        with self._waiting():
            while self.thread.is_alive():
                try:
                    self.todo.put(item, timeout=0.1)
                    self.waiting += 1
                    return
                except queue.Full:
                    continue
        raise RuntimeError("the judging thread stopped")  # after an error of the judges, raised already

    def ready(self) -> Iterator[Answered[T]]:
        while True:
            try:
                item = self.done.get_nowait()
            except queue.Empty:
                return
            yield self._take(item)

    def rest(self) -> Iterator[Answered[T]]:
        yield from self.ready()
        while self.waiting:
            try:
                with self._waiting():
                    item = self.done.get(timeout=0.1)
            except queue.Empty:
                if not self.thread.is_alive() and self.done.empty():
                    return  # the judges stopped on an error, raised already
                continue
            yield self._take(item)

    def _take(self, item: object) -> Answered[T]:
        self.waiting -= 1
        if isinstance(item, BaseException):
            raise item
        return item  # type: ignore[return-value]

    def _waiting(self) -> AbstractContextManager[None]:
        """Generation's wait for the judges, on the clock when there is one."""
        return self.clock.timing("wait") if self.clock is not None else nullcontext()

    def _work(self) -> None:
        while not self.stop.is_set():
            try:
                item = self.todo.get(timeout=0.1)
            except queue.Empty:
                continue
            try:
                self.judge(item[2])  # type: ignore[index]
                self.done.put(item)
            except BaseException as err:  # noqa: BLE001 - handed to the calling thread, which raises it
                self.done.put(err)
                return
