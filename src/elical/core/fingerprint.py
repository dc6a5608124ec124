"""Settings fingerprints: an output folder remembers the settings that made a step's outputs, so a rerun
with other settings refuses instead of resuming into (and relabelling) results it did not make.

A step's record is ``<folder>/settings/<step>.json``: the output-determining settings (nested JSON;
versions of the step's inputs under ``input``), their digest, and the elical version that wrote them
(informational, never compared). Settings that do not change the output (batch size, device, progress
display, concurrency, shard index) are marked on their config fields and left out of the mapping
(elical.core.settings_contract), so changing them never blocks a resume.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SETTINGS_DIR = "settings"
UNSET = "(unset)"
INPUT = "input."  # settings under `input` are versions of the inputs: digests of upstream steps, files
_WHOLE, _PART = 64 << 20, 8 << 20  # path_version hashes files up to _WHOLE bytes whole, bigger ones by 2 parts


@dataclass(frozen=True)
class Difference:
    """One setting that differs between the recorded run and this one (dotted key, old, new)."""

    key: str
    old: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.key} {_show(self.old)} → {_show(self.new)}"


class SettingsMismatch(ValueError):
    """A folder holds a step's outputs made with other settings; the message names them and the way out."""

    def __init__(self, folder: str | Path, problems: Mapping[str, Sequence[Difference] | None], way_out: str = "") -> None:
        self.folder = Path(folder)
        self.problems = dict(problems)
        parts = [f"{step}: {describe(diffs)}" for step, diffs in self.problems.items()]
        way_out = way_out or "rerun with --overwrite to discard them and start that step over, or write to a new folder"
        super().__init__(f"{folder} holds results made with other settings ({'; '.join(parts)}); {way_out}")


def describe(differences: Sequence[Difference] | None) -> str:
    """'k 5 → 2, seed 0 → 1; its input (annotate) changed', or what it means that no settings were
    recorded (None). Keys under ``input.`` are versions of the step's inputs (digests), named only."""
    if differences is None:
        return "its outputs were written without a settings record"
    own = [str(d) for d in differences if not d.key.startswith(INPUT)]
    inputs = [d.key[len(INPUT):] for d in differences if d.key.startswith(INPUT)]
    return "; ".join(filter(None, [", ".join(own), f"its input ({', '.join(inputs)}) changed" if inputs else ""]))


_MISSING = object()


def _show(value: Any) -> str:
    return UNSET if value is _MISSING else json.dumps(value, default=str)


def canonical(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings as plain JSON values (tuples become lists, paths strings), as they are stored."""
    return json.loads(json.dumps(settings, sort_keys=True, default=str))


def digest(settings: Mapping[str, Any]) -> str:
    """A short stable hash of the settings: a later step stores its input step's digest as one of its own."""
    text = json.dumps(canonical(settings), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def path_version(path: str | Path) -> str | None:
    """A short hash of a file, or of a folder's top-level files (names, sizes, contents; a file over
    64 MiB by its size and first and last 8 MiB), so retrained weights under one path are noticed;
    None when the path does not exist (e.g. a hub name)."""
    path = Path(path)
    if not path.exists():
        return None
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
    h = hashlib.sha256()
    for file in files:
        size = file.stat().st_size
        h.update(f"{file.name}\0{size}\0".encode())
        with open(file, "rb") as handle:
            if size <= _WHOLE:
                h.update(handle.read())
            else:
                h.update(handle.read(_PART))
                handle.seek(size - _PART)
                h.update(handle.read(_PART))
    return h.hexdigest()[:16]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key in value:
            out.update(_flatten(value[key], f"{prefix}{key}."))
        return out
    return {prefix[:-1]: value}


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Difference]:
    """The settings (dotted keys of nested mappings) whose values differ, in key order."""
    a, b = _flatten(canonical(old)), _flatten(canonical(new))
    return [Difference(k, a.get(k, _MISSING), b.get(k, _MISSING)) for k in sorted(a.keys() | b.keys())
            if a.get(k, _MISSING) != b.get(k, _MISSING)]


def settings_file(folder: str | Path, step: str) -> Path:
    """Where ``step``'s settings are recorded in ``folder``."""
    return Path(folder) / SETTINGS_DIR / f"{step}.json"


def recorded_settings(folder: str | Path, step: str) -> dict[str, Any] | None:
    """The settings ``step`` recorded in ``folder`` (None: no record)."""
    path = settings_file(folder, step)
    return json.loads(path.read_text(encoding="utf-8"))["settings"] if path.exists() else None


def compare_settings(folder: str | Path, step: str, settings: Mapping[str, Any],
                     outputs: Iterable[str | Path] = ()) -> list[Difference] | None:
    """What stands against ``step`` resuming in ``folder`` with ``settings``: [] when nothing does (the
    recorded settings are equal, or none of the given ``outputs`` exists), the differing settings, or
    None when outputs exist without a record."""
    outputs = list(outputs)
    made = any(Path(p).exists() for p in outputs)
    old = recorded_settings(folder, step)
    if old is None:
        return None if made else []
    return differences(old, settings) if made or not outputs else []


def record_settings(folder: str | Path, step: str, settings: Mapping[str, Any]) -> None:
    """Record ``step``'s settings (atomically, with the elical version), unless they are recorded already."""
    from elical import __version__
    from elical.core.io import atomic_write

    if recorded_settings(folder, step) == canonical(settings):
        return
    data = {"step": step, "digest": digest(settings), "settings": canonical(settings), "elical": __version__}
    with atomic_write(settings_file(folder, step)) as tmp:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")


def clear_outputs(folder: str | Path, step: str, outputs: Iterable[str | Path]) -> None:
    """Delete ``outputs`` (files or folders, all inside ``folder``) and ``step``'s settings record."""
    root = Path(folder).resolve()
    for path in map(Path, outputs):
        if not path.resolve().is_relative_to(root):
            raise ValueError(f"{path} is outside {folder}: refusing to delete it")
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    settings_file(folder, step).unlink(missing_ok=True)


def check_or_write_settings(folder: str | Path, settings: Mapping[str, Any], overwrite: bool, step: str,
                            outputs: Iterable[str | Path] = ()) -> None:
    """Make ``folder`` ready for ``step`` to write or resume outputs made with ``settings``; call it
    before the step writes anything (and while holding the folder's lock, see elical.core.folder_lock).

    ``settings``: a JSON-able mapping (nested allowed) of exactly what determines the step's output,
    plus, under the key ``input``, versions of its inputs (e.g. ``{"input": {"records": path_version(f)}}``,
    an upstream step's :func:`digest`), which a refusal names without their values.
    ``outputs``: the step's files and folders inside ``folder``, deleted when starting over.

    * the record is equal, or none of ``outputs`` exists yet: the settings are recorded (if new) and
      the step starts or resumes.
    * the record differs, or outputs exist without one: :class:`SettingsMismatch` naming each differing
      setting (old → new) and the way out, with nothing written.
    * ``overwrite``: ``outputs`` are deleted and the settings recorded, so the step starts over.
    """
    outputs = list(outputs)
    if overwrite:
        clear_outputs(folder, step, outputs)
    elif (problem := compare_settings(folder, step, settings, outputs)) != []:
        raise SettingsMismatch(folder, {step: problem})
    record_settings(folder, step, settings)
