"""A full disk, a quota, a size limit or a read-only place met while writing: one line saying what and
where, exit 2 (the commands resume), never a traceback."""

from __future__ import annotations

import errno
import resource
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_bad_input import hb_row, write_rows

from elical.core.inputs import out_of_room


@pytest.mark.parametrize(
    "err, expected",
    [
        (OSError(errno.ENOSPC, "No space left on device", "/runs/a/part-0.parquet"), "no space left on the device writing /runs/a/part-0.parquet"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "disk quota exceeded;"),
        (OSError(errno.EROFS, "Read-only file system", "/mnt/ro/x"), "the file system is read-only writing /mnt/ro/x"),
        (sqlite3.OperationalError("database or disk is full"), "no space left on the device (a judge cache or lock file)"),
    ],
)
def test_errors_of_the_place_written_to_are_one_line(err, expected):
    message = out_of_room(err)
    assert message is not None and message.startswith(expected) and "rerun the same command" in message


def test_other_os_errors_stay_errors_of_the_program():
    assert out_of_room(OSError(errno.EIO, "Input/output error")) is None
    assert out_of_room(sqlite3.OperationalError("no such table: x")) is None
    assert out_of_room(ValueError("x")) is None


def _small_files() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # writes past 4 KB fail with EFBIG
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_evaluate_past_the_file_size_limit_says_so_in_one_line(tmp_path: Path):
    data = write_rows(tmp_path / "nq_test.jsonl", [hb_row(f"q{i}?", greedy_correctness=i % 2) for i in range(40)])
    command = [sys.executable, "-c", "from elical.cli import app; app()", "evaluate", str(data), "--out", str(tmp_path / "out")]
    done = subprocess.run(command, capture_output=True, text=True, preexec_fn=_small_files, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "a file grew past the size limit (ulimit -f)" in said and "Traceback" not in said
