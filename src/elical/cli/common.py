"""The `elical` app: its --help formatting (plain metavars), the choice types of the options, the version
and the helpers every command uses (user errors as one line, Ctrl-C, NAME=VALUE options)."""

from __future__ import annotations

import enum
import importlib.metadata
import importlib.resources
import os
import shlex
import sqlite3
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from elical.annotate.judge_registry import JUDGES
from elical.core.choices import (
    BackendName,
    ConsistencyJudgeKind,
    CorrectnessJudgeKind,
    Method,
    Mode,
    SubjectName,
)
from elical.core.wordings import QAStyle

if TYPE_CHECKING:
    from typer._click.core import Context, Parameter  # the click that typer vendors


_TYPE_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN"}


def _plain_type(typer_label: str, choice: bool) -> str:
    """typer's Python type label ('<list[Path]>', '<int range>', '<a|b>') as click writes it: PATH, INTEGER, [a|b]."""
    inner = typer_label.strip("<>")
    if inner.startswith("list["):
        inner = inner.removeprefix("list[").removesuffix("]")
    inner = inner.removesuffix(" range")
    return f"[{inner}]" if choice else _TYPE_NAMES.get(inner, inner.upper())


class _PlainOption(TyperOption):
    """An option whose --help shows a plain metavar (PATH, INTEGER, TEXT, [a|b]), nothing for a flag."""

    def display_type(self, ctx: Context) -> str:
        """The metavar of --help."""
        return "" if self.is_flag else _plain_type(super().display_type(ctx), self.type_descriptor.is_choice)


class _PlainArgument(TyperArgument):
    """An argument named in capitals in --help (RECORDS...), with a plain metavar."""

    @property
    def display_name_raw(self) -> str:
        """The argument's name in --help, usage and errors."""
        return self.metavar or (self.name or "").upper()

    def display_type(self, ctx: Context) -> str:
        """The metavar of --help."""
        return _plain_type(super().display_type(ctx), self.type_descriptor.is_choice)

    def _usage_display_name(self) -> str:
        """As click writes it: RECORDS... when required, [RECORDS]... when not."""
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


def _plain_params(params: list[Parameter]) -> None:
    """Give typer's parameters the plain --help metavars of _PlainOption and _PlainArgument."""
    for param in params:
        if type(param) is TyperOption:
            param.__class__ = _PlainOption
        elif type(param) is TyperArgument:
            param.__class__ = _PlainArgument


class _PlainParams:
    """For a command or group: its --help shows plain metavars (see _PlainOption), not Python type names."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        """The parameters (--help and typer's completion options included), with plain metavars."""
        params = super().get_params(ctx)  # type: ignore[misc]
        _plain_params(params)
        return params


class _PlainCommand(_PlainParams, TyperCommand):
    """A command whose --help shows plain metavars."""


class _PlainGroup(_PlainParams, TyperGroup):
    """A command group whose --help shows plain metavars."""


class _Typer(typer.Typer):
    """typer.Typer whose commands and groups show plain metavars in --help."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=_PlainGroup, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        """typer's command decorator, with plain --help metavars."""
        return super().command(*args, cls=_PlainCommand, **kwargs)


app = _Typer(
    name="elical",
    help="Calibrated confidence for LLMs: annotate, score, train, evaluate, report.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


# Allowed values of the choice options, which --help shows and the parser checks: the configs' own Literal types
# (elical.core.choices, a leaf module, so `elical --help` imports no config).
Backend = BackendName


QAPrompt = QAStyle  # the names of elical.core.wordings.QA_STYLES


CorrectnessJudge = CorrectnessJudgeKind


ConsistencyJudge = ConsistencyJudgeKind


TrainMode = Mode


HonestyMethod = Method


RetrievalSubject = SubjectName


# Judges that judge-check scores: every judge of elical.annotate.judge_registry (an Enum: typer takes no list of Literal values)
if TYPE_CHECKING:
    JudgeName = enum.Enum
else:
    JudgeName = enum.Enum("JudgeName", [(name, name) for name in JUDGES], type=str, module=__name__)


def _version() -> str:
    """The installed package's version."""
    return importlib.metadata.version("elical")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(_version())
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the elical version and exit."),
) -> None:
    """Calibrated confidence for LLMs: annotate, score, train, evaluate, report."""
    _quiet_libraries()


def _quiet_libraries() -> None:
    """Keep library noise out of the logs, here and in the processes this one starts (accelerate ranks, ray
    workers): FutureWarnings (meant for this code's authors, repeated per call site) and tqdm bars (the GGUF
    loader's de-quantizing bar, transformers' weight loading). elical's own progress bars are rich's and stay."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    os.environ.setdefault("TQDM_DISABLE", "1")  # read when tqdm is imported, which no command has done yet


@app.command()
def version() -> None:
    """Print the elical version."""
    typer.echo(_version())


def _split_assignment(item: str, option: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key or not value:
        raise typer.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint=option)
    return key, value


def _yaml_value(text: str, option: str) -> object:
    """An option's value read as YAML (``1e-4`` a number, ``[a, b]`` a list); bad YAML (a key given twice
    included) names the option."""
    import yaml

    from elical.core.yaml_config import load_yaml

    try:
        return load_yaml(text)
    except yaml.YAMLError as err:
        reason = getattr(err, "problem", None) or str(err)
        raise typer.BadParameter(f"not a YAML value: {text!r} ({reason})", param_hint=option) from None


def _split_pair(item: str, option: str) -> tuple[str, str]:
    a, sep, b = item.partition(":")
    if not sep or not a or not b:
        raise typer.BadParameter(f"expected A:B, got {item!r}", param_hint=option)
    return a, b


@contextmanager
def _on_interrupt(kept: str, resumes: bool = True) -> Iterator[None]:
    """On Ctrl-C, say in one line what was kept and how to go on (the same command), then exit 130 at once:
    requests still in flight in worker threads (a server that does not answer) would otherwise hold the
    exit for their timeouts and retries, and what is kept is already on disk (shards are atomic)."""
    import threading

    try:
        yield
    except KeyboardInterrupt:
        command = shlex.join(["elical", *sys.argv[1:]])
        then = f"rerun the same command to resume: {command}" if resumes else f"rerun to start over: {command}"
        typer.echo(f"\ninterrupted: {kept}; {then}", err=True)
        if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        raise typer.Exit(130) from None


@contextmanager
def _user_errors(console):
    """Show bad-input errors (InputError, RecordError, pydantic's and other ValueErrors, settings that differ from
    the output folder's), an output folder in use by another process and a missing optional extra as one line
    (credentials masked); exit 2."""
    from rich.markup import escape

    from elical.core.folder_lock import FolderInUse
    from elical.core.inputs import one_line, out_of_room

    try:
        yield
        return
    except (FileNotFoundError, KeyError, ValueError, FolderInUse, ImportError) as err:
        message = one_line(err)
    except (OSError, sqlite3.OperationalError) as err:
        found = out_of_room(err)
        if found is None:
            raise
        message = found
    console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(2) from None
