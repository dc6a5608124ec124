"""Helpers of benchmarks/smollm2_qa_gpu.sh: split the real QA sets, gather annotated records, print the table.

    python benchmarks/smollm2_qa.py split --data ../shared/data/qa --out RUN/data --pool 6000 --eval 3000
    python benchmarks/smollm2_qa.py records --pool RUN/ann-pool --eval RUN/ann-eval --out RUN/records
    python benchmarks/smollm2_qa.py epochs --labels 1000        # stage-2 epochs: 20000 / labels in [3, 50]
    python benchmarks/smollm2_qa.py table --run RUN [--out table.md]

The calibration pool and the in-domain evaluation questions come from the same four sets (NQ, HotpotQA,
2Wiki, ParaRel) split by question: a question text (normalised) lands on one side only. PopQA, SQuAD
and WebQuestions are evaluated out of domain.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
from pathlib import Path

IN_DOMAIN = {"nq": "nq_test.jsonl", "hq": "hq_dev.jsonl", "2wiki": "2wiki_dev.jsonl", "pararel": "pararel_test.jsonl"}
OOD = {"popqa": "popqa_test.jsonl", "squad": "squad_dev.jsonl", "wq": "wq_test.jsonl"}
METHODS = {"eli-only": "Eli-Only", "elical": "EliCal", "elical_lr2": "EliCal lr2", "cal-only": "Cal-Only"}


def _key(question: str) -> str:
    return re.sub(r"\W+", " ", question.lower()).strip()


def _read(path: Path) -> list[dict]:
    """Questions of a JSONL file, each question text once."""
    seen: set[str] = set()
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if _key(row["question"]) not in seen:
                seen.add(_key(row["question"]))
                rows.append({"question": row["question"], "answer": row["answer"]})
    return rows


def _write(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def split(data: Path, out: Path, pool: int, n_eval: int, seed: int) -> dict[str, int]:
    """pool/<set>_train.jsonl (pool / 4 questions of each in-domain set), eval/<set>_test.jsonl (the
    evaluation questions: half in-domain, held apart by question, half out of domain). Returns counts."""
    rng = random.Random(seed)
    per_pool, per_in, per_ood = pool // len(IN_DOMAIN), n_eval // 2 // len(IN_DOMAIN), n_eval // 2 // len(OOD)
    counts: dict[str, int] = {}
    taken: set[str] = set()
    for name, file in IN_DOMAIN.items():
        rows = _read(data / file)
        rng.shuffle(rows)
        if len(rows) < per_pool + per_in:
            raise ValueError(f"{file}: {len(rows)} questions, fewer than pool {per_pool} + eval {per_in}")
        _write(rows[:per_pool], out / "pool" / f"{name}_train.jsonl")
        _write(rows[per_pool:per_pool + per_in], out / "eval" / f"{name}_test.jsonl")
        taken |= {_key(r["question"]) for r in rows[:per_pool]}
        counts[f"{name}_train"], counts[f"{name}_test"] = per_pool, per_in
    for name, file in OOD.items():
        rows = [r for r in _read(data / file) if _key(r["question"]) not in taken]
        rng.shuffle(rows)
        _write(rows[:per_ood], out / "eval" / f"{name}_test.jsonl")
        counts[f"{name}_test"] = min(per_ood, len(rows))
    return counts


def records(pool_dir: Path, eval_dir: Path, out: Path) -> dict[str, int]:
    """train.parquet (the pool) and eval.parquet from two annotation folders, failed questions left out."""
    from elical.records import read_parquet, write_parquet

    counts = {}
    for name, folder in (("train", pool_dir), ("eval", eval_dir)):
        recs = read_parquet(folder / "records.parquet")
        kept = [r for r in recs if not r.failed]
        write_parquet(kept, out / f"{name}.parquet")
        counts[name], counts[f"{name}_failed"] = len(kept), len(recs) - len(kept)
    return counts


def _auroc(conf: list[float], correct: list[int]) -> float:
    from elical.metrics.calibration import auroc

    return auroc(conf, correct) if 0 < sum(correct) < len(correct) else math.nan


def _weighted(values: list[tuple[float, int]]) -> float:
    return sum(a * n for a, n in values) / sum(n for _, n in values) if values else math.nan


def group_auroc(run: Path) -> dict[str, dict[str, float]]:
    """Per score file (model name): AUROC per group, datasets averaged weighted by their size (datasets
    where it is undefined, all answers right or all wrong, left out)."""
    from elical.evaluation.evaluate import DATASET_GROUPS
    from elical.model.predictions import read_predictions
    from elical.records import read_parquet

    evals = read_parquet(run / "records" / "eval.parquet")
    result: dict[str, dict[str, float]] = {}
    for scores in sorted((run / "scores").glob("*.parquet")):
        conf = read_predictions(scores).confidence
        by: dict[str, tuple[list[float], list[int]]] = {}
        for rec in evals:
            if rec.id in conf and rec.greedy_correct is not None:
                c, y = by.setdefault(rec.dataset, ([], []))
                c.append(conf[rec.id])
                y.append(int(rec.greedy_correct))
        groups: dict[str, list[tuple[float, int]]] = {}
        for dataset, (c, y) in by.items():
            groups.setdefault(DATASET_GROUPS.get(dataset, "other"), []).append((_auroc(c, y), len(y)))
        result[scores.stem] = {g: _weighted([(a, n) for a, n in v if math.isfinite(a)]) for g, v in groups.items()}
    return result


def _stage2_note(run: Path, name: str) -> str:
    """Which epoch the last stage kept, of how many run (from train_summary.json)."""
    summary = run / "models" / name / "train_summary.json"
    if not summary.exists():
        return ""
    stage = json.loads(summary.read_text())["stages"][-1]
    return f"kept {stage['best_epoch']}/{stage['epochs_run']}"


def table(run: Path) -> str:
    """In-domain AUROC per method and seed, EliCal(budget)/Cal-Only(all) per seed, mean and std."""
    aurocs = group_auroc(run)
    rows: dict[str, dict[int, str]] = {}
    values: dict[str, dict[int, float]] = {}
    for name, groups in aurocs.items():
        head, _, seed = name.rpartition("-s")
        method, _, budget = head.rpartition("-")
        label = f"{METHODS.get(method, method)}" + ("" if method == "eli-only" else f" ({budget})")
        values.setdefault(label, {})[int(seed)] = groups.get("in-domain", math.nan)
        note = _stage2_note(run, name)
        rows.setdefault(label, {})[int(seed)] = f"{groups.get('in-domain', math.nan):.3f}" + (f" [{note}]" if note else "")
    seeds = sorted({s for v in values.values() for s in v})
    lines = ["| in-domain AUROC | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | std |",
             "|---" * (len(seeds) + 3) + "|"]

    def add(label: str, cells: dict[int, str], numbers: dict[int, float]) -> None:
        finite = [v for v in numbers.values() if math.isfinite(v)]
        mean = f"{statistics.mean(finite):.3f}" if finite else "-"
        std = f"{statistics.stdev(finite):.3f}" if len(finite) > 1 else "-"
        lines.append(f"| {label} | " + " | ".join(cells.get(s, "-") for s in seeds) + f" | {mean} | {std} |")

    for label in sorted(values):
        add(label, rows[label], values[label])
    for reference in sorted(k for k in values if k.startswith("Cal-Only (all")):
        upper = values[reference]
        for label in sorted(k for k in values if k.startswith("EliCal")):
            ratio = {s: values[label][s] / upper[s] for s in seeds if s in values[label] and s in upper}
            add(f"{label} / {reference}", {s: f"{r:.3f}" for s, r in ratio.items()}, ratio)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("split")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--pool", type=int, default=6000)
    p.add_argument("--eval", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("records")
    p.add_argument("--pool", type=Path, required=True)
    p.add_argument("--eval", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("epochs")
    p.add_argument("--labels", type=int, required=True)
    p.add_argument("--passes", type=int, default=20000)
    p.add_argument("--low", type=int, default=3)
    p = sub.add_parser("table")
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.command == "split":
        print(json.dumps(split(args.data, args.out, args.pool, args.eval, args.seed)))
    elif args.command == "records":
        print(json.dumps(records(args.pool, args.eval, args.out)))
    elif args.command == "epochs":
        from elical.train.config import stage2_epochs

        print(stage2_epochs(args.labels, passes=args.passes, min_epochs=args.low))
    else:
        text = table(args.run)
        if args.out:
            args.out.write_text(text + "\n")
        print(text)


if __name__ == "__main__":
    main()
