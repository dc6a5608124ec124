"""Refusal ("I don't know") detection: the method's fixed refusal sentence anywhere in the answer, or
one of the refusal phrases occurring in the answer but not in the question (so a question that
itself says "not aware of" does not turn every answer into a refusal)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from elical.honesty.config import REFUSAL, REFUSAL_PHRASES

_NON_WORD = re.compile(r"[\W_]+")


def _norm(text: str) -> str:
    """Lower case, words only, single spaces: "I'm" and word-level decodings like "I ' m" both read "i m"."""
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


def is_refusal(
    question: str,
    answer: str,
    refusal: str = REFUSAL,
    phrases: Sequence[str] = REFUSAL_PHRASES,
) -> bool:
    """Whether ``answer`` refuses to answer ``question``."""
    text = f" {_norm(answer)} "
    sentence = _norm(refusal)
    if sentence and f" {sentence} " in text:
        return True
    asked = f" {_norm(question)} "
    return any((p := _norm(phrase)) and p in text and p not in asked for phrase in phrases)


def detect_refusals(
    questions: Sequence[str],
    answers: Sequence[str],
    refusal: str = REFUSAL,
    phrases: Sequence[str] = REFUSAL_PHRASES,
) -> list[bool]:
    """One refusal flag per (question, answer) pair."""
    if len(questions) != len(answers):
        raise ValueError(f"got {len(questions)} questions but {len(answers)} answers")
    return [is_refusal(q, a, refusal, phrases) for q, a in zip(questions, answers)]
