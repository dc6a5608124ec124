"""Fit the verified judge's vetoes (:mod:`elical.annotate.verifier`) on hand labels of a model's own outputs.

The labels come as labelled sheets (JSONL rows of a label-audit sheet with ``label`` 0/1 filled in, as
tests/data/labels holds them) or as label-audit folders (``sheet.jsonl`` and the labelling page's
``labels.jsonl``). Each task's rule judge (``match`` for correctness, ``answer`` for consistency) decides the
labelled items; its positive decisions on open questions, with their labels, fit the task's veto.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from elical.annotate.config import AnnotateConfig
from elical.annotate.judge_check import Pair, pair_of
from elical.annotate.judge_factory import judge_maker
from elical.annotate.judge_models import AnswerJudge, embed_triples
from elical.annotate.judge_registry import BOTH, VERIFIED_RULES, Task
from elical.annotate.judges import Judge
from elical.annotate.verifier import Verifier, fit_verifier, veto_texts
from elical.audit.commands import read_labels, read_sheet
from elical.audit.sample import SHEET
from elical.core.inputs import InputError
from elical.records import iter_json_objects

LABELS = "labels.jsonl"  # what the labelling page's "Download labels" saves


def labelled_pairs(source: str | Path) -> list[Pair]:
    """The labelled items of a labelled sheet, or of an audit folder's sheet and its labels.jsonl (unlabelled
    rows are left out)."""
    source = Path(source)
    if source.is_dir():
        if not (source / LABELS).is_file():  # the page saves labels there ("Download labels")
            raise InputError(f"{source}: an audit folder without {LABELS}; label its sheet on the labelling page and "
                             f"save the labels there, or pass a sheet with label filled in")
        rows = read_sheet(source / SHEET)
        labels = read_labels(source / LABELS, {row["item"]: row for row in rows})
        return [pair_of({**row, "label": labels[row["item"]].label}, f"{source / SHEET}:{number}")
                for number, row in enumerate(rows, 1) if row["item"] in labels]
    if not source.is_file():
        raise InputError(f"{source}: no such labelled sheet or audit folder")
    pairs = [pair_of(row, f"{source}:{number}") for number, row in iter_json_objects(source) if row.get("label") is not None]
    if not pairs:
        raise InputError(f"{source}: no labelled rows (label 0 or 1)")
    return pairs


def fit_task(task: Task, pairs: Sequence[Pair], rules: Judge, answer: AnswerJudge, sets: str) -> Verifier:
    """The task's veto fitted on the rules' positive decisions among ``pairs`` (of that task) and their labels."""
    decided = rules.judge_batch([pair.query for pair in pairs])
    kept = [pair for pair, positive in zip(pairs, decided) if positive and not pair.query.choices]
    if not kept:
        raise InputError(f"{task}: the rules decide none of the labelled items positive; nothing to fit")
    triples = [veto_texts(p.query) for p in kept]
    meta = {"embedding_model": answer.label, "rules": rules.name, "sets": sets, "fitted": time.strftime("%Y-%m-%d")}
    try:
        return fit_verifier(task, embed_triples(answer.model, triples), [p.label for p in kept], meta)
    except ValueError as err:
        raise InputError(f"{task}: {err}") from None


def fit_verifiers(sources: Sequence[str | Path], config: AnnotateConfig | None = None) -> dict[Task, Verifier]:
    """A veto per task that the sources label, fitted as the packaged ones are (benchmarks/verifier_fit.py)."""
    pairs = [pair for source in sources for pair in labelled_pairs(source)]
    make = judge_maker(config or AnnotateConfig())
    answer = make("answer")
    assert isinstance(answer, AnswerJudge)
    sets = ",".join(Path(s).name for s in sources)
    fitted = {}
    for task in BOTH:
        of_task = [p for p in pairs if p.query.task == task]
        if of_task:
            fitted[task] = fit_task(task, of_task, make(VERIFIED_RULES[task]), answer, sets)
    return fitted
