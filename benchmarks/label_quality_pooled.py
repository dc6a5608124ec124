"""One judge's population-weighted quality pooled over several labelled draws (issue 21): each draw is a sample of
the same run population, so the pooled estimate is the draws' average (each draw's weights divided by the number of
draws; strata kept apart per draw for the stratified bootstrap). A single draw's precision moves by ten points from one
draw to the next; pooling the draws a judge was never written on gives the estimate to trust.

    python benchmarks/label_quality_pooled.py --commit d7eaa21 \
        --sets tests/data/labels/paper_correctness_test7.jsonl tests/data/labels/paper_correctness_test8.jsonl ...

The judge is the task's rules (match for correctness, answer for consistency; `--judge` names another) in the code that runs: for an older
version, run it from a worktree of that commit with PYTHONPATH pointing at its src (`--commit` is only recorded).
Each sheet's items are those of benchmarks/label_quality.py (`labelled`).
"""

from __future__ import annotations

import argparse
import platform
from dataclasses import replace
from pathlib import Path

from label_quality import labelled  # the sibling script (benchmarks/ is on the path when a script there runs)

from elical.annotate.config import AnnotateConfig
from elical.annotate.judge_check import read_pairs
from elical.annotate.judge_factory import judge_maker
from elical.annotate.judges import Judge
from elical.audit.score import Labelled, quality_cell, quality_table
from elical.records import iter_json_objects


def pooled_items(paths: list[Path], judge: Judge, draws: int) -> list[Labelled]:
    """The sheets' items decided by ``judge``, weights divided by the pool's number of draws, strata kept apart
    per sheet."""
    items: list[Labelled] = []
    for path in paths:
        rows = [row for _, row in iter_json_objects(path)]
        decisions = judge.judge_batch([pair.query for pair in read_pairs(path)])
        items += [replace(item, weight=item.weight / draws, stratum=f"{path.stem}/{item.stratum}")
                  for item in labelled(rows, decisions)]
    return items


def pooled(paths: list[Path], kind: str | None = None) -> tuple[str, list[Labelled]]:
    """The judge's name and the pooled items of the sheets (one task), each draw's weights averaged in; ``kind``
    names the judge (None: the task's rules, match or answer, which every older commit has)."""
    task = next(row for _, row in iter_json_objects(paths[0]))["task"]
    judge = judge_maker(AnnotateConfig())(kind or ("match" if task == "correctness" else "answer"))
    return judge.name, pooled_items(paths, judge, len(paths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=Path, nargs="+", required=True)
    parser.add_argument("--judge", default=None, help="a judge's name (default: the task's rules, match or answer)")
    parser.add_argument("--commit", default="", help="the commit whose judges ran (recorded in the output)")
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    name, items = pooled(args.sets, args.judge)
    overall = quality_table(items, by=(), n_resamples=args.resamples)[0]
    cells = " | ".join(quality_cell(overall, k) for k in ("error", "precision", "recall"))
    print(f"| {name} ({args.commit or 'working tree'}) | {', '.join(p.stem for p in args.sets)} | {len(items)} | "
          f"{cells} |  <!-- {platform.node()} -->")


if __name__ == "__main__":
    main()
