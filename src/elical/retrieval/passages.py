"""Passages of a retrieval corpus and their JSONL file: one ``{"id", "text", optional "title"}`` per line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from elical.core.inputs import InputError, one_line
from elical.core.io import atomic_write
from elical.core.strict_json import JsonError, loads


@dataclass(frozen=True)
class Passage:
    """One retrievable text; ``title`` (a page or entity name) is indexed with the text."""

    id: str
    text: str
    title: str | None = None

    def indexed_text(self) -> str:
        """What the index reads: the title, then the text."""
        return f"{self.title}. {self.text}" if self.title else self.text


class _PassageRow(BaseModel):
    """The checks of one corpus line (other keys are ignored)."""

    model_config = ConfigDict(extra="ignore")

    id: str | int
    text: str
    title: str | None = None

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


def read_passages(path: str | os.PathLike) -> list[Passage]:
    """The passages of a JSONL corpus; a bad line is an InputError naming file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: corpus file not found (expected JSONL lines {{\"id\", \"text\", \"title\"}})")
    passages: list[Passage] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = _PassageRow.model_validate(loads(line))
            except JsonError as err:
                raise InputError(f"{path}:{line_no}: not valid JSON ({err.message})") from None
            except ValidationError as err:
                raise InputError(f"{path}:{line_no}: {one_line(err)}") from None
            key = str(row.id)
            if key in seen:
                raise InputError(f"{path}:{line_no}: id: {key!r} repeats the id of line {seen[key]}")
            seen[key] = line_no
            passages.append(Passage(key, row.text, row.title))
    if not passages:
        raise InputError(f"{path}: no passages in the corpus file")
    return passages


def write_passages(passages: Iterable[Passage], path: str | os.PathLike) -> Path:
    """Write passages as JSONL atomically (``title`` left out where there is none)."""
    path = Path(path)
    lines = [json.dumps({k: v for k, v in asdict(p).items() if v is not None}, ensure_ascii=False) for p in passages]
    with atomic_write(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
