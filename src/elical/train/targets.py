"""Training targets from records: self-consistency (elicitation) and correctness (calibration)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from elical.records import MissingFieldError, Record

TargetKind = Literal["consistency", "sample-correct", "greedy-correct"]


def target_kind(stage: Literal["eli", "cal"], cal_target: Literal["samples", "greedy"]) -> TargetKind:
    """Which record field feeds a stage: consistency for elicitation, correctness for calibration."""
    if stage == "eli":
        return "consistency"
    return "sample-correct" if cal_target == "samples" else "greedy-correct"


_NEEDS = {
    "consistency": ("sample_consistent", "consistency_judgement", "self-consistency (eli)"),
    "sample-correct": ("sample_correct", "sampling_correctness", "share of correct samples (cal, default)"),
    "greedy-correct": ("greedy_correct", "greedy_correctness", "greedy correctness (cal --cal-target greedy)"),
}


def has_target(record: Record, kind: TargetKind) -> bool:
    """Whether the record carries the field this target is computed from."""
    value = getattr(record, _NEEDS[kind][0])
    return value is not None and (not isinstance(value, list) or len(value) > 0)


def target_value(record: Record, kind: TargetKind) -> float:
    """Self-consistency = share of samples consistent with the greedy answer; correctness = share of
    correct samples (the authors' soft label) or the greedy answer's 0/1 correctness."""
    value = getattr(record, _NEEDS[kind][0])
    if kind == "greedy-correct":
        return float(value)
    return sum(value) / len(value)


def require_targets(records: Sequence[Record], kind: TargetKind, what: str) -> None:
    """Stop with a clear message when no record (or only some) carries the needed field."""
    field, released, label = _NEEDS[kind]
    missing = [r for r in records if not has_target(r, kind)]
    if not records:
        raise MissingFieldError(f"{what}: no records given")
    if len(missing) == len(records):
        raise MissingFieldError(
            f"{what} needs {label}, but none of the {len(records)} records has '{released}' "
            f"(Record.{field}); annotate them first (elical annotate) or choose another mode"
        )
    if missing:
        shown = ", ".join(f"{r.dataset}:{r.id}" for r in missing[:5])
        raise MissingFieldError(
            f"{what} needs {label}: {len(missing)} of {len(records)} records lack '{released}' "
            f"(first: {shown}); filter them out or re-annotate"
        )
