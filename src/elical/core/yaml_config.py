"""YAML in and out for the pydantic configs (annotate, train, honesty, run): one reader, one writer."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from typing_extensions import Self

from elical.core.inputs import InputError, LineOf, one_line, read_text, validation_error
from elical.core.strict_json import MAX_DEPTH, too_deep


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (which it would otherwise overwrite)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # '<<: *base' keys may be overridden: that is what they are for
            key = self.construct_object(key_node, deep=True)
            try:
                first = lines.get(key)
            except TypeError:  # an unhashable key: the base class says so
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (also on line {first}; each key may appear once)", key_node.start_mark)
            lines[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def load_yaml(text: str) -> Any:
    """The value of a YAML text, read safely; a key given twice in one mapping or nesting deeper than
    MAX_DEPTH levels is a yaml.YAMLError (as a syntax error is)."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: no arbitrary objects
    except RecursionError:
        raise yaml.YAMLError(f"nested more than {MAX_DEPTH} levels deep") from None
    if too_deep(data):
        raise yaml.YAMLError(f"nested more than {MAX_DEPTH} levels deep")
    return data


def read_yaml_mapping(path: str | os.PathLike, expected: str = "a mapping of settings") -> dict[str, Any]:
    """A YAML file's top-level mapping (an empty file is ``{}``); anything else (a missing, binary or
    non-UTF-8 file, a syntax error, a key given twice, a list) is an InputError naming the file (and line)."""
    if not Path(path).is_file():
        raise InputError(f"{path}: config file not found")
    try:
        data = load_yaml(read_text(path)) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else f"{path}"
        problem = getattr(err, "problem", None) or str(err)
        kind = "YAML syntax error" if isinstance(err, yaml.MarkedYAMLError) and not isinstance(
            err, yaml.constructor.ConstructorError) else "YAML error"
        raise InputError(f"{where}: {kind}: {problem}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected {expected}, got {type(data).__name__}")
    return data


def line_finder(path: str | os.PathLike, section: tuple[str, ...] = (), overridden: Collection[str] = ()) -> LineOf:
    """Where a setting stands in a YAML file: its keys and list indices (under ``section``) -> the line of its
    key (None where the file does not state it, or an ``overridden`` top-level key took its value from
    elsewhere). The file is read once, when first asked."""
    root: list[yaml.Node | None] = []

    def line_of(loc: tuple[int | str, ...]) -> int | None:
        if loc and loc[0] in overridden:
            return None
        if not root:
            try:
                root.append(yaml.compose(read_text(path)))
            except (OSError, InputError, yaml.YAMLError, RecursionError):
                root.append(None)
        node, line = root[0], None
        for part in (*section, *loc):
            if isinstance(node, yaml.MappingNode):
                pairs = [(key, value) for key, value in node.value if key.value == str(part)]
                node, line = (pairs[-1][1], pairs[-1][0].start_mark.line + 1) if pairs else (None, None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node, line = node.value[part], node.value[part].start_mark.line + 1
            else:
                return None
        return line

    return line_of


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
        section: tuple[str, ...] = ()
        if cls.yaml_section and isinstance(data.get(cls.yaml_section), dict):
            data, section = data[cls.yaml_section], (cls.yaml_section,)
        data.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            given = {key for key, value in overrides.items() if value is not None}
            from_options = all(e["loc"] and e["loc"][0] in given for e in err.errors())
            lines = line_finder(path, section, given)
            raise (InputError(one_line(err)) if from_options else validation_error(path, err, lines)) from None

    def to_yaml(self, path: str | os.PathLike) -> None:
        """Write the resolved config atomically."""
        from elical.core.io import atomic_write

        with atomic_write(path) as tmp:
            Path(tmp).write_text(yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
