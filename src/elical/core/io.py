"""Files written atomically: a reader never sees half a file, and a killed writer leaves the old one."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class atomic_write:
    """Context manager giving a temporary path that is renamed onto ``path`` on success."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")

    def __enter__(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            os.replace(self.tmp, self.path)
        elif self.tmp.exists():
            self.tmp.unlink()


def write_json(path: str | os.PathLike, payload: Mapping[str, Any] | None) -> None:
    """``payload`` as indented JSON (values JSON does not know as their ``str``), written atomically."""
    with atomic_write(path) as tmp:
        Path(tmp).write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
