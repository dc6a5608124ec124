"""Same outputs from two copies of the code: a tiny `elical run` (default world subject, honesty on) under each,
side by side: every settings/<step>.json digest, every file of every model folder (sha256), the gate's
values, the records, scores, metrics, differences and honesty tables, and the rows of results.csv; then the base
run folder resumed by the new code, which must leave every one of those outputs as it was. Exit status 1 if
anything differs (a settings record only the new code writes, for a step of its own, is listed, not counted).

    python benchmarks/same_outputs.py                      # `git archive 1c1592e src` against the working tree
    python benchmarks/same_outputs.py --rev HEAD~3
    python benchmarks/same_outputs.py --base-src /path/to/other/src --new-src src

Each run is a subprocess with PYTHONPATH=<tree>/src (the ELICAL_SRC convention of benchmarks/*.sh), on the CPU,
one torch thread, answering with one copy of the packaged world LM (the base tree's, copied beside the runs: the
model's path enters the settings, so each tree's own copy would differ by its place alone). gate.json files are compared by their gate (tau, objective, validation score and size,
retrieval band), not their bytes: their format may change between the copies. Files are compared as
:func:`sha` says (run folder path, timestamps and the command line left out).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = {  # tests/run/test_run_honesty.py's tiny world run: two methods, two budgets, one seed, honesty with the gate
    "name": "same-outputs", "torch_threads": 1,
    "questions": {"max_train": 40, "max_eval_per_dataset": 6},
    "annotate": {"k": 3, "batch_size": 48},
    "train": {"methods": ["eli-only", "cal-only", "elical"], "budgets": [30, "all"], "seeds": [0], "stage2_passes": 40,
              "settings": {"epochs_stage1": 1, "batch_size": 8}},
    "evaluate": {"n_resamples": 5, "alignment_repeats": 2},
    "honesty": {"methods": ["absolute"], "budget": 30, "max_eval_per_dataset": 4,
                "settings": {"tune": {"max_steps": 3, "batch_size": 4}}},
}
RUN = """
import json, sys
from elical.run.config import load_run_config
from elical.run.pipeline import run_pipeline
cfg = load_run_config(overrides=json.loads(sys.argv[2]))
run_pipeline(cfg, sys.argv[1], log=lambda line: print(line, flush=True))
"""
GATE_KEYS = ("tau", "objective", "validation_score", "n_validation", "retrieve_below")


def archive_src(rev: str, into: Path) -> Path:
    """``git archive REV src`` extracted under ``into``; returns its src folder."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True).stdout
    tar_path = into / "src.tar"
    tar_path.write_bytes(data)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into)
    return into / "src"


def run(src: Path, out: Path, config: dict) -> float:
    """The tiny run with the package of ``src``; its wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(src), "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", RUN, str(out), json.dumps(config)], env=env, cwd=out.parent,
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the run with {src} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    imported = subprocess.run([sys.executable, "-c", "import elical; print(elical.__file__)"], env=env,
                              capture_output=True, text=True, check=True).stdout.strip()
    if not imported.startswith(str(src)):
        sys.exit(f"PYTHONPATH={src} imported elical from {imported}")
    return time.perf_counter() - start


def sha(path: Path, run_dir: Path) -> str:
    """sha256 of a file as it would read in any run folder: the run folder's own path is replaced by <run>, and
    what says when and by which command a file was made (provenance "created" and "command") is left out; peft's
    target_modules (a set, written in the process's hash order) are sorted; a Parquet file by its rows and its
    metadata (the file bytes carry the writer's version)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        meta = {k.decode(): _json_or_text(v.decode()) for k, v in (table.schema.metadata or {}).items() if k != b"pandas"}
        text = table.to_pandas().to_csv(index=False) + json.dumps(meta, sort_keys=True)
    else:
        text = path.read_bytes().decode("utf-8", errors="surrogateescape")
        if path.suffix == ".json":
            text = json.dumps(_stable(json.loads(text)), sort_keys=True)
        else:
            text = "\n".join(line for line in text.splitlines() if not line.lstrip("- ").startswith("created"))
    if path.suffix not in (".safetensors", ".bin"):
        text = text.replace(str(run_dir), "<run>")
    return hashlib.sha256(text.encode("utf-8", errors="surrogateescape")).hexdigest()[:16]


def _json_or_text(text: str):
    try:
        return _stable(json.loads(text))
    except ValueError:
        return text


def _stable(value):
    if isinstance(value, dict):
        return {k: sorted(v) if k == "target_modules" and isinstance(v, list) else _stable(v)
                for k, v in value.items() if k not in ("created", "command")}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def outputs(run_dir: Path) -> dict[str, str]:
    """What is compared, as name -> value."""
    found: dict[str, str] = {}
    for path in sorted((run_dir / "settings").glob("*.json")):
        found[f"settings/{path.name} digest"] = json.loads(path.read_text())["digest"]
    for folder in sorted(p for p in run_dir.glob("models/*/model") if p.is_dir()):
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = path.relative_to(run_dir)
            if path.name == "gate.json":
                continue
            found[f"{rel} sha256"] = sha(path, run_dir)
    for path in sorted(run_dir.rglob("gate.json")):
        gate = json.loads(path.read_text())
        found[f"{path.relative_to(run_dir)} gate"] = "none" if gate is None else json.dumps(
            {key: gate.get(key) for key in GATE_KEYS})
    tables = ["records/*.parquet", "scores/*.parquet", "metrics.csv", "differences.csv", "honesty/honesty_comparison.csv"]
    for path in sorted(p for pattern in tables for p in run_dir.glob(pattern)):
        found[f"{path.relative_to(run_dir)} sha256"] = sha(path, run_dir)
    with open(run_dir / "results.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            key = " ".join(row[c] for c in ("method", "budget", "seed", "split", "metric"))
            found[f"results.csv {key}"] = row["value"]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="1c1592e", help="the commit whose src is the base (git archive)")
    parser.add_argument("--base-src", type=Path, help="a base src folder instead of --rev")
    parser.add_argument("--new-src", type=Path, default=ROOT / "src")
    parser.add_argument("--out", type=Path, help="keep the two run folders here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="same-outputs-") as tmp:
        work = args.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        base_src = args.base_src.resolve() if args.base_src else archive_src(args.rev, work)
        base_name = str(args.base_src) if args.base_src else f"{args.rev} (git archive)"
        print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}")
        print(f"base: {base_name}\nnew:  {args.new_src.resolve()}\nconfig: {json.dumps(TINY)}, model: a copy of the world LM\n")
        lm = work / "world-lm"
        if not lm.exists():
            shutil.copytree(base_src / "elical" / "world" / "assets" / "world-lm", lm)
        config = {**TINY, "model": str(lm)}
        found = {}
        for name, src in (("base", base_src), ("new", args.new_src.resolve())):
            (work / name).mkdir(exist_ok=True)
            seconds = run(src, work / name / "run", config)
            print(f"{name}: run in {seconds:.0f} s")
            found[name] = outputs(work / name / "run")
        seconds = run(args.new_src.resolve(), work / "base" / "run", config)  # the base folder, resumed by the new code
        resumed = outputs(work / "base" / "run")
    keys = sorted(set(found["base"]) | set(found["new"]))
    width = max(map(len, keys))
    print(f"\n{'output':<{width}}  {'base':<18}  {'new':<18}  same")
    differ = 0
    for key in keys:
        a, b = found["base"].get(key, "-"), found["new"].get(key, "-")
        differ += a != b
        if len(a) > 18 or len(b) > 18:
            print(f"{key:<{width}}  {'yes' if a == b else 'NO'}\n    base: {a}\n    new:  {b}")
        else:
            print(f"{key:<{width}}  {a:<18}  {b:<18}  {'yes' if a == b else 'NO'}")
    added = sorted(set(found["new"]) - set(found["base"]))
    if added and all(key.startswith("settings/") for key in added):  # a step the base code did not record
        differ -= len(added)
        print(f"only the new code records: {', '.join(added)} (a step of its own, not a changed output)")
    print(f"\n{len(keys)} outputs compared, {differ} differ: " + ("identical" if not differ else "NOT identical"))
    changed = [key for key in found["base"] if resumed.get(key) != found["base"][key]]
    print(f"the base folder resumed by the new code in {seconds:.0f} s: {len(found['base']) - len(changed)} of "
          f"{len(found['base'])} outputs unchanged" + (f"; changed: {', '.join(changed)}" if changed else "")
          + (f"; added: {', '.join(sorted(set(resumed) - set(found['base'])))}" if set(resumed) - set(found["base"]) else ""))
    return 1 if differ or changed else 0


if __name__ == "__main__":
    sys.exit(main())
