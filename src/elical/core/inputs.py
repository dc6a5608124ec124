"""Checks of user input shared by the commands, and the error they raise.

Every check raises :class:`InputError` (a ValueError) whose message names the file (with line or
field) or the option at fault; the CLI prints it as one line, ``error: <message>``, and exits 2.
Commands run these checks before they create or write anything.
"""

from __future__ import annotations

import errno
import math
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, ErrorDetails, core_schema

from elical.core.redact import redact


class InputError(ValueError):
    """Bad input (a file, a setting or an option); the message says which and why."""


LineOf = Callable[[tuple[int | str, ...]], int | None]  # a setting's place (keys, indices) -> its line in a file


def one_line(err: BaseException, line_of: LineOf | None = None) -> str:
    """The message of an error as one line: pydantic's field errors joined (each with its line in the file
    ``line_of`` finds it in), other line breaks folded."""
    if isinstance(err, ValidationError):
        text = "; ".join(_field_problem(e, line_of) for e in err.errors())
    elif isinstance(err, KeyError) and err.args:
        text = str(err.args[0])
    else:
        text = str(err)
    return redact(" ".join(text.split()))


def _field_problem(error: ErrorDetails, line_of: LineOf | None = None) -> str:
    """``[line N: ]field: problem`` of one pydantic error; a constraint's message gets the value, a validator's
    message says what it needs (and never echoes a value that might be a secret)."""
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown setting"
    elif error["type"] not in ("missing", "value_error") and not isinstance(error.get("input"), (dict, list)):
        message += f" (got {error.get('input')!r})"
    where = ".".join(map(str, error["loc"]))
    line = line_of(tuple(error["loc"])) if line_of is not None and error["loc"] else None
    return (f"line {line}: " if line else "") + (f"{where}: {message}" if where else message)


def validation_error(source: str | os.PathLike, err: ValidationError, line_of: LineOf | None = None) -> InputError:
    """A pydantic error of settings read from ``source`` as an InputError naming the file, fields and (with
    ``line_of``) their lines."""
    return InputError(f"{source}: {one_line(err, line_of)}")


def check_device(spec: str, option: str | None = None) -> str:
    """``spec`` if it is 'auto' or a device torch knows ('cpu', 'cuda', 'cuda:1', 'mps', ...);
    ``option`` names the command-line option in the error."""
    if spec == "auto":
        return spec
    import torch

    try:
        torch.device(spec)
    except (RuntimeError, TypeError):
        where = f"{option}: " if option else ""
        raise InputError(f"{where}unknown device {spec!r} (use auto, cpu, cuda, cuda:N, mps, ...)") from None
    return spec


Device = Annotated[str, AfterValidator(check_device)]


@dataclass(frozen=True)
class Range:
    """The allowed values of a number setting, declared with its field (``Annotated[int, Range(1)]``): at
    least ``low`` (greater than it when ``low_open``) and at most ``high`` (less than it when ``high_open``).
    A value outside, a NaN or infinity, or a boolean (YAML's ``true`` is no number) is refused with a
    message naming the whole range and ``note`` (what a special value means)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    note: str = ""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        checked = core_schema.no_info_after_validator_function(self.check, handler(source))
        return core_schema.no_info_before_validator_function(_no_boolean, checked)

    def describe(self) -> str:
        """The range in words: 'at least 1', 'greater than 0 and at most 1', ..."""
        bounds = []
        if self.low is not None:
            bounds.append(f"{'greater than' if self.low_open else 'at least'} {self.low}")
        if self.high is not None:
            bounds.append(f"{'less than' if self.high_open else 'at most'} {self.high}")
        return " and ".join(bounds) or "a finite number"

    def check(self, value: float) -> float:
        """``value`` if it lies in the range, else a ValueError naming the range."""
        below = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        above = self.high is not None and (value >= self.high if self.high_open else value > self.high)
        if below or above or not math.isfinite(value):
            raise ValueError(f"must be {self.describe()} (got {value!r})" + (f"; {self.note}" if self.note else ""))
        return value


def _no_boolean(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"must be a number, not {str(value).lower()}")  # noqa: TRY004 - pydantic reports ValueErrors
    return value


@dataclass(frozen=True)
class Distinct:
    """A list setting that must hold at least ``min_items`` values and none twice (an empty plan does
    nothing, a repeated value the same work twice), declared with its field (``Annotated[list[int], Distinct()]``)."""

    min_items: int = 1

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def check(self, values: list[Any]) -> list[Any]:
        """``values`` if long enough and without repeats, else a ValueError saying which."""
        if len(values) < self.min_items:
            raise ValueError(f"must list at least {self.min_items} value{'s' * (self.min_items > 1)} (got {values!r})")
        repeated = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if repeated is not None:
            raise ValueError(f"lists {repeated!r} more than once (got {values!r})")
        return values


MAX_SEED = 2**32 - 1  # numpy's seed range (accelerate's set_seed seeds numpy too); torch takes more
Seed = Annotated[int, Range(0, MAX_SEED)]  # every seed setting and option


def check_output(path: str | os.PathLike, kind: Literal["folder", "file"], option: str = "--out",
                 suffixes: tuple[str, ...] = ()) -> Path:
    """``path`` as an output folder or file: an existing path of the other kind, a file name without one of
    ``suffixes``, or a place this process cannot write in (under a file, read-only) is an error naming the
    option (checked before anything is written)."""
    path = Path(path)
    if kind == "folder" and path.exists() and not path.is_dir():
        raise InputError(f"{option} {path}: is an existing file, not a folder")
    if kind == "file":
        if path.is_dir():
            raise InputError(f"{option} {path}: is an existing folder, not a file")
        if suffixes and path.suffix not in suffixes:
            raise InputError(f"{option} {path}: unknown format {path.suffix or '(no suffix)'!r} (use {', '.join(suffixes)})")
    _check_writable(path, option)
    return path


def _check_writable(path: Path, option: str) -> None:
    """The folders an output is written in (and its lock and temporary files beside it) must be folders this
    process may write in: the nearest existing one above ``path``, and ``path`` itself when it is a folder."""
    place = path.absolute().parent
    while not place.exists() and not place.is_symlink():
        place = place.parent
    if not place.is_dir():
        kind_of = "an existing file" if place.exists() else "a broken link"
        raise InputError(f"{option} {path}: cannot be created, {place} is {kind_of}, not a folder")
    for folder in [place, path] if path.is_dir() else [place]:
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InputError(f"{option} {path}: cannot write in {folder} (read-only or not permitted)")


def text_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number, line with its ending) of a UTF-8 text file; a binary or non-UTF-8 file is an
    InputError naming the file and line."""
    with open(path, "rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if b"\0" in raw:
                raise InputError(f"{path}:{line_no}: a binary file, not UTF-8 text")
            try:
                yield line_no, raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise InputError(f"{path}:{line_no}: not UTF-8 text (byte {raw[err.start]:#04x} at column "
                                 f"{len(raw[:err.start].decode('utf-8', 'replace')) + 1})") from None


def read_text(path: str | os.PathLike) -> str:
    """The whole of a UTF-8 text file (see :func:`text_lines` for the errors)."""
    return "".join(line for _, line in text_lines(path))


_NO_ROOM = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
            errno.EFBIG: "a file grew past the size limit (ulimit -f)", errno.EROFS: "the file system is read-only",
            errno.EACCES: "permission denied"}


def out_of_room(err: BaseException) -> str | None:
    """One line for an error of the place written to (disk full, quota, read-only, no permission), which
    a resumable command survives: what happened, where, and that the same command resumes; None for other
    errors (they stay tracebacks: a defect, not the user's input)."""
    if isinstance(err, sqlite3.OperationalError) and "disk is full" in str(err):
        return "no space left on the device (a judge cache or lock file); free space and rerun the same command: it resumes"
    if not isinstance(err, OSError) or err.errno not in _NO_ROOM:
        return None
    where = f" writing {redact(str(err.filename))}" if err.filename else ""
    return f"{_NO_ROOM[err.errno]}{where}; fix it and rerun the same command: it resumes"
