"""The judge cache's disk writes over a long annotation: one transaction per batch (``flush_at=0``, write-through)
against ``CACHE_FLUSH_AT`` judgements per transaction, with the real :class:`elical.annotate.judges.JudgeCache`.

Each batch looks its keys up (``get_many``), then stores them (``put_many``), as ``CachedJudge`` does; keys are
SHA-1 hex digests, as ``query_key`` makes them. Defaults: 131 batches of 8,400 keys (26,800 SmolLM2 questions at
k=20 in batches of 204 questions, both judges' queries).

    python benchmarks/bench_judge_cache.py [--batches 131] [--per-batch 8400]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import tempfile
import time
from pathlib import Path

from elical.annotate.judge_factory import CACHE_FLUSH_AT
from elical.annotate.judges import JudgeCache


def run(flush_at: int, batches: int, per_batch: int) -> tuple[float, float]:
    """Seconds spent looking keys up and storing them (the final flush included)."""
    with tempfile.TemporaryDirectory() as folder:
        cache = JudgeCache(Path(folder) / "judge_cache.sqlite", flush_at=flush_at)
        get = put = 0.0
        for b in range(batches):
            keys = [hashlib.sha1(f"{b}-{i}".encode()).hexdigest() for i in range(per_batch)]
            start = time.perf_counter()
            cache.get_many(keys)
            middle = time.perf_counter()
            cache.put_many(dict.fromkeys(keys, True))
            get, put = get + middle - start, put + time.perf_counter() - middle
        start = time.perf_counter()
        cache.close()
        return get, put + time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=131)
    parser.add_argument("--per-batch", type=int, default=8400)
    args = parser.parse_args()
    print(f"machine: {platform.node()} | {platform.machine()} | {os.cpu_count()} CPUs | "
          f"{args.batches} batches x {args.per_batch} keys")
    for flush_at in (0, CACHE_FLUSH_AT):
        get, put = run(flush_at, args.batches, args.per_batch)
        print(f"flush_at {flush_at}: get_many {get:.1f} s | put_many + close {put:.1f} s")


if __name__ == "__main__":
    main()
