"""LLM-judge calls saved by the offline front of the cascade judge, and the agreement with the labels.

On the labelled pair files (tests/data/judge_pairs_*.jsonl), per task:

- today: the cascade before its offline front (``MatchJudge.sure`` decides where it finds an alias or
  the answers' cores agree, the LLM the rest);
- now: the library's front (:class:`elical.annotate.judge_front.OfflineFront`), the LLM the rest.

Parameters chosen on these same pairs: the correctness front's ``long_answer`` (rule: the most calls
saved with no offline error) and the answer judge's threshold (rule: the fewest errors on the pairs its
rules leave open); the band around the threshold is a fixed rule (``BAND``, not fitted). So each task
gets an ``in-sample`` row (the library defaults, measured on the pairs they were chosen on: optimistic)
and a ``5-fold CV`` row (the fair figure: each parameter re-chosen on 4/5 of the pairs by the same rule,
measured on the held-out fifth, pooled). Two more consistency rows: a band tuned to the issue's target
(rule: the most saved with >= 98 % agreement, LLM always right, on the training folds; CV only), and
the front without an embedding model (its rules alone; nothing fitted).

Columns: pairs, LLM calls today and now, saved, agreement of the offline decisions with the labels on
the pairs they decide, the agreement if the LLM were always right on the rest (a ceiling), with
``--llm-model`` (e.g. smollm2) the agreement with that LLM judge deciding the rest, and the agreement
of the offline judge alone (``match``, ``answer``). Then the folds' choices and, in-sample, how the
figures move with ``long_answer`` and the band.

    python benchmarks/judge_savings.py [--llm-model smollm2] [--folds 5] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from elical.annotate.judge_check import Pair, fit_threshold, read_pairs
from elical.annotate.judge_front import BAND, LONG_ANSWER, OfflineFront, banded, correctness_decision
from elical.annotate.judge_models import AnswerJudge
from elical.annotate.judges import Judge, MatchJudge

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
LONG_GRID = range(1, 41)
BAND_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
TARGET = 0.98
Decisions = list[bool | None]


@dataclass
class Task:
    """One pair file: ``decide(param, idx)`` the front's decisions of those pairs, ``alone(param, idx)``
    the offline judge's alone, ``choose(idx)`` the parameter chosen on those pairs by the row's rule."""

    name: str
    pairs: list[Pair]
    default: Any
    decide: Callable[[Any, Sequence[int]], Decisions]
    alone: Callable[[Any, Sequence[int]], list[bool]]
    choose: Callable[[Sequence[int]], Any]
    rows: tuple[str, ...] = ("in-sample", "cv")  # which rows to print: in-sample, cv, fair (nothing fitted)


def errors(decided: Decisions, labels: Sequence[bool]) -> int:
    """Offline decisions that disagree with the labels (undecided ones aside)."""
    return sum(d is not None and d != y for d, y in zip(decided, labels))


def correctness_task(pairs: list[Pair]) -> Task:
    """Correctness: the parameter is ``long_answer``, chosen as the most saved with no offline error."""
    def decide(long_answer: int, idx: Sequence[int]) -> Decisions:
        return [correctness_decision(pairs[i].query, long_answer) for i in idx]

    def choose(idx: Sequence[int]) -> int:
        labels = [pairs[i].label for i in idx]
        clean = [(sum(d is not None for d in ds), -n) for n in LONG_GRID if not errors(ds := decide(n, idx), labels)]
        return -max(clean)[1]  # the smallest of the most saving

    match = MatchJudge()
    return Task("correctness", pairs, LONG_ANSWER, decide, lambda _, idx: match.judge_batch([pairs[i].query for i in idx]), choose)


def consistency_task(pairs: list[Pair], judge: AnswerJudge, mode: Literal["band", "tuned", "rules"] = "band") -> Task:
    """Consistency: the parameter is (threshold, band); the threshold fitted with the fewest errors on
    the open pairs, the band ``BAND`` or (``tuned``) the most saving one within the target; ``rules``:
    the front without an embedding model (the rules decide, the LLM the rest)."""
    found = judge.comparisons([p.query for p in pairs])
    sims = judge.open_similarities(found)

    def decide(param: tuple[float, float], idx: Sequence[int]) -> Decisions:
        t, band = param
        if mode == "rules":
            return [found[i].decision for i in idx]
        return [found[i].decision if (s := sims[i]) is None else banded(s, t - band, t + band) for i in idx]

    def alone(param: tuple[float, float], idx: Sequence[int]) -> list[bool]:
        return [bool(found[i].decision) if (s := sims[i]) is None else s >= param[0] for i in idx]

    def choose(idx: Sequence[int]) -> tuple[float, float]:
        open_ = [(s, pairs[i].label) for i in idx if (s := sims[i]) is not None]
        t = fit_threshold([s for s, _ in open_], [y for _, y in open_])[0]
        if mode != "tuned":
            return t, BAND
        labels = [pairs[i].label for i in idx]
        ok = [(sum(d is not None for d in ds), -b) for b in BAND_GRID
              if 1 - errors(ds := decide((t, b), idx), labels) / len(idx) >= TARGET]
        return t, -max(ok)[1] if ok else max(BAND_GRID)

    name, rows = {"band": ("consistency", ("in-sample", "cv")), "tuned": ("consistency, band tuned to target", ("cv",)),
                  "rules": ("consistency, rules only (no embeddings)", ("fair",))}[mode]
    return Task(name, pairs, (judge.threshold, BAND), decide, alone, choose, rows)


def folds(n: int, k: int, seed: int) -> list[list[int]]:
    """``k`` disjoint held-out index sets covering ``range(n)``, shuffled with ``seed``."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [sorted(order[f::k]) for f in range(k)]


def cross_validated(task: Task, k: int, seed: int) -> tuple[Decisions, list[bool], list[Any]]:
    """Each pair decided with the parameter chosen on the other folds: the decisions, the offline
    judge's alone, and each fold's parameter."""
    decided: Decisions = [None] * len(task.pairs)
    alone = [False] * len(task.pairs)
    chosen = []
    for held in folds(len(task.pairs), k, seed):
        value = task.choose(sorted(set(range(len(task.pairs))) - set(held)))
        chosen.append(value)
        for i, d, a in zip(held, task.decide(value, held), task.alone(value, held)):
            decided[i], alone[i] = d, a
    return decided, alone, chosen


class LLMVerdicts:
    """An LLM judge's verdicts on one task's pairs, each pair asked once, in batches."""

    def __init__(self, llm: Judge | None, pairs: Sequence[Pair]):
        self.llm, self.pairs = llm, pairs
        self.known: dict[int, bool] = {}

    def of(self, idx: Sequence[int]) -> dict[int, bool] | None:
        """The verdicts of those pairs (None without an LLM)."""
        if self.llm is None:
            return None
        todo = [i for i in idx if i not in self.known]
        self.known.update(zip(todo, self.llm.judge_batch([self.pairs[i].query for i in todo])))
        return {i: self.known[i] for i in idx}


def row(pairs: Sequence[Pair], decided: Decisions, alone: Sequence[bool], llm: LLMVerdicts) -> dict[str, Any]:
    """Counts and agreements of one set of decisions (see the module docstring)."""
    labels = [p.label for p in pairs]
    sent = [i for i, d in enumerate(decided) if d is None]
    right = sum(d == y for d, y in zip(decided, labels) if d is not None)
    kept, n = len(pairs) - len(sent), len(pairs)
    verdicts = llm.of(sent)
    return {"sent": len(sent), "saved": kept / n, "decided": right / kept if kept else None,
            "ceiling": (right + len(sent)) / n, "alone": sum(a == y for a, y in zip(alone, labels)) / n,
            "llm": None if verdicts is None else (right + sum(verdicts[i] == labels[i] for i in sent)) / n}


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def show(value: Any) -> str:
    return "/".join(f"{v:g}" for v in value) if isinstance(value, tuple) else f"{value:g}"


def main_table(tasks: Sequence[Task], k: int, seed: int, llm: Judge | None) -> list[str]:
    """The per-task rows (in-sample, cross-validated) and the folds' choices."""
    header = ("| task | figure | pairs | to LLM today | to LLM now | saved now | offline agreement on what it decides | "
              "agreement, LLM always right | agreement, this LLM | offline judge alone |")
    lines = [header, "|" + "---|" * 10]
    notes = []
    for task in tasks:
        n, verdicts = len(task.pairs), LLMVerdicts(llm, task.pairs)
        today = sum(MatchJudge().sure(p.query) is None for p in task.pairs)
        cv, cv_alone, chosen = cross_validated(task, k, seed)
        in_sample = (task.decide(task.default, range(n)), task.alone(task.default, range(n)))
        figures = {"in-sample": ("in-sample", in_sample), "cv": (f"{k}-fold CV (fair)", (cv, cv_alone)),
                   "fair": ("nothing fitted (fair)", in_sample)}
        for figure, (decided, alone) in (figures[r] for r in task.rows):
            r = row(task.pairs, decided, alone, verdicts)
            lines.append(f"| {task.name} | {figure} | {n} | {today} ({pct(today / n)}) | {r['sent']} | {pct(r['saved'])} | "
                         f"{pct(r['decided'])} | {pct(r['ceiling'])} | {pct(r['llm'])} | {pct(r['alone'])} |")
        what = "long_answer" if task.name == "correctness" else "threshold/band"
        if "cv" in task.rows:
                notes.append(f"- {task.name}: {what} default {show(task.default)}; chosen on the {k} training sets: "
                         + ", ".join(show(c) for c in chosen))
    return lines + [""] + notes


def sensitivity(tasks: Sequence[Task]) -> list[str]:
    """In-sample (the pairs the defaults were chosen on), no LLM: the figures against each parameter."""
    lines = ["| task | parameter | to LLM now | saved now | offline agreement on what it decides | agreement, LLM always right |",
             "|" + "---|" * 6]
    correctness, consistency = tasks[0], tasks[1]
    grid: list[tuple[Task, str, Any]] = [(correctness, f"long_answer {v}", v) for v in (8, 12, 16, 24, 40)]
    grid += [(consistency, f"band {b:g} (edges {consistency.default[0] - b:.2f}-{consistency.default[0] + b:.2f})",
              (consistency.default[0], b)) for b in BAND_GRID]
    for task, label, value in grid:
        r = row(task.pairs, task.decide(value, range(len(task.pairs))), [], LLMVerdicts(None, task.pairs))
        lines.append(f"| {task.name} | {label} | {r['sent']} | {pct(r['saved'])} | {pct(r['decided'])} | {pct(r['ceiling'])} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llm-model", default=None, help="LLM judge model (alias, folder, .gguf); none: ceiling only")
    parser.add_argument("--folds", type=int, default=5, help="folds of the cross-validated rows")
    parser.add_argument("--seed", type=int, default=0, help="seed of the folds' shuffle")
    args = parser.parse_args()
    llm = None
    if args.llm_model:
        from elical.annotate.config import AnnotateConfig, JudgeConfig
        from elical.annotate.judge_factory import judge_maker

        config = AnnotateConfig(device="cpu", judges=JudgeConfig(llm_model=args.llm_model, batch_size=8))
        llm = judge_maker(config)("llm")
    answer = AnswerJudge()
    consistency = read_pairs(DATA / "judge_pairs_consistency.jsonl")
    tasks = [correctness_task(read_pairs(DATA / "judge_pairs_correctness.jsonl")), consistency_task(consistency, answer),
             consistency_task(consistency, answer, "tuned"), consistency_task(consistency, answer, "rules")]
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; LLM judge: "
          f"{llm.name if llm else 'none (ceiling: the LLM always right)'}; front: {OfflineFront(answer).name}")
    print("\n".join(main_table(tasks, args.folds, args.seed, llm)))
    print("\nIn-sample sensitivity (no LLM; the same pairs, so optimistic):")
    print("\n".join(sensitivity(tasks)))


if __name__ == "__main__":
    main()
