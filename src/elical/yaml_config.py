"""YAML in and out for the pydantic configs (annotate, train, honesty, run): one reader, one writer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from typing_extensions import Self

from elical.inputs import InputError, one_line, read_text, validation_error


def read_yaml_mapping(path: str | os.PathLike, expected: str = "a mapping of settings") -> dict[str, Any]:
    """A YAML file's top-level mapping (an empty file is ``{}``); anything else (a missing, binary or
    non-UTF-8 file, a syntax error, a list) is an InputError naming the file (and line)."""
    if not Path(path).is_file():
        raise InputError(f"{path}: config file not found")
    try:
        data = yaml.safe_load(read_text(path)) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else f"{path}"
        problem = getattr(err, "problem", None) or str(err)
        raise InputError(f"{where}: YAML syntax error: {problem}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected {expected}, got {type(data).__name__}")
    return data


class YamlConfig(BaseModel):
    """A config read from and written to YAML, so every output folder says what produced it; unknown
    keys are errors (a typo never passes silently)."""

    model_config = ConfigDict(extra="forbid")
    yaml_section: ClassVar[str | None] = None  # a file may hold the settings under this key instead

    @classmethod
    def from_yaml(cls, path: str | os.PathLike, **overrides: Any) -> Self:
        """Read a YAML file (the ``yaml_section`` or the bare settings), then apply the non-None overrides;
        a bad or unknown setting is an InputError naming the file and the field."""
        data = read_yaml_mapping(path)
        if cls.yaml_section and isinstance(data.get(cls.yaml_section), dict):
            data = data[cls.yaml_section]
        data.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            given = {key for key, value in overrides.items() if value is not None}
            from_options = all(e["loc"] and e["loc"][0] in given for e in err.errors())
            raise (InputError(one_line(err)) if from_options else validation_error(path, err)) from None

    def to_yaml(self, path: str | os.PathLike) -> None:
        """Write the resolved config atomically."""
        from elical.records import atomic_write

        with atomic_write(path) as tmp:
            Path(tmp).write_text(yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
