"""A fresh held-out labelling sheet from the paper-prompt run's relabelled records, disjoint from every
labelled set in tests/data/labels (issue 21's second test round).

Strata are the current judges' decisions (match@4, answer@3) per task and dataset; an item already in
a labelled set is left out of the pool before the draw, so the weights estimate the judges on the
items nobody has looked at. Records: `benchmarks/labels_relabel.py`'s output for the paper prompt.

    python benchmarks/labels_fresh_draw.py RELABELLED_RECORDS_DIR OUT.jsonl [--seed 21]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from elical.audit.sample import candidates, draw, sheet_row, write_sheet
from elical.records import read_records

PER_STRATUM = {"correctness": 38, "consistency": 22}  # the sizes of the first test round
JUDGES = {"correctness": "match@4", "consistency": "answer@3"}


def labelled_items(folder: Path) -> set[str]:
    return {json.loads(line)["item"] for path in folder.glob("*.jsonl")
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--labelled", type=Path, default=Path("tests/data/labels"))
    args = parser.parse_args()
    seen = labelled_items(args.labelled)
    records = read_records(sorted(args.records.glob("*.parquet")))
    rows = []
    for task, n in PER_STRATUM.items():
        pool = [c for c in candidates(records, (task,)) if c.item not in seen]
        rows += [sheet_row(c, w, JUDGES[task]) | {"prompt_style": "paper"} for c, w in draw(pool, n, args.seed)]
    write_sheet(rows, args.out)
    print(f"{len(rows)} items ({len(seen)} labelled items left out of the pool) -> {args.out}")


if __name__ == "__main__":
    main()
