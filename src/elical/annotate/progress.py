"""A rich progress bar for annotation: questions done, rate and time left."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def annotate_progress(total: int, done: int = 0, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; shows questions/s and ETA when enabled (a no-op otherwise)."""
    if not enabled:
        yield lambda n: None
        return
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
