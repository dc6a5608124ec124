"""Relabel annotated records with other judges (correctness and consistency of every greedy answer and
sample), keeping the generations: how benchmarks/labels_gpu.sh's records get the current judges' labels
on a CPU, so the same generations can be compared under old and new labels.

    python benchmarks/labels_relabel.py IN_DIR OUT_DIR [--correctness match] [--consistency answer]

IN_DIR/records/{train,eval}.parquet -> OUT_DIR/{train,eval}.parquet (an `elical annotate` folder's
IN_DIR/records.parquet -> OUT_DIR/records.parquet); each record's generation["judges"] names the judges
that labelled it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from elical.annotate.config import AnnotateConfig
from elical.annotate.judge_factory import judge_maker
from elical.annotate.judge_registry import DEFAULT_JUDGE
from elical.annotate.judges import CachedJudge
from elical.annotate.pipeline import Judges
from elical.annotate.relabel import judge_again
from elical.records import read_parquet, write_parquet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--correctness", default=DEFAULT_JUDGE["correctness"])
    parser.add_argument("--consistency", default=DEFAULT_JUDGE["consistency"])
    args = parser.parse_args()
    make = judge_maker(AnnotateConfig())
    judges = Judges(CachedJudge(make(args.correctness)), CachedJudge(make(args.consistency)))
    args.out.mkdir(parents=True, exist_ok=True)
    # a run folder (records/train.parquet, records/eval.parquet) or an annotate folder (records.parquet)
    single = args.source / "records.parquet"
    parts = {"records": single} if single.exists() else {p: args.source / "records" / f"{p}.parquet" for p in ("train", "eval")}
    for part, path in parts.items():
        start = time.perf_counter()
        records = read_parquet(path)
        names = judge_again(records, judges)
        answered = [r for r in records if not r.failed]
        write_parquet(records, args.out / f"{part}.parquet")
        print(f"{part}: {len(records)} records relabelled by {names} in {time.perf_counter() - start:.0f} s; "
              f"greedy accuracy {sum(r.greedy_correct or 0 for r in answered) / max(len(answered), 1):.3f}")


if __name__ == "__main__":
    main()
