"""Kill `elical annotate`, `elical train` and `elical run` with SIGKILL at random points, resume each to
completion, and compare with an uninterrupted run: records lost or duplicated, and records, predictions
and metrics that are not bit-identical. Prints the counts and the machine.

    python benchmarks/kill_resume.py --n 3                     # the packaged world LM on CPU, a few minutes
    python benchmarks/kill_resume.py --n 10 --work /tmp/kr     # keep the folders to look at
    python benchmarks/kill_resume.py --only annotate --chunk-seconds 0.5   # shards sized by time too
    python benchmarks/kill_resume.py --pipeline on             # judging in a thread behind generation (issue 24)

Each trial starts the command, waits until it holds its output folder's lock (the work has begun), kills
it after a random share of the uninterrupted run's working time (halved and retried from scratch, up to
twice, if it finished first), then reruns the same command to the end.
Every command imports elical as this process does (PYTHONPATH included), so a frozen copy of the source
(``PYTHONPATH=/tmp/src python benchmarks/kill_resume.py``) keeps edits made meanwhile out of the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from run_default import machine

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
ELICAL = [sys.executable, "-m", "elical.cli"]
RUN_CONFIG = """\
name: kill-resume
torch_threads: 1
questions: {max_train: 40, max_eval_per_dataset: 6}
annotate: {k: 3, batch_size: 48, chunk_size: 8, device: cpu}
train: {methods: [eli-only, cal-only, elical], budgets: [12, all], seeds: [0], stage2_passes: 40,
        settings: {epochs_stage1: 1, batch_size: 8, save_steps: 2}}
evaluate: {n_resamples: 10, alignment_repeats: 2}
honesty: null
"""


@dataclass
class Job:
    """A command to kill and resume: how to start it on a folder and what to compare afterwards."""

    name: str
    command: Callable[[Path], list[str]]
    compare: Callable[[Path, Path], Counter]


def records_diff(base: list, got: list) -> Counter:
    """Lost, duplicated and not bit-identical records (by id) of ``got`` against ``base``."""
    counts = Counter(r.id for r in got)
    wanted = {r.id: r for r in base}
    found = {r.id: r for r in got}
    return Counter(records_lost=len(wanted.keys() - found.keys()), records_duplicated=sum(c - 1 for c in counts.values()),
                   records_extra=len(found.keys() - wanted.keys()),
                   records_different=sum(found[i] != wanted[i] for i in wanted.keys() & found.keys()))


def predictions_diff(base: Path, got: Path) -> Counter:
    """Predictions missing or not bit-identical in ``got`` against ``base`` (prediction files)."""
    from elical.model.predictions import read_predictions

    a, b = read_predictions(base).confidence, read_predictions(got).confidence
    return Counter(predictions_lost=len(a.keys() - b.keys()),
                   predictions_different=sum(a[i] != b[i] for i in a.keys() & b.keys()))


def table_diff(base: Path, got: Path, what: str) -> Counter:
    """Cells of a CSV table that are not identical (a different shape counts every cell)."""
    import pandas as pd

    a, b = pd.read_csv(base), pd.read_csv(got)
    if a.shape != b.shape or list(a.columns) != list(b.columns):
        return Counter({f"{what}_different": max(a.size, b.size)})
    same = (a == b) | (a.isna() & b.isna())
    return Counter({f"{what}_different": int((~same).to_numpy().sum())})


def annotate_job(questions: Path, chunk_seconds: float | None = None, pipeline: bool | None = None) -> Job:
    from elical.world import default_lm_path

    def command(out: Path) -> list[str]:
        timed = ["--chunk-seconds", str(chunk_seconds)] if chunk_seconds else []
        timed += [] if pipeline is None else ["--pipeline" if pipeline else "--no-pipeline"]
        return [*ELICAL, "annotate", str(questions), "--out", str(out), "--model", str(default_lm_path()),
                "--k", "4", "--chunk-size", "8", "--batch-size", "32", "--device", "cpu", *timed]

    def compare(base: Path, out: Path) -> Counter:
        from elical.annotate import merge_shards
        from elical.records import read_parquet

        merged = Counter(r.id for p in sorted((out / "shards").glob("part-*.parquet")) for r in read_parquet(p))
        counts = records_diff(read_parquet(base / "records.parquet"), read_parquet(out / "records.parquet"))
        counts["shard_rows_duplicated"] = sum(c - 1 for c in merged.values())
        merge_shards([out])  # raises on a missing or doubled question
        return counts

    return Job("annotate", command, compare)


def train_job(records: Path, eval_records: Path) -> Job:
    from elical.world import default_lm_path

    def command(out: Path) -> list[str]:
        return [*ELICAL, "train", str(records), "--out", str(out), "--model", str(default_lm_path()), "--mode", "elical",
                "--budget", "24", "--set", "epochs_stage1=2", "--set", "epochs_stage2=3", "--set", "batch_size=8",
                "--set", "save_steps=2", "--set", "mixed_precision=no"]

    def compare(base: Path, out: Path) -> Counter:
        preds = []
        for folder in (base, out):
            target = folder.parent / f"{folder.name}-predictions.parquet"
            if not target.exists():
                run_to_end([*ELICAL, "predict", str(folder / "model"), str(eval_records), "--out", str(target),
                            "--device", "cpu"])
            preds.append(target)
        return predictions_diff(*preds)

    return Job("train", command, compare)


def run_job(config: Path) -> Job:
    def command(out: Path) -> list[str]:
        return [*ELICAL, "run", "--config", str(config), "--out", str(out)]

    def compare(base: Path, out: Path) -> Counter:
        from elical.records import read_parquet

        counts = Counter()
        for path in sorted((base / "records").glob("*.parquet")):
            counts += records_diff(read_parquet(path), read_parquet(out / "records" / path.name))
        for path in sorted((base / "scores").glob("*.parquet")):
            counts += predictions_diff(path, out / "scores" / path.name)
        counts += table_diff(base / "metrics.csv", out / "metrics.csv", "metrics")
        counts += table_diff(base / "results.csv", out / "results.csv", "results")
        return counts

    return Job("run", command, compare)


def run_to_end(command: list[str]) -> float:
    """Run a command to completion (an error stops the benchmark); its wall seconds."""
    start = time.perf_counter()
    done = subprocess.run(command, env=ENV, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def working_seconds(command: list[str], out: Path) -> float:
    """Run to completion and return the seconds from taking the folder's lock to the end."""
    from elical.core.folder_lock import lock_paths

    owner = lock_paths(out)[1]
    proc = subprocess.Popen(command, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while not owner.exists() and proc.poll() is None:
        time.sleep(0.01)
    start = time.perf_counter()
    output, _ = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({proc.returncode}):\n{output[-3000:]}")
    return time.perf_counter() - start


def kill_after(command: list[str], out: Path, seconds: float) -> int | None:
    """Start the command, SIGKILL it ``seconds`` after it took its folder's lock; the number of files it
    had written by then (None: it ended first)."""
    from elical.core.folder_lock import lock_paths

    owner = lock_paths(out)[1]
    proc = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not owner.exists() and proc.poll() is None:
        time.sleep(0.01)
    deadline = time.perf_counter() + seconds
    while proc.poll() is None and time.perf_counter() < deadline:
        time.sleep(0.01)
    if proc.poll() is not None:
        return None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return sum(p.is_file() for p in out.rglob("*")) if out.exists() else 0


def trial_runs(job: Job, work: Path, n: int, rng: random.Random) -> dict:
    """The uninterrupted run, then ``n`` killed-and-resumed ones compared with it."""
    base = work / f"{job.name}-base"
    seconds = working_seconds(job.command(base), base)
    totals: Counter = Counter()
    kills = []
    for i in range(n):
        out = work / f"{job.name}-{i}"
        at = rng.uniform(0.05, 0.95) * seconds
        for _ in range(3):  # the load changes run times: a run that ends before its kill is retried earlier
            shutil.rmtree(out, ignore_errors=True)
            if (written := kill_after(job.command(out), out, at)) is not None:
                break
            at /= 2
        run_to_end(job.command(out))
        counts = job.compare(base, out)
        kills.append({"kill_at_s": round(at, 2), "files_at_kill": written, **{k: v for k, v in counts.items() if v}})
        totals += counts
        totals["killed_midway"] += written is not None
    return {"job": job.name, "uninterrupted_working_s": round(seconds, 1), "trials": n,
            "killed_midway": totals.pop("killed_midway", 0),
            "differences": {k: totals.get(k, 0) for k in sorted(set(totals) | DEFAULT_KEYS[job.name])},
            "per_trial": kills}


DEFAULT_KEYS = {"annotate": {"records_lost", "records_duplicated", "records_different", "shard_rows_duplicated"},
                "train": {"predictions_lost", "predictions_different"},
                "run": {"records_lost", "records_duplicated", "records_different", "predictions_lost",
                        "predictions_different", "metrics_different", "results_different"}}


def world_questions(path: Path, n: int) -> None:
    """``n`` questions of the packaged world as a QA JSONL file."""
    from elical.run.config import load_run_config
    from elical.run.subjects.by_name import world_subject

    cfg = load_run_config(overrides={"questions": {"max_train": n, "max_eval_per_dataset": 1}})
    items = [it for it in world_subject(cfg).items if it.split == "train"][:n]
    path.write_text("".join(json.dumps({"question": it.question, "answer": it.answers}) + "\n" for it in items))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=3, help="Kills (and resumes) per command.")
    parser.add_argument("--questions", type=int, default=96, help="Questions the annotate job annotates.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the kill times.")
    parser.add_argument("--work", default=None, help="Folder for the runs (default: a temporary one, removed).")
    parser.add_argument("--only", choices=["annotate", "train", "run"], action="append", help="Just these jobs.")
    parser.add_argument("--chunk-seconds", type=float, default=None,
                        help="annotate job: also write a shard once its chunk has run this long (time-sized shards).")
    parser.add_argument("--pipeline", choices=["auto", "on", "off"], default="auto",
                        help="annotate and run jobs: annotate.pipeline (auto: off on a CPU, on with a GPU).")
    args = parser.parse_args()
    import elical

    print("machine before:", machine(), flush=True)
    print(f"elical {elical.__version__} from {Path(elical.__file__).parent}", flush=True)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        world_questions(work / "questions.jsonl", args.questions)
        pipeline = {"auto": None, "on": True, "off": False}[args.pipeline]
        run_config = RUN_CONFIG if pipeline is None else RUN_CONFIG.replace("device: cpu}", f"device: cpu, pipeline: {str(pipeline).lower()}}}")
        (work / "run.yaml").write_text(run_config)
        print(f"annotate.pipeline: {args.pipeline}", flush=True)
        jobs = {"annotate": lambda: annotate_job(work / "questions.jsonl", args.chunk_seconds, pipeline),
                "train": lambda: train_job(work / "annotate-base" / "records.parquet", work / "annotate-base" / "records.parquet"),
                "run": lambda: run_job(work / "run.yaml")}
        wanted = args.only or list(jobs)
        if "train" in wanted and not (work / "annotate-base" / "records.parquet").exists():
            run_to_end(annotate_job(work / "questions.jsonl").command(work / "annotate-base"))
        start = time.perf_counter()
        for name in wanted:
            report = trial_runs(jobs[name](), work, args.n, rng)
            print(json.dumps(report), flush=True)
        print(f"total {time.perf_counter() - start:.0f} s")
    print("machine after:", machine())


if __name__ == "__main__":
    main()
