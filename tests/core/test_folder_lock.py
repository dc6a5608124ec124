"""One process per output folder: a second one fails at once (exit 2, naming the first), a killed one
leaves nothing that blocks."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from elical.core.folder_lock import FolderInUse, folder_lock, lock_paths

HOLDER = """
import sys, time
from elical.core.folder_lock import folder_lock
with folder_lock(sys.argv[1]):
    print('locked', flush=True)
    time.sleep(600)
"""


@pytest.fixture
def holder():
    """Start another process holding the lock of ``folder`` (call it with the folder); killed after the test."""
    procs: list[subprocess.Popen] = []

    def start(folder: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "locked"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_second_holder_is_refused_with_who_holds_it(tmp_path, holder):
    folder = tmp_path / "run"
    first = holder(folder)
    with pytest.raises(FolderInUse) as err, folder_lock(folder):
        pass
    message = str(err.value)
    assert f"in use by pid {first.pid} on {socket.gethostname()} since " in message
    assert "(command -c " in message and f"remove {lock_paths(folder)[0]}" in message
    assert not folder.exists(), "locking writes nothing into the folder"


def test_a_killed_holder_blocks_nothing(tmp_path, holder):
    folder = tmp_path / "run"
    proc = holder(folder)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert lock_paths(folder)[1].exists(), "the killed holder's owner file is left behind"
    with folder_lock(folder):  # the OS released the lock with the process
        owner = json.loads(lock_paths(folder)[1].read_text())
        assert owner["pid"] == os.getpid()
    assert not lock_paths(folder)[1].exists()


def test_the_lock_is_reentrant_in_one_process_and_released_after_errors(tmp_path):
    folder = tmp_path / "run"
    with pytest.raises(RuntimeError, match="boom"), folder_lock(folder), folder_lock(tmp_path / "." / "run"):
        raise RuntimeError("boom")
    done = subprocess.run([sys.executable, "-c", HOLDER.replace("time.sleep(600)", "pass"), str(folder)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "locked", done.stderr


def _world_questions(path: Path, n: int) -> None:
    from elical.run.config import load_run_config
    from elical.run.subjects.by_name import world_subject

    items = world_subject(load_run_config(overrides={"questions": {"max_train": n, "max_eval_per_dataset": 1}})).items
    path.write_text("".join(json.dumps({"question": it.question, "answer": it.answers}) + "\n" for it in items[:n]))


@pytest.mark.parametrize("command", ["annotate", "train", "run", "honesty-tune", "evaluate"])
def test_every_writing_command_exits_2_naming_the_holder(tmp_path, holder, command):
    from typer.testing import CliRunner

    from extras import SMOLLM2, require

    if command == "honesty-tune":
        require(*SMOLLM2)  # its default model, resolved before the lock is taken

    from elical.cli import app
    from elical.world import default_lm_path

    out = tmp_path / "out"
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"question": "Who?", "answer": ["x"]}) + "\n")
    model = str(default_lm_path())
    from elical.records import Record, write_records

    records = tmp_path / "records.jsonl"
    write_records([Record("Who?", ["x"], greedy_response="x", greedy_correct=1, dataset="d"),
                   Record("Why?", ["y"], greedy_response="z", greedy_correct=0, dataset="d")], records)
    sampled = tmp_path / "sampled.jsonl"  # good input for train and honesty-tune, which check it before locking
    write_records([Record(q, [a], greedy_response=a, greedy_correct=1, samples=[a, "z"], sample_correct=[1, 0],
                          sample_consistent=[1, 0], dataset="d") for q, a in (("Who?", "x"), ("Why?", "y"))], sampled)
    args = {"annotate": ["annotate", str(data), "--out", str(out), "--model", model, "--k", "1"],
            "evaluate": ["evaluate", str(records), "--out", str(out), "--methods", "Consis-Lex"],
            "train": ["train", str(sampled), "--out", str(out), "--model", model],
            "run": ["run", "--out", str(out)],
            "honesty-tune": ["honesty-tune", str(sampled), "--out", str(out)]}[command]
    proc = holder(out)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"in use by pid {proc.pid}" in result.output and "wait for it or remove" in result.output
    assert not out.exists()


def test_two_annotate_processes_on_the_world_lm(tmp_path):
    """Real `elical annotate` processes on one folder: the second exits 2 at once naming the first, and
    the shards the first goes on writing hold each question once."""
    import time

    from elical.annotate import merge_shards
    from elical.world import default_lm_path

    _world_questions(tmp_path / "q.jsonl", 200)
    out = tmp_path / "ann"
    cmd = [sys.executable, "-m", "elical.cli", "annotate", str(tmp_path / "q.jsonl"), "--out", str(out),
           "--model", str(default_lm_path()), "--k", "4", "--chunk-size", "1", "--batch-size", "4", "--device", "cpu",
           "--judge", "match", "--consistency-judge", "match"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        owner = lock_paths(out)[1]
        deadline = time.time() + 300
        while not owner.exists() and first.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert first.poll() is None, first.stderr.read()[-2000:]
        second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert first.poll() is None, "the first process must still hold the folder for this test to mean anything"
        while not list(out.glob("shards/part-*.parquet")) and first.poll() is None and time.time() < deadline:
            time.sleep(0.05)
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"is in use by pid {first.pid} on {socket.gethostname()}" in second.stdout
    assert len(second.stdout.strip().splitlines()) == 1 and not second.stderr
    records = merge_shards([out], allow_missing=True)  # raises on a question written twice
    assert len({r.id for r in records}) == len(records)


LAUNCHED = """
import sys
from accelerate import PartialState
from elical.core.folder_lock import FolderInUse, launch_lock
state = PartialState(cpu=True)
try:
    with launch_lock(sys.argv[1]):
        print(f"rank {state.process_index} inside", flush=True)
        state.wait_for_everyone()
except FolderInUse as err:
    print(f"rank {state.process_index} refused: {err}", flush=True)
"""


@pytest.mark.slow
def test_an_accelerate_launch_locks_once_for_all_its_ranks(tmp_path, holder):
    """Two ranks share one folder: both get in when it is free, both are refused (no hang) when it is not."""
    (tmp_path / "launched.py").write_text(LAUNCHED)
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(tmp_path / "launched.py"),
           str(tmp_path / "out")]
    free = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert free.returncode == 0 and sorted(free.stdout.split("\n"))[-2:] == ["rank 0 inside", "rank 1 inside"], free.stderr
    first = holder(tmp_path / "out")
    taken = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert taken.returncode == 0, taken.stderr
    assert all(f"rank {r} refused: " in taken.stdout for r in (0, 1)) and f"pid {first.pid}" in taken.stdout
