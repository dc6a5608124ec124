"""One process at a time per output folder: a non-blocking OS file lock beside the folder.

``<parent>/.<name>.lock`` is the lock (filelock; the OS releases it when the process dies, SIGKILL
included, so a killed run never blocks the next one) and ``<parent>/.<name>.lock.owner`` says who holds
it (pid, host, command, start time), for the error a second process gets. Both sit beside the folder,
not in it, so taking the lock writes nothing into the folder and --overwrite may clear all of it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path

from elical.core.redact import redact


class FolderInUse(RuntimeError):
    """Another process holds the folder's lock; the message names it and the way out."""


def lock_paths(folder: str | os.PathLike) -> tuple[Path, Path]:
    """(lock file, owner file) of ``folder``, beside it; the same for every spelling of the path."""
    folder = Path(folder).resolve()
    return folder.with_name(f".{folder.name}.lock"), folder.with_name(f".{folder.name}.lock.owner")


def _in_use(folder: str | os.PathLike) -> FolderInUse:
    lock_file, owner_file = lock_paths(folder)
    try:
        owner = json.loads(owner_file.read_text(encoding="utf-8"))
        who = (f"pid {owner['pid']} on {owner['host']} since {owner['since']} "
               f"(command {owner['command']})")
    except (OSError, ValueError, KeyError):
        who = "another process (it has not said which yet)"
    return FolderInUse(f"{folder} is in use by {who}; wait for it or remove {lock_file} if that process is gone")


_held: set[Path] = set()  # lock files this process holds


@contextmanager
def folder_lock(folder: str | os.PathLike) -> Iterator[None]:
    """Hold ``folder``'s lock for the block, or raise :class:`FolderInUse` at once if another process has
    it. Re-entrant within a process: a step may lock its folder and call a function that locks it too."""
    from filelock import FileLock, Timeout

    from elical.core.io import atomic_write

    lock_file, owner_file = lock_paths(folder)
    if lock_file in _held:  # an outer block of this process holds it, and releases it
        yield
        return
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(lock_file, blocking=False, preserve_lock_file=True)  # an OS lock, never a soft one
    try:
        lock.acquire()
    except Timeout:
        raise _in_use(folder) from None
    try:
        owner = {"pid": os.getpid(), "host": socket.gethostname(), "command": redact(" ".join(sys.argv)),
                 "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        with atomic_write(owner_file) as tmp:
            tmp.write_text(json.dumps(owner), encoding="utf-8")
        _held.add(lock_file)
        yield
    finally:
        _held.discard(lock_file)
        owner_file.unlink(missing_ok=True)
        lock.release()


@contextmanager
def launch_lock(folder: str | os.PathLike) -> Iterator[None]:
    """:func:`folder_lock` for code that may run under ``accelerate launch``: the main process takes the
    lock for all ranks of the launch and tells them whether it got it, so every rank fails alike."""
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list, parse_flag_from_env

    state = PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU"))  # as the Accelerator sharing it would be
    if state.num_processes == 1:
        with folder_lock(folder):
            yield
        return
    with ExitStack() as stack:
        refusal: list[str | None] = [None]
        if state.is_main_process:
            try:
                stack.enter_context(folder_lock(folder))
            except FolderInUse as err:
                refusal = [str(err)]
        refusal = broadcast_object_list(refusal)
        if refusal[0] is not None:
            raise FolderInUse(refusal[0])
        yield

