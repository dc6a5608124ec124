"""Validated conversion between JSON objects (HonestyBench rows) and Records."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from elical.core.strict_json import describe
from elical.records.record import (
    ELICAL_FIELDS,
    HB_FIELDS,
    RECORD_ATTRIBUTE,
    Record,
    has_annotation,
    is_logprob,
    verbal_kind,
)

JsonlFormat = Literal["elical", "honestybench"]


def _is_01(value: Any) -> bool:
    return isinstance(value, bool) or (isinstance(value, int) and value in (0, 1))


def _check_01(value: Any, name: str) -> int:
    if not _is_01(value):
        raise _FieldError(name, f"expected 0 or 1, got {_show(value)}")
    return int(value)


def _check_01_list(value: Any, name: str, length: int) -> list[int]:
    if not isinstance(value, list):
        raise _FieldError(name, f"expected a list of 0/1, got {describe(value)}")
    if len(value) != length:
        raise _FieldError(name, f"expected {length} values (one per sampled answer), got {len(value)}")
    if not (set(map(type, value)) <= {int, bool} and set(value) <= {0, 1}):  # fast path; the scan names the value
        i, v = next((i, v) for i, v in enumerate(value) if not _is_01(v))
        raise _FieldError(name, f"expected only 0/1 values, got {_show(v)} at position {i}")
    return [int(v) for v in value]


def _check_str_list(value: Any, name: str, *, nonempty: bool = False) -> list[str]:
    """A list of strings; a null, a number or a nested list in it is named with its position."""
    if not isinstance(value, list):
        raise _FieldError(name, f"expected a list of strings, got {describe(value)}")
    if not set(map(type, value)) <= {str}:  # fast path; the scan names the value
        i, v = next((i, v) for i, v in enumerate(value) if not isinstance(v, str))
        raise _FieldError(name, f"expected a list of strings, got {describe(v)} at position {i}")
    if nonempty and not value:
        raise _FieldError(name, "expected at least one string, got an empty list")
    return value


def _is_number(value: Any) -> bool:
    """A JSON number: int or float, never a boolean."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_float_list(value: Any, name: str) -> list[float]:
    if not isinstance(value, list):
        raise _FieldError(name, f"expected a list of numbers, got {describe(value)}")
    if not set(map(type, value)) <= {float, int}:  # a bool's type is bool: refused; the scan names the value
        i, v = next((i, v) for i, v in enumerate(value) if not _is_number(v))
        raise _FieldError(name, f"expected a list of numbers, got {describe(v)} at position {i}")
    try:
        return [float(v) for v in value]
    except OverflowError:
        raise _FieldError(name, "expected log-probabilities, got an integer too large for a float") from None


def _check_logprobs(values: list[float], name: str, where: str = "") -> list[float]:
    """Log-probabilities must be finite and <= 0 (a -inf or a positive value means a broken file)."""
    if values and (not is_logprob(max(values)) or not is_logprob(min(values)) or any(map(math.isnan, values))):
        i, v = next((i, v) for i, v in enumerate(values) if not is_logprob(v))
        raise _FieldError(name, f"expected log-probabilities (finite numbers <= 0), got {v!r} at {where}position {i}")
    return values


def _check_cumulative(cumulative: float, logprobs: list[float]) -> None:
    """The cumulative log-prob of the greedy answer is the sum of its tokens' (up to float rounding:
    1e-3 plus 1e-4 per token and per unit of the sum, enough for values rounded to 4 decimals)."""
    total = math.fsum(logprobs)
    if abs(cumulative - total) > 1e-3 + 1e-4 * (len(logprobs) + abs(total)):
        raise _FieldError("greedy_cumulative_logprobs", f"expected the sum of the {len(logprobs)} greedy_logprobs "
                                                         f"({total:.6g}), got {cumulative!r}")


def _single(value: Any, name: str) -> Any:
    """HonestyBench wraps the greedy fields in one-element lists."""
    if not isinstance(value, list) or len(value) != 1:
        raise _FieldError(name, f"expected a list holding exactly one element, got {describe(value)}")
    return value[0]


def _show(value: Any) -> str:
    """A scalar as its repr, a container as :func:`~elical.core.strict_json.describe` says it."""
    return describe(value) if isinstance(value, (list, dict)) or value is None else repr(value)[:80]


def _optional_str(row: dict[str, Any], name: str) -> str | None:
    """A text field that may be absent or null; any other type (a number, a list, a boolean) is refused."""
    value = row.get(name)
    if value is not None and not isinstance(value, str):
        raise _FieldError(name, f"expected a string or null, got {describe(value)}")
    return value


def _object(row: dict[str, Any], name: str) -> dict[str, Any]:
    """A JSON-object field that may be absent or null (read as empty)."""
    value = row.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _FieldError(name, f"expected a JSON object or null, got {describe(value)}")
    return value


def _verbal(row: dict[str, Any]) -> dict[str, str]:
    """The row's verbalized-confidence replies (see :func:`verbal_replies`)."""
    return verbal_replies(_object(row, "verbal").items())


def verbal_replies(pairs: Iterable[tuple[Any, Any]]) -> dict[str, str]:
    """Verbalized-confidence reply texts by kind; a reply that is not a string, or a kind named twice (also as
    'verbal0' and 'verbal-0'), is refused."""
    replies: dict[str, str] = {}
    for name, text in pairs:
        if not isinstance(name, str) or not isinstance(text, str):
            raise _FieldError("verbal", f"expected the reply text (a string) for {name!r}, got {describe(text)}")
        kind = verbal_kind(name)
        if kind in replies:
            raise _FieldError("verbal", f"{name!r} names the kind {kind!r} a second time")
        replies[kind] = text
    return replies


class _FieldError(ValueError):
    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(message)


# --------------------------------------------------------------------------- dict <-> Record


def record_from_dict(row: Any, *, dataset: str = "unknown", split: str = "test") -> Record:
    """Build a validated Record from one JSON object in HonestyBench (or extended) form."""
    rec = _base_record(row, dataset, split)
    _read_greedy(rec, row)
    _read_samples(rec, row)
    return rec


def _base_record(row: Any, dataset: str, split: str) -> Record:
    """The record of a row's question, answers and descriptive fields (no annotations yet)."""
    if not isinstance(row, dict):
        raise _FieldError("", f"expected a JSON object, got {type(row).__name__}")
    for required in ("question", "answer"):
        if required not in row:
            raise _FieldError(required, "missing (every record needs 'question' and 'answer')")
    if not isinstance(row["question"], str) or not row["question"].strip():
        raise _FieldError("question", f"expected a non-empty string, got {describe(row['question'])}")
    answers = row["answer"]
    if isinstance(answers, str):
        answers = [answers]
    answers = _check_str_list(answers, "answer", nonempty=True)
    return Record(
        question=row["question"],
        answers=list(answers),
        dataset=_optional_str(row, "dataset") or dataset,
        split=_optional_str(row, "split") or split,
        id=_optional_str(row, "id") or "",
        prompt=_optional_str(row, "prompt"),
        failure=_failure(row),
        verbal=_verbal(row),
        generation=dict(_object(row, "generation")),
        extra={k: v for k, v in row.items() if k not in HB_FIELDS and k not in ELICAL_FIELDS},
    )


def _failure(row: dict[str, Any]) -> str | None:
    """Why the question failed (a non-empty text), or None: ``false`` is no reason, so it is refused."""
    value = row.get("failure")
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise _FieldError("failure", f"expected the reason the question failed (a non-empty string), or null when it "
                                     f"did not fail; got {describe(value)}")
    return value


def _read_greedy(rec: Record, row: dict[str, Any]) -> None:
    """The greedy answer's fields (HonestyBench's one-element lists), checked against each other."""
    if row.get("greedy_response") is not None:
        greedy = _single(row["greedy_response"], "greedy_response")
        if not isinstance(greedy, str):
            raise _FieldError("greedy_response", f"expected a string, got {describe(greedy)}")
        rec.greedy_response = greedy
    if row.get("greedy_correctness") is not None:
        value = row["greedy_correctness"]
        if isinstance(value, list):  # tolerate the one-element-list spelling of the greedy fields
            value = _single(value, "greedy_correctness")
        rec.greedy_correct = _check_01(value, "greedy_correctness")
    if row.get("greedy_tokens") is not None:
        rec.greedy_tokens = _check_str_list(_single(row["greedy_tokens"], "greedy_tokens"), "greedy_tokens")
    if row.get("greedy_logprobs") is not None:
        rec.greedy_logprobs = _check_float_list(_single(row["greedy_logprobs"], "greedy_logprobs"), "greedy_logprobs")
    if row.get("greedy_cumulative_logprobs") is not None:
        cum = _single(row["greedy_cumulative_logprobs"], "greedy_cumulative_logprobs")
        rec.greedy_cumulative_logprob = _check_float_list([cum], "greedy_cumulative_logprobs")[0]
    tokens, logprobs = rec.greedy_tokens, rec.greedy_logprobs
    if tokens is not None and logprobs is not None and len(tokens) != len(logprobs):
        raise _FieldError(
            "greedy_logprobs", f"expected one log-prob per greedy token ({len(tokens)}), got {len(logprobs)}"
        )
    if rec.greedy_logprobs is not None:
        _check_logprobs(rec.greedy_logprobs, "greedy_logprobs")
    if rec.greedy_cumulative_logprob is not None:
        _check_logprobs([rec.greedy_cumulative_logprob], "greedy_cumulative_logprobs")
        if rec.greedy_logprobs is not None:
            _check_cumulative(rec.greedy_cumulative_logprob, rec.greedy_logprobs)


def _read_samples(rec: Record, row: dict[str, Any]) -> None:
    """The sampled answers and their per-sample fields (one value per sample)."""
    samples = row.get("sampling_response")
    if samples is not None:
        rec.samples = list(_check_str_list(samples, "sampling_response"))
    k = len(rec.samples)
    for key, attr in (("sampling_correctness", "sample_correct"), ("consistency_judgement", "sample_consistent")):
        if row.get(key) is not None:
            setattr(rec, attr, _check_01_list(row[key], key, k))
    if row.get("sampling_logprobs") is not None:
        value = row["sampling_logprobs"]
        if not isinstance(value, list) or len(value) != k:
            raise _FieldError("sampling_logprobs", f"expected {k} lists (one per sampled answer), got {describe(value)}")
        rec.sample_logprobs = [_check_logprobs(_check_float_list(v, "sampling_logprobs"), "sampling_logprobs", f"sample {j} ")
                               for j, v in enumerate(value)]


def record_to_dict(rec: Record, fmt: JsonlFormat = "elical") -> dict[str, Any]:
    """The JSON object of a record: the released HonestyBench fields first, then elical's own."""
    row: dict[str, Any] = {"question": rec.question, "answer": list(rec.answers)}
    if rec.greedy_response is not None:
        row["greedy_response"] = [rec.greedy_response]
    if rec.greedy_correct is not None:
        row["greedy_correctness"] = rec.greedy_correct
    if rec.greedy_tokens is not None:
        row["greedy_tokens"] = [list(rec.greedy_tokens)]
    cumulative = rec.greedy_cumulative_logprob
    if cumulative is None and rec.greedy_logprobs is not None:
        cumulative = float(sum(rec.greedy_logprobs))
    if cumulative is not None:
        row["greedy_cumulative_logprobs"] = [cumulative]
    if rec.greedy_logprobs is not None:
        row["greedy_logprobs"] = [list(rec.greedy_logprobs)]
    if rec.samples or rec.sample_correct is not None or rec.sample_consistent is not None:
        row["sampling_response"] = list(rec.samples)
    if rec.sample_correct is not None:
        row["sampling_correctness"] = list(rec.sample_correct)
    if rec.sample_consistent is not None:
        row["consistency_judgement"] = list(rec.sample_consistent)
    if fmt == "elical":
        row.update({"id": rec.id, "dataset": rec.dataset, "split": rec.split})
        if rec.prompt is not None:
            row["prompt"] = rec.prompt
        if rec.sample_logprobs is not None:
            row["sampling_logprobs"] = [list(v) for v in rec.sample_logprobs]
        if rec.verbal:
            row["verbal"] = dict(rec.verbal)
        if rec.generation:
            row["generation"] = dict(rec.generation)
        if rec.failure is not None:
            row["failure"] = rec.failure
    row.update(rec.extra)
    return row


def check_required(rec: Record, require: Sequence[str]) -> None:
    """Raise if a record lacks a field the caller needs (records of failed questions are exempt)."""
    if rec.failed:
        return
    for name in require:
        if not has_annotation(rec, RECORD_ATTRIBUTE.get(name, name)):
            raise _FieldError(name, f"missing (this step needs: {', '.join(require)})")
