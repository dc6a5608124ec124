"""What an annotation folder holds: its shard files and every output the annotation step writes there
(what ``overwrite`` deletes, and what tells a fresh folder from a resumed one)."""

from __future__ import annotations

from pathlib import Path

from elical.data.items import parse_shard


def shard_files(out_dir: Path, shard: str) -> list[Path]:
    """This shard's record files already written, in order."""
    index, count = parse_shard(shard)
    return sorted((out_dir / "shards").glob(f"part-{index}of{count}-*.parquet"))


def step_outputs(out_dir: Path) -> list[Path]:
    """Everything an annotation writes in ``out_dir`` (what ``overwrite`` deletes; nothing else is touched)."""
    return [out_dir / "annotate.yaml", out_dir / "shards", out_dir / "records.parquet",
            *out_dir.glob("meta-*of*.json"), *out_dir.glob("judge_cache.sqlite*")]
