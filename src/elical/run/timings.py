"""A run's timings.json: wall and CPU seconds per step, kept across stopped and resumed invocations."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elical.core.io import atomic_write


class StepClock:
    """Times the steps of one invocation of a run and writes timings.json after every step.

    A step skipped on resume keeps the times it took when it ran; a step an earlier invocation stopped
    in (``partial``) adds the time spent on it then, unless ``redone`` (overwritten steps) discarded that
    work. CPU time (all threads of this process) is what a step costs on a machine nobody else uses;
    wall time on a shared CPU grows with the load."""

    def __init__(self, path: Path, redone: Sequence[str], subject_info: dict[str, Any],
                 started: tuple[float, float]) -> None:
        self.path = path
        self.earlier: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        self.carried: dict[str, dict[str, float]] = {
            step: took for step, took in self.earlier.get("partial", {}).items()
            if not any(name.split("-", 1)[0] == step for name in redone)}
        self.partial = dict(self.carried)
        self.timings: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}
        self.subject_info = subject_info
        self._wall, self._cpu = started  # perf_counter and process_time when the current step began

    def spent(self, step: str) -> dict[str, float]:
        """Wall and CPU seconds of ``step`` so far, earlier stopped invocations included."""
        before = self.carried.get(step, {})
        return {"wall": round(before.get("wall", 0.0) + time.perf_counter() - self._wall, 2),
                "cpu": round(before.get("cpu", 0.0) + time.process_time() - self._cpu, 2)}

    def lap(self, step: str, skipped: bool = False) -> None:
        """Close ``step`` (``skipped``: its outputs existed, it keeps its recorded times) and start the next."""
        keep = skipped and step in self.earlier.get("timings", {})
        took = self.spent(step)
        self.timings[step] = self.earlier["timings"][step] if keep else took["wall"]
        self.cpu_seconds[step] = self.earlier.get("cpu_seconds", {}).get(step, 0.0) if keep else took["cpu"]
        self.partial.pop(step, None)
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        self.write()

    def progress(self, step: str) -> None:
        """Record the time spent on an unfinished step, for a later resumed invocation to add."""
        self.partial[step] = self.spent(step)
        self.write()

    def write(self) -> None:
        """timings.json now, so a crashed or resumed run still knows what each step cost."""
        from elical.core.provenance import provenance

        meta = {"timings": self.timings, "total_seconds": round(sum(self.timings.values()), 1),
                "partial": self.partial, "cpu_seconds": self.cpu_seconds,
                "total_cpu_seconds": round(sum(self.cpu_seconds.values()), 1),
                "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
                "subject": self.subject_info, "cpu_count": os.cpu_count(), **provenance()}
        with atomic_write(self.path) as tmp:
            tmp.write_text(json.dumps(meta, indent=2))
