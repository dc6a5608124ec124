"""Annotation progress: questions done, rate and time left, as a rich bar on a terminal and as plain
lines every ``every`` seconds elsewhere (nohup, Slurm, CI logs), so a long run is never silent."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

PROGRESS_EVERY = 30.0  # seconds between plain progress lines


@contextmanager
def annotate_progress(total: int, done: int = 0, enabled: bool = True, every: float = PROGRESS_EVERY,
                      stream: TextIO | None = None) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; shows questions/s and ETA when enabled (a no-op otherwise): a bar when
    ``stream`` (default stdout) is a terminal, else a plain line at most every ``every`` seconds."""
    out = stream or sys.stdout
    if not enabled:
        yield lambda n: None
    elif out.isatty():
        with _bar(total, done) as advance:
            yield advance
    else:
        yield PlainProgress(total, done, every, out).advance


class PlainProgress:
    """Plain progress lines: one at the start, one at most every ``every`` seconds, one at the end."""

    def __init__(self, total: int, done: int, every: float, out: TextIO) -> None:
        self.total, self.done, self.every, self.out = total, done, every, out
        self.start = self.last = time.monotonic()
        self.fresh = 0  # questions annotated by this process (the rate's numerator)
        self._line(f"annotating: {done}/{total} questions done, {total - done} to go")

    def advance(self, n: int) -> None:
        """Count ``n`` more questions done; print a line when ``every`` seconds passed or all are done."""
        self.done += n
        self.fresh += n
        now = time.monotonic()
        if now - self.last < self.every and self.done < self.total:
            return
        self.last = now
        elapsed = now - self.start
        rate = self.fresh / elapsed if elapsed > 0 else 0.0
        eta = f"ETA {_duration((self.total - self.done) / rate)}" if rate > 0 else "ETA unknown"
        share = 100 * self.done / self.total if self.total else 100.0
        self._line(f"annotating: {self.done}/{self.total} questions ({share:.0f} %), {rate:.3g} questions/s, "
                   f"elapsed {_duration(elapsed)}, {eta if self.done < self.total else 'done'}")

    def _line(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def _duration(seconds: float) -> str:
    """'1h 02m', '4m 05s' or '12s'."""
    s = round(seconds)
    return f"{s // 3600}h {s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m {s % 60:02d}s" if s >= 60 else f"{s}s"


@contextmanager
def _bar(total: int, done: int) -> Iterator[Callable[[int], None]]:
    """The rich bar of a terminal."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("annotating"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task("annotate", total=total, completed=done, rate="")

        def advance(n: int) -> None:
            bar.advance(task, n)
            speed = bar.tasks[0].speed
            bar.update(task, rate=f"{speed:.2f} q/s" if speed else "")

        yield advance
