"""Verbal-10 examples: solved questions from a split that is not evaluated (the authors used the test file)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from elical.annotate.config import AnnotateConfig
from elical.data.items import QAItem
from elical.records import read_records

N_EXAMPLES = 10


def load_verbal_examples(config: AnnotateConfig, evaluated: Sequence[QAItem], n: int = N_EXAMPLES) -> list[tuple[QAItem, float]]:
    """n (item, confidence) examples from ``config.verbal_examples`` (annotated records; confidence =
    greedy correctness), half right and half wrong where possible; none may be an evaluated question."""
    if not config.verbal_examples:
        raise ValueError("verbal-10 needs verbal_examples: a records file from a split that is not evaluated")
    records = [r for r in read_records(config.verbal_examples) if r.greedy_correct is not None and not r.failed]
    evaluated_questions = {item.question.strip().lower() for item in evaluated}
    overlap = [r.question for r in records if r.question.strip().lower() in evaluated_questions]
    if overlap:
        raise ValueError(
            f"{config.verbal_examples}: {len(overlap)} Verbal-10 example question(s) are also evaluated "
            f"(e.g. {overlap[0]!r}); take the examples from another split"
        )
    if len(records) < n:
        raise ValueError(f"{config.verbal_examples}: need {n} annotated records for Verbal-{n}, found {len(records)}")
    rng = random.Random(config.seed)
    right = [r for r in records if r.greedy_correct]
    wrong = [r for r in records if not r.greedy_correct]
    rng.shuffle(right)
    rng.shuffle(wrong)
    take_right = min(len(right), max(n // 2, n - len(wrong)))
    chosen = right[:take_right] + wrong[: n - take_right]
    rng.shuffle(chosen)
    return [
        (QAItem(r.question, r.answers, r.dataset, r.split, choices=r.extra.get("choices")), float(r.greedy_correct or 0))
        for r in chosen
    ]
