"""Fit the verified judge's vetoes (elical.annotate.verifier) on labelled sheets of real outputs, and score them.

For each task, every sheet of the task under --sets (label-audit sheets with hand labels, as tests/data/labels)
gives its items; the task's rule judge (match for correctness, answer for consistency) decides them, and the
positive decisions on open questions, with their hand labels, fit a class-balanced logistic model over sentence
embeddings of (question, reply, reference). Items are not weighted: the veto learns which positives are wrong,
whatever their stratum.

    python benchmarks/verifier_fit.py                      # refit the packaged verifiers on every sheet (then bump
                                                           # `verified`'s version: tests/annotate/test_verifier.py)
    python benchmarks/verifier_fit.py --hold-out test11 test12 test13 test14 --packaged test15 test16 \\
        --report benchmarks/results/verifier_heldout_cpu.md  # fit on the rest; score rules vs verified on those

The packaged `verified@1` vetoes are the fit on every sheet but the fifteenth and sixteenth draws (labelled after them):
`--hold-out test15 test16 --out src/elical/annotate/verifiers` writes them again, the same digests.

With --hold-out, the sheets whose name ends in one of the given suffixes ("paper_correctness_test11") are left
out of the fit and scored with the verifiers fitted here; with --packaged, sheets are left out too and scored with
the packaged verifiers (draws labelled after those were fitted). Both are pooled as benchmarks/label_quality_pooled.py
pools draws (its `pooled_items`: each draw's weights divided by the number of draws, strata kept apart per draw): the rules alone
against the rules with an out-of-sample veto.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from pathlib import Path

# the sibling script (benchmarks/ is on the path when a script there runs)
from label_quality_pooled import pooled_items

from elical.annotate.config import AnnotateConfig
from elical.annotate.judge_check import read_pairs
from elical.annotate.judge_factory import judge_maker
from elical.annotate.judge_models import AnswerJudge, VerifiedJudge
from elical.annotate.judge_registry import BOTH, VERIFIED_RULES, Task
from elical.annotate.judges import Judge
from elical.annotate.verifier import VERIFIER_DIR, Verifier, packaged_verifier, verifier_path
from elical.audit.fit import fit_task
from elical.audit.score import quality_cell, quality_table


def sheets(folder: Path, task: Task) -> list[Path]:
    """The labelled sheets of a task in a folder (paper_* and short_*)."""
    return sorted(folder.glob(f"*_{task}_*.jsonl"))


def held(path: Path, suffixes: list[str]) -> bool:
    return any(path.stem.endswith(f"_{suffix}") for suffix in suffixes)


def fit(task: Task, paths: list[Path], rules: Judge, answer: AnswerJudge) -> Verifier:
    """The task's verifier fitted on the rules' positive decisions of the sheets."""
    pairs = [pair for path in paths for pair in read_pairs(path)]
    return fit_task(task, pairs, rules, answer, ",".join(p.stem for p in paths))


def report(args: argparse.Namespace, make: Callable[[str], Judge], answer: AnswerJudge, fitted: dict[Task, Verifier],
           scored: dict[Task, list[Path]]) -> str:
    """Markdown: per task, the rules and the verified judge on the scored sheets, pooled and one draw at a time.
    Sheets of --hold-out are decided with the verifiers fitted here, those of --packaged with the packaged ones."""
    judges = {"fitted": VerifiedJudge({t: make(VERIFIED_RULES[t]) for t in BOTH}, fitted, answer.model, answer.label),
              "packaged": make("verified")}
    lines = [f"# The verified judge's veto on draws outside its fit (benchmarks/verifier_fit.py; {platform.node()}, "
             f"{platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d')})", "",
             f"Sheets ending in {', '.join(args.hold_out) or '-'}: decided with verifiers fitted on every other sheet of "
             f"{args.sets} (and none of those ending in {', '.join(args.packaged) or '-'}); sheets ending in "
             f"{', '.join(args.packaged) or '-'}: decided with the packaged verifiers, which were not fitted on them. So "
             "every veto below is out of sample. Pooled: each draw's weights divided by the number of draws, strata "
             "kept apart per draw; 95 % stratified-bootstrap intervals.", "",
             "| task | draws | judge | items | error | precision | recall |", "|---|---|---|---|---|---|---|"]
    for task in BOTH:
        groups = [("pooled", scored[task])] + [(p.stem.rsplit("_", 1)[-1], [p]) for p in scored[task]]
        for label, paths in groups:
            rules = pooled_items(paths, make(VERIFIED_RULES[task]), len(paths))
            verified = [item for p in paths for item in pooled_items(
                [p], judges["packaged" if held(p, args.packaged) else "fitted"], len(paths))]
            for name, items in ((make(VERIFIED_RULES[task]).name, rules), ("verified (out of sample)", verified)):
                row = quality_table(items, by=(), n_resamples=args.resamples)[0]
                cells = " | ".join(quality_cell(row, k) for k in ("error", "precision", "recall"))
                lines.append(f"| {task} | {label} | {name} | {len(items)} | {cells} |")
    lines += ["", "Verifiers fitted here: " + ", ".join(f"{t} {v.digest} ({v.meta['items']} items)" for t, v in fitted.items())
              + "; packaged: " + ", ".join(f"{t} {packaged_verifier(t).digest}" for t in BOTH) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=Path, default=Path("tests/data/labels"))
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for {task}.safetensors (default: the packaged folder, unless sheets are left out: "
                             "then nothing is written without --out)")
    parser.add_argument("--hold-out", nargs="*", default=[], help="sheet-name suffixes left out of the fit and scored")
    parser.add_argument("--packaged", nargs="*", default=[],
                        help="sheet-name suffixes left out of the fit and scored with the packaged verifiers")
    parser.add_argument("--report", type=Path, default=None, help="markdown file for the scores")
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    make = judge_maker(AnnotateConfig())
    answer = make("answer")
    assert isinstance(answer, AnswerJudge)
    left_out = args.hold_out + args.packaged
    out = args.out or (None if left_out else VERIFIER_DIR)  # a held-out fit never replaces the packaged vetoes unasked
    verifiers, scored = {}, {}
    for task in BOTH:
        paths = sheets(args.sets, task)
        scored[task] = [p for p in paths if held(p, left_out)]
        verifiers[task] = fit(task, [p for p in paths if not held(p, left_out)], make(VERIFIED_RULES[task]), answer)
        where = verifiers[task].save(verifier_path(task, out)) if out else "not written"
        print(f"{task}: {verifiers[task].digest}, {verifiers[task].meta['items']} positive decisions "
              f"({verifiers[task].meta['right']} right); {where}")
    if left_out:
        text = report(args, make, answer, verifiers, scored)
        print(text)
        if args.report:
            args.report.write_text(text)


if __name__ == "__main__":
    main()
