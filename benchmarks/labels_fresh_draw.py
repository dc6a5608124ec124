"""A fresh held-out labelling sheet from the paper-prompt run's relabelled records, disjoint from every
labelled set in tests/data/labels (issue 21's second test round).

Strata are the current judges' decisions (match@4, answer@3) per task and dataset; an item already in
a labelled set is left out of the pool before the draw, so the weights estimate the judges on the
items nobody has looked at. Records: `benchmarks/labels_relabel.py`'s output for the paper prompt.

    python benchmarks/labels_fresh_draw.py RELABELLED_RECORDS_DIR OUT.jsonl [--seed 21]

Third round (issue 21): the records are SmolLM2's answers to fresh questions (labels_fresh_questions.py,
labels_fresh_gpu.sh, relabelled by labels_relabel.py), the strata the relabelling judges' decisions, and
`--sizes-from RUN_RECORDS_DIR` scales each (task, dataset) to its size in that run (questions, times k
for consistency), so the weights estimate the judges on the run's population as the earlier rounds did:

    python benchmarks/labels_fresh_draw.py RELABELLED OUT.jsonl --seed 23 --sizes-from RUN_RECORDS_DIR

Fourth round: the run's records were no longer at hand, so `--sizes-from-sheets` takes each (task, dataset)'s size
in the run from a labelled sheet drawn from it (the sum of its items' weights is the stratum sizes it was scaled
to), and `--per-stratum` draws more items per stratum (smaller weights, narrower intervals):

    python benchmarks/labels_fresh_draw.py RELABELLED cons.jsonl --seed 39 --per-stratum 40 --tasks consistency \
        --sizes-from-sheets tests/data/labels/paper_consistency_test.jsonl
    python benchmarks/labels_fresh_draw.py RELABELLED corr.jsonl --seed 39 --per-stratum 20 --tasks correctness \
        --sizes-from-sheets tests/data/labels/paper_correctness_test.jsonl

(the fifth draw: the same from the fourth's records relabelled by draft match@9 / answer@8, --seed 41, 40 and 25.)

A stratum whose scaled size rounds to 0 stands for no item of the run: it is left out, and said so on stdout (its
items would weigh 0; since the fourteenth draw).

Sixth round: `--per-negative` and `--negatives-total` draw more items from the strata of negative decisions, the
largest most, as they hold most of the population (a 2WikiMultihopQA judged-wrong item of the fourth draw weighed
half a point of the error); the seventh round the same with --seed 47, the eighth with --seed 53, the ninth with --seed 59, the tenth
with --seed 61, the eleventh with --seed 67, the twelfth with --seed 71,
the thirteenth with --seed 73, the fourteenth with --seed 79 (the fifteenth with --seed 83; the sixteenth with --seed 89
and --per-stratum 70 / 100, which drew every positive decision):

    python benchmarks/labels_fresh_draw.py RELABELLED cons.jsonl --seed 43 --per-stratum 40 --per-negative 50 \
        --negatives-total 600 --tasks consistency --sizes-from-sheets tests/data/labels/paper_consistency_test.jsonl
    python benchmarks/labels_fresh_draw.py RELABELLED corr.jsonl --seed 43 --per-stratum 25 --per-negative 50 \
        --negatives-total 600 --tasks correctness --sizes-from-sheets tests/data/labels/paper_correctness_test.jsonl
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from elical.audit.sample import candidates, draw, sheet_row, write_sheet
from elical.records import iter_json_objects, read_records

PER_STRATUM = {"correctness": 38, "consistency": 22}  # the sizes of the first test round
JUDGES = {"correctness": "match@4", "consistency": "answer@3"}  # the second round's; later rounds: the records'


def population(records: list, task: str) -> Counter:
    """Per dataset, how many judged items of the task the records hold."""
    return Counter(c.record.dataset for c in candidates(records, (task,)))


def sheet_population(sheets: list[Path], task: str) -> Counter:
    """Per dataset, the run's number of judged items of the task, read from labelled sheets drawn from that
    run: a stratum's items' weights add up to its size, so a dataset's add up to its population."""
    sizes: Counter = Counter()
    for path in sheets:
        for _, row in iter_json_objects(path):
            if row["task"] == task:
                sizes[row["dataset"]] += row["weight"]
    return Counter({d: round(n) for d, n in sizes.items()})


def first_of_each(drawn: list, target: dict) -> list:
    """The first target[stratum] drawn items of each stratum: draw's order is nested, so they are its draw of
    that size."""
    kept, seen = [], Counter()
    for cand, _ in drawn:
        if seen[cand.stratum] < target[cand.stratum]:
            seen[cand.stratum] += 1
            kept.append(cand)
    return kept


def targets(sizes: Counter, per_stratum: int, per_negative: int | None, negatives_total: int) -> dict:
    """Items to draw per stratum: per_stratum from positive decisions; from negative ones per_negative, or
    negatives_total shared in proportion to the strata's sizes where that is more (the largest strata decide
    most of the error)."""
    negative = {s: n for s, n in sizes.items() if s.endswith("/0")}
    floor = per_stratum if per_negative is None else per_negative
    share = {s: round(negatives_total * n / sum(negative.values())) for s, n in negative.items()}
    return {s: max(floor, share[s]) if s in negative else per_stratum for s in sizes}


def labelled_items(folder: Path) -> set[str]:
    return {row["item"] for path in folder.glob("*.jsonl") for _, row in iter_json_objects(path)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--labelled", type=Path, default=Path("tests/data/labels"))
    parser.add_argument("--sizes-from", type=Path, default=None)
    parser.add_argument("--sizes-from-sheets", type=Path, nargs="+", default=None)
    parser.add_argument("--per-stratum", type=int, default=None, help="items per stratum (default: the first round's)")
    parser.add_argument("--per-negative", type=int, default=None,
                        help="items per stratum of negative decisions (default: --per-stratum)")
    parser.add_argument("--negatives-total", type=int, default=0,
                        help="items shared among negative strata in proportion to their sizes (at least --per-negative each)")
    parser.add_argument("--tasks", nargs="+", default=list(PER_STRATUM))
    args = parser.parse_args()
    seen = labelled_items(args.labelled)
    records = read_records(sorted(args.records.glob("*.parquet")))
    scaled = args.sizes_from is not None or args.sizes_from_sheets is not None
    judges = records[0].generation["judges"] if scaled else JUDGES
    run = read_records(sorted(args.sizes_from.glob("*.parquet"))) if args.sizes_from else None
    rows = []
    for task in args.tasks:
        pool = [c for c in candidates(records, (task,)) if c.item not in seen]
        sizes = Counter(c.stratum for c in pool)
        if scaled:  # each stratum's size scaled to its dataset's size in the run, a whole number
            fresh = population(records, task)
            sizes_in_run = population(run, task) if run is not None else sheet_population(args.sizes_from_sheets, task)
            scale = {d: size / fresh[d] for d, size in sizes_in_run.items()}
            sizes = Counter({s: round(n * scale[s.split("/")[1]]) for s, n in sizes.items()})
            empty = sorted(s for s, n in sizes.items() if n == 0)
            if empty:  # a stratum that stands for no item of the run would hold items of weight 0
                print(f"{task}: left out, as they stand for no item of the run: {', '.join(empty)}")
                sizes = Counter({s: n for s, n in sizes.items() if n})
                pool = [c for c in pool if c.stratum in sizes]
        target = targets(sizes, args.per_stratum or PER_STRATUM[task], args.per_negative, args.negatives_total)
        kept = first_of_each(draw(pool, max(target.values()), args.seed), target)
        picked = Counter(c.stratum for c in kept)
        drawn = [(c, sizes[c.stratum] / picked[c.stratum]) for c in kept]
        rows += [sheet_row(c, w, judges[task]) | {"prompt_style": "paper"} for c, w in drawn]
    write_sheet(rows, args.out)
    print(f"{len(rows)} items ({len(seen)} labelled items left out of the pool) -> {args.out}")


if __name__ == "__main__":
    main()
