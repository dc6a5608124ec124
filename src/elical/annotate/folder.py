"""What an annotation folder holds: its shard files (and their writers: the ids a shard must hold, its part
files) and every output the annotation step writes there (what ``overwrite`` deletes, and what tells a fresh
folder from a resumed one)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from elical.core.io import atomic_write
from elical.data.items import parse_shard
from elical.records import Record, write_parquet


def shard_files(out_dir: Path, shard: str) -> list[Path]:
    """This shard's record files already written, in order."""
    index, count = parse_shard(shard)
    return sorted((out_dir / "shards").glob(f"part-{index}of{count}-*.parquet"))


def step_outputs(out_dir: Path) -> list[Path]:
    """Everything an annotation writes in ``out_dir`` (what ``overwrite`` deletes; nothing else is touched)."""
    return [out_dir / "annotate.yaml", out_dir / "shards", out_dir / "records.parquet",
            *out_dir.glob("meta-*of*.json"), *out_dir.glob("judge_cache.sqlite*")]


def write_expected(out_dir: Path, index: int, count: int, ids: Sequence[str]) -> None:
    """Record the ids shard ``index`` of ``count`` must hold (what a resume and the merge check against)."""
    (out_dir / "shards").mkdir(parents=True, exist_ok=True)
    with atomic_write(out_dir / "shards" / f"expected-{index}of{count}.json") as tmp:
        tmp.write_text(json.dumps(list(ids)))


def write_part(records: Sequence[Record], out_dir: Path, index: int, count: int, seq: int) -> int:
    """Write a chunk's records to the shard's first free part file numbered ``seq`` or later; the next number."""
    while (path := out_dir / "shards" / f"part-{index}of{count}-{seq:05d}.parquet").exists():
        seq += 1
    write_parquet(records, path)
    return seq + 1
