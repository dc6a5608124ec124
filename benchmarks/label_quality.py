"""Judge quality on the labelled sets of real SmolLM2 outputs (tests/data/labels), population-weighted.

Each set is a label-audit sheet (elical.audit.sample) drawn from `elical run --preset smollm2-qa-full`'s
records (benchmarks/labels_gpu.sh), labelled by hand by the rule of tests/data/labels/RULES.md. For each
set and judge: weighted error, precision (share of positive decisions that are right) and recall, with
95 % stratified-bootstrap intervals; `decision` is the judge that drew the set. The rules were developed
on the *_dev sets (match@4, answer@3), then on *_dev2 (match@5, answer@4) and *_dev3 (match@6, answer@5),
each the previous version's held-out set. The paper_*_test sets are the third held-out draw: answers to
fresh questions (benchmarks/labels_fresh_questions.py, labels_fresh_gpu.sh), drawn by match@6 / answer@5
and scaled to the run's dataset sizes (labels_fresh_draw.py --sizes-from), labelled blind after those
rules were written; the short_* sets were never looked at while writing rules (until match@9). The
paper_*_test4 sets are the fourth draw (fresh questions again, drawn by match@8 / answer@7, scored whole before
anyone read them, then split by question with labels_split.py: one half for writing match@9 / answer@8, the other
held out); paper_*_dev5 the fifth, drawn by draft match@9 / answer@8 from the same generations, for writing rules;
paper_*_test6 the sixth (fresh questions, drawn by match@9 / answer@8 with more items from the large negative strata,
scored whole before anyone read it, then split with labels_split.py --salt 43: one half for writing match@10 / answer@9);
paper_*_test7 the seventh, drawn by match@10 / answer@9 and scored once after they were final (its false positives
then read for match@11 / answer@10); paper_*_test8 the eighth, drawn by match@11 / answer@10 and scored once after they
were final (its misses then read for match@12 / answer@11); paper_*_test9 the ninth, drawn by match@12 / answer@11 and
scored once after they were final (its false positives then read for match@13 / answer@12); paper_*_test10 the tenth,
drawn by match@13 / answer@12 and scored once after they were final (its false positives then read for match@14 /
answer@13); paper_*_test11 the eleventh, drawn by match@14 / answer@13 and scored once after they were final;
paper_*_test12 to _test14 the twelfth to fourteenth, drawn by match@15 / answer@14, match@16 / answer@15 and
match@17 / answer@16 (all written on the draws up to the tenth) and each scored once; paper_*_test15 the
fifteenth, drawn by verified@1 (those rules with vetoes fitted on every earlier set) and scored once; paper_*_test16 the
sixteenth, the same with every positive decision drawn.

    python benchmarks/label_quality.py [--sets tests/data/labels] [--out benchmarks/results/label_quality_cpu.md]
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

from elical.annotate.config import AnnotateConfig
from elical.annotate.judge_check import read_pairs
from elical.annotate.judge_factory import judge_maker
from elical.audit.score import Labelled, quality_cell, quality_table, render_quality
from elical.records import iter_json_objects

# the packaged vetoes of the verified judge were fitted on the sets labelled before them: its figures there are in-sample
VERIFIED_NOTE = ("The verified judge's packaged vetoes were fitted on every set here but paper_*_test15 and _test16 (benchmarks/verifier_fit.py): "
                 "its figures on the other sets are in-sample; out of sample: benchmarks/results/verifier_heldout_cpu.md.")
JUDGES = {"correctness": ("verified", "mention", "match", "exact", "paper"),
          "consistency": ("verified", "answer", "match", "mention")}


def labelled(rows: list[dict], decisions: list[bool]) -> list[Labelled]:
    return [Labelled(bool(d), bool(r["label"]), float(r["weight"]), r["stratum"], r["dataset"], r["category"] or "other")
            for r, d in zip(rows, decisions)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="tests/data/labels")
    parser.add_argument("--out", default=None)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    make = judge_maker(AnnotateConfig())
    lines = [f"# Judge quality on labelled real outputs ({platform.node()}, {platform.processor() or platform.machine()})", "",
             VERIFIED_NOTE, ""]
    for path in sorted(Path(args.sets).glob("*.jsonl")):
        rows = [row for _, row in iter_json_objects(path)]  # lines end at "\n" only: a reply may hold U+0085
        task = rows[0]["task"]
        queries = [pair.query for pair in read_pairs(path)]  # a labelled sheet is a judge-check pair file
        heading = (f"## {path.name}: {len(rows)} {task} items, {len({r['dataset'] for r in rows})} datasets, "
                   f"{sum(r['label'] for r in rows)} labelled 1")
        lines += [heading, ""]
        summary = ["| judge | error | precision | recall | judged positive | labelled positive |", "|---|---|---|---|---|---|"]
        decided = {f"run's judge ({rows[0]['judge']})": [bool(r["decision"]) for r in rows]}
        for name in JUDGES[task]:
            judge = make(name)
            decided[judge.name] = judge.judge_batch(queries)
        tables = {}
        for name, decisions in decided.items():
            rows_q = quality_table(labelled(rows, decisions), n_resamples=args.resamples)
            tables[name] = rows_q
            overall = rows_q[0]

            cells = " | ".join(quality_cell(overall, k) for k in ("error", "precision", "recall"))
            summary.append(f"| {name} | {cells} | "
                           f"{100 * overall['judged_positive']:.1f} | {100 * overall['labelled_positive']:.1f} |")
        lines += summary + [""]
        default = make("match" if task == "correctness" else "answer").name
        lines += [render_quality(tables[default], f"{default} by dataset and category"), ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
