"""YAML in and out for the pydantic configs (annotate, train, honesty, run): one reader, one writer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel
from typing_extensions import Self


def read_yaml_mapping(path: str | os.PathLike, expected: str = "a mapping of settings") -> dict[str, Any]:
    """A YAML file's top-level mapping (an empty file is ``{}``); anything else is an error naming the file."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected {expected}, got {type(data).__name__}")
    return data


class YamlConfig(BaseModel):
    """A config read from and written to YAML, so every output folder says what produced it."""

    yaml_section: ClassVar[str | None] = None  # a file may hold the settings under this key instead

    @classmethod
    def from_yaml(cls, path: str | os.PathLike, **overrides: Any) -> Self:
        """Read a YAML file (the ``yaml_section`` or the bare settings), then apply the non-None overrides."""
        data = read_yaml_mapping(path)
        if cls.yaml_section and isinstance(data.get(cls.yaml_section), dict):
            data = data[cls.yaml_section]
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(data)

    def to_yaml(self, path: str | os.PathLike) -> None:
        """Write the resolved config atomically."""
        from elical.records import atomic_write

        with atomic_write(path) as tmp:
            Path(tmp).write_text(yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
