"""Judge quality on labelled pairs: accuracy, false-positive and false-negative rates per category.

A pair file is JSONL, one labelled query a row:

- correctness: ``{"question", "answer", "gold": [aliases], "label": 0|1, "category"}``
- consistency: ``{"question", "a", "b", "label": 0|1, "category"}`` (is sample ``a`` the same answer
  as the reference ``b``?)

Optional ``"choices"`` marks a multiple-choice item. ``elical judge-check`` prints the table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import cast

import pandas as pd

from elical.annotate.config import AnnotateConfig
from elical.annotate.judge_factory import judge_maker
from elical.annotate.judge_models import AnswerJudge, cosine_pairs
from elical.annotate.judge_registry import BOTH, checked_judges
from elical.annotate.judges import Judge, JudgeQuery, Task
from elical.records import iter_json_objects

ALL = "all"


@dataclass(frozen=True)
class Pair:
    """One labelled query and the category it tests."""

    query: JudgeQuery
    label: bool
    category: str


def pair_of(row: dict, where: str) -> Pair:
    """One labelled query of a pair-file row (``where``: file:line, for the error message)."""
    try:
        if "gold" in row:
            gold = row["gold"]
            task: Task = "correctness"
            answer, refs = row["answer"], (gold,) if isinstance(gold, str) else tuple(gold)
        else:
            task, answer, refs = "consistency", row["a"], (row["b"],)
        choices = tuple(row["choices"]) if row.get("choices") else None
        label = row["label"]
        if label not in (0, 1, True, False):
            raise ValueError(f"label must be 0 or 1, got {label!r}")
        return Pair(JudgeQuery(task, row["question"], answer, refs, choices), bool(label), str(row.get("category", "other")))
    except KeyError as err:
        raise ValueError(f"{where}: missing field {err.args[0]!r} (need question, answer+gold or a+b, label)") from None
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def read_pairs(path: str | Path) -> list[Pair]:
    """The labelled pairs of a JSONL file (all rows of one task)."""
    pairs = [pair_of(row, f"{path}:{number}") for number, row in iter_json_objects(path)]
    if not pairs:
        raise ValueError(f"{path}: no pairs")
    if len({p.query.task for p in pairs}) > 1:
        raise ValueError(f"{path}: mixes correctness and consistency pairs")
    return pairs


def _rates(labels: pd.Series, decided: pd.Series) -> dict[str, float | int]:
    negatives, positives = int((~labels).sum()), int(labels.sum())
    false_pos, false_neg = int((decided & ~labels).sum()), int((~decided & labels).sum())
    return {
        "n": len(labels),
        "errors": false_pos + false_neg,
        "accuracy": 1 - (false_pos + false_neg) / len(labels),
        "fpr": false_pos / negatives if negatives else float("nan"),
        "fnr": false_neg / positives if positives else float("nan"),
    }


def score_judges(pairs: Sequence[Pair], judges: Mapping[str, Judge], reference: Judge | None = None) -> pd.DataFrame:
    """Per judge and category (and ``all``): n, errors, accuracy, false-positive rate (of the pairs
    labelled 0) and false-negative rate (of those labelled 1); with ``reference`` (an LLM judge), also
    each judge's agreement with it, and the reference's own row."""
    queries = [p.query for p in pairs]
    frame = pd.DataFrame({"category": [p.category for p in pairs], "label": [p.label for p in pairs]})
    decisions = {name: judge.judge_batch(queries) for name, judge in judges.items()}
    if reference is not None:
        decisions["llm"] = reference.judge_batch(queries)
    rows = []
    for name, decided in decisions.items():
        frame["decided"] = decided
        groups = [(c, g) for c, g in frame.groupby("category", sort=True)] + [(ALL, frame)]
        for category, group in groups:
            row = {"judge": name, "category": category, **_rates(group["label"], group["decided"])}
            if reference is not None:
                ref = pd.Series(decisions["llm"], index=frame.index)[group.index]
                row["llm_agreement"] = float((group["decided"] == ref).mean())
            rows.append(row)
    return pd.DataFrame(rows)


def fit_threshold(similarities: Sequence[float], labels: Sequence[bool]) -> tuple[float, int]:
    """The threshold ``t`` (decide same where similarity >= t) with the fewest errors on the given
    pairs, halfway between neighbouring similarities (the widest margin among ties), and its errors."""
    points = sorted(set(similarities))
    cuts = [points[0] - 0.01] + [(a + b) / 2 for a, b in pairwise(points)] + [points[-1] + 0.01]
    gaps = [0.01] + [b - a for a, b in pairwise(points)] + [0.01]
    errors = [sum((s >= t) != bool(y) for s, y in zip(similarities, labels)) for t in cuts]
    best = min(range(len(cuts)), key=lambda i: (errors[i], -gaps[i]))
    return round(cuts[best], 3), errors[best]


def leave_one_out_errors(similarities: Sequence[float], labels: Sequence[bool]) -> int:
    """Errors of :func:`fit_threshold` on each pair when fitted on all the others (an honest estimate)."""
    wrong = 0
    for i in range(len(similarities)):
        rest = [j for j in range(len(similarities)) if j != i]
        t, _ = fit_threshold([similarities[j] for j in rest], [labels[j] for j in rest])
        wrong += (similarities[i] >= t) != bool(labels[i])
    return wrong


def threshold_report(pairs: Sequence[Pair], judge: AnswerJudge) -> str:
    """Where the answer judge's rules leave a pair undecided, the threshold on the similarity of the
    differing parts that fits these pairs best, its errors, and its leave-one-out errors."""
    found = judge.comparisons([p.query for p in pairs])
    open_ = [(c, p.label) for c, p in zip(found, pairs) if c.decision is None]
    if len(open_) < 2:
        return "answer judge: the rules decide (almost) every pair; nothing to fit"
    sims = cosine_pairs(judge.model, [(c.left, c.right) for c, _ in open_], judge.batch_size)
    labels = [y for _, y in open_]
    t, errors = fit_threshold(sims, labels)
    return (
        f"answer judge: {len(open_)} of {len(pairs)} pairs left to the embeddings; best threshold {t:g} "
        f"({errors} errors on them; leave-one-out: {leave_one_out_errors(sims, labels)} errors); "
        f"configured {judge.threshold:g}"
    )


# the offline judges of each task (elical.annotate.judge_registry's `checked`), scored when none is named
DEFAULT_JUDGES: dict[str, tuple[str, ...]] = {task: checked_judges(task) for task in BOTH}


def check_judges(
    path: str | Path,
    config: AnnotateConfig,
    *,
    names: Sequence[str] | None = None,
    with_llm: bool = False,
    fit: bool = False,
) -> str:
    """The judge-check report of a pair file: which judges, the score table, and (optionally) the
    answer judge's fitted threshold. ``names`` defaults to the offline judges of the file's task."""
    pairs = read_pairs(path)
    task = pairs[0].query.task
    make = judge_maker(config)
    judges = {name: make(name) for name in (names or DEFAULT_JUDGES[task])}
    reference = make("llm") if with_llm else None
    table = score_judges(pairs, judges, reference)
    shown = {**judges, "llm": reference} if reference is not None else judges
    lines = [
        f"{len(pairs)} {task} pairs from {path}; judges: " + ", ".join(f"{k} = {j.name}" for k, j in shown.items()),
        "",
        render_markdown(table),
    ]
    if fit:
        lines += ["", threshold_report(pairs, cast(AnswerJudge, make("answer")))]
    return "\n".join(lines)


def render_markdown(table: pd.DataFrame) -> str:
    """The score table as markdown: rates in percent, one row per judge and category."""
    columns = [c for c in ("judge", "category", "n", "errors", "accuracy", "fpr", "fnr", "llm_agreement") if c in table]
    percent = {"accuracy", "fpr", "fnr", "llm_agreement"}
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for _, row in table[columns].iterrows():
        cells = [("-" if pd.isna(row[c]) else f"{100 * row[c]:.1f}") if c in percent else str(row[c]) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
