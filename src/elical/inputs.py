"""Checks of user input shared by the commands, and the error they raise.

Every check raises :class:`InputError` (a ValueError) whose message names the file (with line or
field) or the option at fault; the CLI prints it as one line, ``error: <message>``, and exits 2.
Commands run these checks before they create or write anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, ValidationError
from pydantic_core import ErrorDetails

from elical.redact import redact


class InputError(ValueError):
    """Bad input (a file, a setting or an option); the message says which and why."""


def one_line(err: BaseException) -> str:
    """The message of an error as one line: pydantic's field errors joined, other line breaks folded."""
    if isinstance(err, ValidationError):
        text = "; ".join(_field_problem(e) for e in err.errors())
    elif isinstance(err, KeyError) and err.args:
        text = str(err.args[0])
    else:
        text = str(err)
    return redact(" ".join(text.split()))


def _field_problem(error: ErrorDetails) -> str:
    """``field: problem`` of one pydantic error; a constraint's message gets the value, a validator's
    message says what it needs (and never echoes a value that might be a secret)."""
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown setting"
    elif error["type"] not in ("missing", "value_error") and not isinstance(error.get("input"), (dict, list)):
        message += f" (got {error.get('input')!r})"
    where = ".".join(map(str, error["loc"]))
    return f"{where}: {message}" if where else message


def validation_error(source: str | os.PathLike, err: ValidationError) -> InputError:
    """A pydantic error of settings read from ``source`` as an InputError naming the file and fields."""
    return InputError(f"{source}: {one_line(err)}")


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


def check_output(path: str | os.PathLike, kind: Literal["folder", "file"], option: str = "--out",
                 suffixes: tuple[str, ...] = ()) -> Path:
    """``path`` as an output folder or file: an existing path of the other kind, or a file name without
    one of ``suffixes``, is an error naming the option (checked before anything is written)."""
    path = Path(path)
    if kind == "folder" and path.exists() and not path.is_dir():
        raise InputError(f"{option} {path}: is an existing file, not a folder")
    if kind == "file":
        if path.is_dir():
            raise InputError(f"{option} {path}: is an existing folder, not a file")
        if suffixes and path.suffix not in suffixes:
            raise InputError(f"{option} {path}: unknown format {path.suffix or '(no suffix)'!r} (use {', '.join(suffixes)})")
    return path


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

