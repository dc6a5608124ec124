"""Split a labelled sheet into two halves by question (a seeded hash of the record id), each half keeping
its population weights: a stratum's weights in a half add up to the stratum's size, as in the whole sheet.
One half is for writing rules on, the other stays held out (issue 21's fourth round).

    python benchmarks/labels_split.py SHEET.jsonl DEV.jsonl TEST.jsonl [--salt 39]
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import defaultdict
from pathlib import Path

from elical.records import iter_json_objects


def half_of(record_id: str, salt: str) -> int:
    """0 or 1, the same for every item of one question."""
    return hashlib.sha1(f"{salt}/{record_id}".encode()).digest()[0] & 1


def split(rows: list[dict], salt: str) -> tuple[list[dict], list[dict]]:
    """The two halves, each row's weight rescaled so that each stratum keeps its population in each half."""
    size: dict[str, float] = defaultdict(float)
    for row in rows:
        size[row["stratum"]] += row["weight"]
    halves: tuple[list[dict], list[dict]] = ([], [])
    for row in rows:
        halves[half_of(row["record_id"], salt)].append(dict(row))
    for half in halves:
        count: dict[str, int] = defaultdict(int)
        for row in half:
            count[row["stratum"]] += 1
        for row in half:
            row["weight"] = size[row["stratum"]] / count[row["stratum"]]
    return halves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sheet", type=Path)
    parser.add_argument("dev", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("--salt", default="39")
    args = parser.parse_args()
    rows = [row for _, row in iter_json_objects(args.sheet)]
    for path, half in zip((args.dev, args.test), split(rows, args.salt)):
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in half), encoding="utf-8")
        print(f"{path}: {len(half)} items, {len({r['stratum'] for r in half})} strata")


if __name__ == "__main__":
    main()
