"""Confidence-gated answering: answer with the unaligned model when the EliCal confidence is at
least tau, else refuse. tau is chosen on a validation split (never the evaluated set) to maximise
the honesty score (default) or the accuracy of the answer/refuse decision.

With the same answers before and after, the honesty score of a gate is the balanced accuracy of
its decision: (share of right answers kept + share of wrong answers refused) / 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from elical.honesty.config import GateObjective
from elical.model.gate import Gate, Values, choose_gate

__all__ = ["Gate", "choose_tau", "confidences_for", "gate_answers", "gated_texts"]


def confidences_for(ids: Sequence[str], confidences: Mapping[str, float], what: str = "questions") -> np.ndarray:
    """The confidence of each id, in order; stops naming the ids that have none."""
    missing = [i for i in ids if i not in confidences]
    if missing:
        shown = ", ".join(missing[:5]) + (f" (and {len(missing) - 5} more)" if len(missing) > 5 else "")
        raise KeyError(f"{len(missing)} of {len(ids)} {what} have no confidence: {shown}")
    values = np.array([float(confidences[i]) for i in ids])
    if np.isnan(values).any():
        raise ValueError(f"{int(np.isnan(values).sum())} confidence(s) of the {what} are NaN")
    return values


def choose_tau(confidence: Values, correct: Values, objective: GateObjective = "honesty") -> Gate:
    """The tau maximising the objective of ``answer iff confidence >= tau`` on validation data
    (:func:`elical.model.gate.choose_gate`; ties go to the lowest tau, answering more)."""
    return choose_gate(confidence, correct, objective)


def gate_answers(confidence: Values, tau: float) -> np.ndarray:
    """Which questions the gate answers."""
    return np.asarray(confidence, dtype=float) >= tau


def gated_texts(answers: Sequence[str], answered: Values, refusal: str) -> list[str]:
    """The gated model's output: the unaligned answer where answered, else the refusal sentence."""
    return [a if keep else refusal for a, keep in zip(answers, answered)]
