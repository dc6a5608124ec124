"""Merge the shard files of one or more annotation folders, checking nothing is missing or doubled."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from elical.records import Record, read_parquet, write_parquet


class MergeError(ValueError):
    """Shards are missing, incomplete or overlap; the message says which ids and files."""


def merge_shards(
    folders: Sequence[str | Path], output: str | Path | None = None, allow_missing: bool = False
) -> list[Record]:
    """Read every ``shards/part-*.parquet`` under the folders, check each id appears once and each
    shard's expected ids are all present, and write them to ``output`` (Parquet or JSONL)."""
    records: list[Record] = []
    where: dict[str, Path] = {}
    expected: dict[str, set[str]] = {}
    counts: set[int] = set()
    for folder in map(Path, folders):
        shards = folder / "shards"
        if not shards.is_dir():
            raise MergeError(f"{folder}: no shards/ folder (not an annotation output?)")
        for path in sorted(shards.glob("expected-*of*.json")):
            name = re.fullmatch(r"expected-(\d+)of(\d+)\.json", path.name)
            if name:
                counts.add(int(name.group(2)))
                expected[f"{name.group(1)}/{name.group(2)}"] = set(json.loads(path.read_text()))
        for path in sorted(shards.glob("part-*.parquet")):
            for rec in read_parquet(path):
                if rec.id in where:
                    raise MergeError(f"duplicate id {rec.id} ({rec.question[:60]!r}) in {where[rec.id]} and {path}")
                where[rec.id] = path
                records.append(rec)
    problems = []
    if len(counts) > 1:
        problems.append(f"shard files of different shard counts: {sorted(counts)}")
    for count in counts:
        absent = [f"{i}/{count}" for i in range(count) if f"{i}/{count}" not in expected]
        if absent:
            problems.append(f"shard(s) never started: {', '.join(absent)}")
    for shard, ids in sorted(expected.items()):
        missing = sorted(ids - where.keys())
        if missing:
            problems.append(f"shard {shard}: {len(missing)} of {len(ids)} question(s) missing (e.g. {missing[0]})")
    if problems and not allow_missing:
        raise MergeError("; ".join(problems))
    if output is not None:
        from elical.records import write_jsonl

        (write_parquet if Path(output).suffix == ".parquet" else write_jsonl)(records, output)
    return records
