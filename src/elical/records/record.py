"""The Record type: everything known about one model's answers to one question."""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

# The released HonestyBench per-question fields, in the order they are written.
HB_FIELDS = (
    "question",
    "answer",
    "greedy_response",
    "greedy_correctness",
    "greedy_tokens",
    "greedy_cumulative_logprobs",
    "greedy_logprobs",
    "sampling_response",
    "sampling_correctness",
    "consistency_judgement",
)
# elical's own fields, added to the JSONL after the HonestyBench ones.
ELICAL_FIELDS = (
    "id",
    "dataset",
    "split",
    "prompt",
    "sampling_logprobs",
    "verbal",
    "generation",
    "failure",
)
KNOWN_SPLITS = ("train", "dev", "val", "validation", "test")
# Keys of Record.verbal: one per verbalized-confidence prompt, named as the Verbal-0/10 estimators are.
VERBAL_KINDS = ("verbal-0", "verbal-10")


def verbal_kind(name: str) -> str:
    """The canonical Record.verbal key of a kind spelled any usual way: 'verbal0', 'Verbal-10', 'verbal_0'
    become 'verbal-0' / 'verbal-10'; other names are returned unchanged."""
    digits = re.fullmatch(r"verbal[-_ ]?(\d+)", name.strip().lower())
    return f"verbal-{digits.group(1)}" if digits else name


LOGPROB_SLACK = 1e-6  # a log-probability may exceed 0 by float rounding, no more


def is_logprob(value: float) -> bool:
    """Whether a number can be a log-probability: finite and <= 0 (up to LOGPROB_SLACK); NaN cannot."""
    return -math.inf < value <= LOGPROB_SLACK


class RecordError(ValueError):
    """A record file holds a row that is not a valid record; says where and why."""

    def __init__(self, path: str | os.PathLike | None, line: int | None, field: str | None, message: str):
        self.path, self.line, self.field, self.reason = path, line, field, message
        where = f"{path}" if path is not None else "<records>"
        if line is not None:
            where += f":{line}"
        what = f" field '{field}':" if field else ""
        super().__init__(f"{where}:{what} {message}")


class MissingFieldError(ValueError):
    """Records lack a field a step needs (a baseline, a training mode); raised before any work starts."""


def record_id(dataset: str, question: str) -> str:
    """Stable id of a question within a dataset, so files join without relying on row order."""
    return hashlib.sha1(f"{dataset}\x1f{question}".encode()).hexdigest()[:16]


@dataclass
class Record:
    """Everything known about one model's answers to one question."""

    question: str
    answers: list[str]
    dataset: str = "unknown"
    split: str = "test"
    id: str = ""
    prompt: str | None = None
    greedy_response: str | None = None
    greedy_tokens: list[str] | None = None
    greedy_logprobs: list[float] | None = None
    greedy_cumulative_logprob: float | None = None
    greedy_correct: int | None = None
    samples: list[str] = field(default_factory=list)
    sample_logprobs: list[list[float]] | None = None
    sample_correct: list[int] | None = None
    sample_consistent: list[int] | None = None
    verbal: dict[str, str] = field(default_factory=dict)
    generation: dict[str, Any] = field(default_factory=dict)
    failure: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id:
            self.id = record_id(self.dataset, self.question)

    @property
    def k(self) -> int:
        """Number of sampled answers."""
        return len(self.samples)

    @property
    def failed(self) -> bool:
        return self.failure is not None


# --------------------------------------------------------------------------- required fields

# HonestyBench field name -> Record attribute.
RECORD_ATTRIBUTE = {
    "question": "question",
    "answer": "answers",
    "greedy_response": "greedy_response",
    "greedy_correctness": "greedy_correct",
    "greedy_tokens": "greedy_tokens",
    "greedy_cumulative_logprobs": "greedy_cumulative_logprob",
    "greedy_logprobs": "greedy_logprobs",
    "sampling_response": "samples",
    "sampling_correctness": "sample_correct",
    "consistency_judgement": "sample_consistent",
}


def has_annotation(rec: Record, attribute: str) -> bool:
    """Whether a record carries a value for ``attribute`` (an empty list of samples or of their consistency
    judgements, as with k = 0, counts as absent)."""
    value = getattr(rec, attribute)
    return value is not None and (attribute not in ("samples", "sample_consistent") or len(value) > 0)
