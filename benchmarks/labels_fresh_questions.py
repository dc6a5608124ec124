"""Fresh questions for a third held-out labelling round (issue 21): per dataset, a seeded draw of
questions that no record of the given runs holds, written as one QA file per dataset under the
dataset's own file name (so the records keep their dataset names).

    python benchmarks/labels_fresh_questions.py OUT_DIR --exclude RECORDS_DIR [--per-dataset 1000] [--seed 23]
    python benchmarks/labels_fresh_questions.py OUT_DIR --exclude-sheets tests/data/labels --seed 39

`--exclude-sheets` leaves out the questions of every labelled sheet (*.jsonl) in a folder (the fourth round,
when the runs' records were no longer at hand). `--sources` and `--mmlu` name other files where the default ones run
out of fresh questions (the seventh round: WebQuestions' train split, MMLU's dev split):

    python benchmarks/labels_fresh_questions.py OUT_DIR --exclude-sheets tests/data/labels --exclude FOURTH \
        --exclude SIXTH --seed 47 --sources qa/2wiki_dev.jsonl ... qa/wq_train.jsonl --mmlu mmlu/dev

The eighth to eleventh rounds left out only the labelled sheets (`--exclude-sheets tests/data/labels --seed 53` / `59` /
`61` / `67`,
the default sources): questions an earlier round generated but nobody read may come back, and no rule was written on them.

Then annotate them like `smollm2-qa-full` (paper prompt, 24 new tokens) and relabel/draw with
benchmarks/labels_fresh_draw.py --sizes-from RECORDS_DIR, which scales each dataset to its size in the run.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
from pathlib import Path

from elical.records import iter_json_objects, read_records

SOURCES = ["qa/2wiki_dev.jsonl", "qa/hq_dev.jsonl", "qa/musique_train.jsonl", "qa/nq_test.jsonl",
           "qa/pararel_test.jsonl", "qa/popqa_test.jsonl", "qa/squad_dev.jsonl", "qa/wq_test.jsonl"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--exclude", type=Path, action="append", default=[])
    parser.add_argument("--exclude-sheets", type=Path, action="append", default=[])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--per-dataset", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--sources", nargs="+", default=SOURCES, help="QA files under --data (default: the test sets)")
    parser.add_argument("--mmlu", default="mmlu/val", help="MMLU's CSV folder under --data")
    args = parser.parse_args()
    if not args.exclude and not args.exclude_sheets:
        parser.error("give --exclude RECORDS_DIR or --exclude-sheets DIR: the questions to leave out")
    seen = {r.question.strip() for folder in args.exclude for r in read_records(sorted(folder.glob("*.parquet")))}
    seen |= {row["question"].strip() for folder in args.exclude_sheets for path in sorted(folder.glob("*.jsonl"))
             for _, row in iter_json_objects(path)}  # lines end at "\n" only: a reply may hold U+0085
    args.out.mkdir(parents=True, exist_ok=True)
    for source in args.sources:
        rows = [row for _, row in iter_json_objects(args.data / source)]
        fresh = [row for row in rows if row["question"].strip() not in seen]
        picked = random.Random(args.seed).sample(fresh, min(args.per_dataset, len(fresh)))
        (args.out / Path(source).name).write_text("".join(json.dumps(row) + "\n" for row in picked), encoding="utf-8")
        print(f"{source}: {len(rows)} questions, {len(fresh)} fresh, {len(picked)} written")
    mmlu(args.data / args.mmlu, args.out / args.mmlu, seen, args.per_dataset, args.seed)


def mmlu(source: Path, out: Path, seen: set[str], n: int, seed: int) -> None:
    """MMLU's validation CSVs (question, four options, letter), fresh rows only, kept per subject file."""
    rows = [(path.name, row) for path in sorted(source.glob("*.csv"))
            for row in csv.reader(io.StringIO(path.read_text(encoding="utf-8")))]
    fresh = [(name, row) for name, row in rows if row[0].strip() not in seen]
    picked = random.Random(seed).sample(fresh, min(n, len(fresh)))
    out.mkdir(parents=True, exist_ok=True)
    for name in sorted({name for name, _ in picked}):
        buffer = io.StringIO()
        csv.writer(buffer).writerows(row for row_name, row in picked if row_name == name)
        (out / name).write_text(buffer.getvalue(), encoding="utf-8")
    print(f"{source.parent.name}/{source.name}: {len(rows)} questions, {len(fresh)} fresh, {len(picked)} written")


if __name__ == "__main__":
    main()
