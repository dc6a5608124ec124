"""Time `evaluate` on N synthetic records (real questions where ../shared/data is present).

Usage: python benchmarks/bench_evaluate.py [--records 100000] [--resamples 200] [--k 20]

Prints the machine, the time of each stage (reading the HonestyBench JSONL, baselines, metrics with
bootstrap intervals, writing the report) and the total. The issue's target: 100k records with all
baselines and 200 resamples in under 60 s on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from elical.confidence import applicable_estimators, score_records
from elical.data.synthetic import synthetic_records
from elical.evaluation.evaluate import EvalConfig, evaluate
from elical.records import read_records, write_jsonl
from elical.report import write_evaluation

QA = Path(__file__).resolve().parents[2] / "shared" / "data" / "qa"
DATASETS = ["nq_test", "hq_dev", "2wiki_dev", "pararel_test", "popqa_test", "squad_dev", "wq_test"]


def questions(stem: str, n: int) -> list[tuple[str, list[str]]]:
    """n (question, aliases) pairs from the real file, cycled if short; synthetic ones without data."""
    path = QA / f"{stem}.jsonl"
    if path.exists():
        rows = [json.loads(line) for line in path.open(encoding="utf-8")]
        base = [(r["question"], r["answer"]) for r in rows]
    else:
        base = [(f"{stem} question {i}?", [f"answer {i}"]) for i in range(n)]
    return [(f"{q} [{i // len(base)}]" if i >= len(base) else q, a) for i, (q, a) in
            ((i, base[i % len(base)]) for i in range(n))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--k", type=int, default=20)
    args = parser.parse_args()

    per_dataset = args.records // len(DATASETS)
    with tempfile.TemporaryDirectory() as tmp:
        for seed, stem in enumerate(DATASETS):
            records = synthetic_records(questions(stem, per_dataset), stem.split("_")[0], k=args.k, seed=seed)
            write_jsonl(records, Path(tmp) / f"{stem}.jsonl", fmt="honestybench")

        timings = {}
        start = time.perf_counter()
        records = read_records(tmp)
        timings["read HonestyBench JSONL"] = time.perf_counter() - start

        start = time.perf_counter()
        estimators, _ = applicable_estimators(records)
        score_records(records, estimators)
        timings[f"baselines ({', '.join(e.name for e in estimators)})"] = time.perf_counter() - start

        start = time.perf_counter()
        evaluation = evaluate(records, config=EvalConfig(n_resamples=args.resamples))
        timings[f"evaluate incl. baselines, {args.resamples} resamples"] = time.perf_counter() - start

        start = time.perf_counter()
        write_evaluation(evaluation, Path(tmp) / "report")
        timings["write report (csv, md, png)"] = time.perf_counter() - start

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.platform()}")
    print(f"records: {len(records)} in {len(DATASETS)} datasets, k={args.k}, resamples={args.resamples}")
    for stage, seconds in timings.items():
        print(f"  {stage:<70s} {seconds:7.2f} s")
    total = sum(v for k, v in timings.items() if not k.startswith("baselines"))
    print(f"  {'total: read + evaluate + write':<70s} {total:7.2f} s  (target < 60 s)")


if __name__ == "__main__":
    main()
