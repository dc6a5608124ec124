"""The per-question annotation record, and its files.

One :class:`Record` per (model, question): the greedy answer with token log-probs, k sampled
answers, correctness of each against the gold aliases and consistency of each sample with the
greedy answer. Records are read and written as

* HonestyBench JSONL, exactly as released (ten fields, see ``HB_FIELDS``), optionally extended
  with elical's own fields (id, dataset, split, prompt, ...), and
* Parquet, for speed.

Bad input stops with a :class:`RecordError` naming file, line and field; nothing is dropped
silently (``skip_invalid=True`` skips bad rows and reports how many and where).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

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

JsonlFormat = Literal["elical", "honestybench"]


class RecordError(ValueError):
    """A record file holds a row that is not a valid record; says where and why."""

    def __init__(self, path: str | os.PathLike | None, line: int | None, field: str | None, message: str):
        self.path, self.line, self.field, self.reason = path, line, field, message
        where = f"{path}" if path is not None else "<records>"
        if line is not None:
            where += f":{line}"
        what = f" field '{field}':" if field else ""
        super().__init__(f"{where}:{what} {message}")


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


# --------------------------------------------------------------------------- validation helpers


def _is_01(value: Any) -> bool:
    return isinstance(value, bool) or (isinstance(value, int) and value in (0, 1))


def _check_01(value: Any, name: str) -> int:
    if not _is_01(value):
        raise _FieldError(name, f"expected 0 or 1, got {value!r}")
    return int(value)


def _check_01_list(value: Any, name: str, length: int) -> list[int]:
    if not isinstance(value, list):
        raise _FieldError(name, f"expected a list of 0/1, got {type(value).__name__}")
    if len(value) != length:
        raise _FieldError(name, f"expected {length} values (one per sampled answer), got {len(value)}")
    bad = [(i, v) for i, v in enumerate(value) if not _is_01(v)]
    if bad:
        i, v = bad[0]
        raise _FieldError(name, f"expected only 0/1 values, got {v!r} at position {i}")
    return [int(v) for v in value]


def _check_str_list(value: Any, name: str, *, nonempty: bool = False) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _FieldError(name, f"expected a list of strings, got {_describe(value)}")
    if nonempty and not value:
        raise _FieldError(name, "expected at least one string, got an empty list")
    return value


def _check_float_list(value: Any, name: str) -> list[float]:
    if not isinstance(value, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        raise _FieldError(name, f"expected a list of numbers, got {_describe(value)}")
    return [float(v) for v in value]


def _single(value: Any, name: str) -> Any:
    """HonestyBench wraps the greedy fields in one-element lists."""
    if not isinstance(value, list) or len(value) != 1:
        raise _FieldError(name, f"expected a list holding exactly one element, got {_describe(value)}")
    return value[0]


def _describe(value: Any) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)} element(s)"
    return f"{type(value).__name__} {value!r}"[:80]


class _FieldError(ValueError):
    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(message)


# --------------------------------------------------------------------------- dict <-> Record


def record_from_dict(row: Any, *, dataset: str = "unknown", split: str = "test") -> Record:
    """Build a validated Record from one JSON object in HonestyBench (or extended) form."""
    if not isinstance(row, dict):
        raise _FieldError("", f"expected a JSON object, got {type(row).__name__}")
    for required in ("question", "answer"):
        if required not in row:
            raise _FieldError(required, "missing (every record needs 'question' and 'answer')")
    if not isinstance(row["question"], str) or not row["question"].strip():
        raise _FieldError("question", f"expected a non-empty string, got {_describe(row['question'])}")
    answers = row["answer"]
    if isinstance(answers, str):
        answers = [answers]
    answers = _check_str_list(answers, "answer", nonempty=True)

    rec = Record(
        question=row["question"],
        answers=list(answers),
        dataset=str(row.get("dataset") or dataset),
        split=str(row.get("split") or split),
        id=str(row.get("id") or ""),
        prompt=row.get("prompt"),
        failure=row.get("failure"),
        verbal=dict(row.get("verbal") or {}),
        generation=dict(row.get("generation") or {}),
        extra={k: v for k, v in row.items() if k not in HB_FIELDS and k not in ELICAL_FIELDS},
    )
    if row.get("greedy_response") is not None:
        greedy = _single(row["greedy_response"], "greedy_response")
        if not isinstance(greedy, str):
            raise _FieldError("greedy_response", f"expected a string, got {_describe(greedy)}")
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
    if rec.greedy_tokens is not None and rec.greedy_logprobs is not None:
        if len(rec.greedy_tokens) != len(rec.greedy_logprobs):
            raise _FieldError(
                "greedy_logprobs",
                f"expected one log-prob per greedy token ({len(rec.greedy_tokens)}), got {len(rec.greedy_logprobs)}",
            )
    if rec.greedy_logprobs is not None and any(math.isnan(v) or v > 1e-6 for v in rec.greedy_logprobs):
        raise _FieldError("greedy_logprobs", "expected log-probabilities (finite numbers <= 0)")

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
            raise _FieldError("sampling_logprobs", f"expected {k} lists (one per sampled answer), got {_describe(value)}")
        rec.sample_logprobs = [_check_float_list(v, "sampling_logprobs") for v in value]
    return rec


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


def check_required(rec: Record, require: Sequence[str]) -> None:
    """Raise if a record lacks a field the caller needs (records of failed questions are exempt)."""
    if rec.failed:
        return
    for name in require:
        value = getattr(rec, RECORD_ATTRIBUTE.get(name, name))
        if value is None or (name == "sampling_response" and not value):
            raise _FieldError(name, f"missing (this step needs: {', '.join(require)})")


# --------------------------------------------------------------------------- JSONL


def dataset_and_split_from_path(path: str | os.PathLike) -> tuple[str, str]:
    """Guess (dataset, split) from a file name such as ``nq_test.jsonl`` or ``hq_dev.parquet``."""
    stem = Path(path).name.split(".")[0]
    match = re.fullmatch(r"(.+?)[_\-.](%s)" % "|".join(KNOWN_SPLITS), stem)
    if match:
        return match.group(1), match.group(2)
    return stem, "test"


@dataclass
class SkipReport:
    """Rows skipped by a lenient read: how many and where (file:line and reason)."""

    skipped: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.skipped)


def iter_jsonl(
    path: str | os.PathLike,
    *,
    dataset: str | None = None,
    split: str | None = None,
    skip_invalid: bool = False,
    skips: SkipReport | None = None,
    require: Sequence[str] = (),
) -> Iterator[Record]:
    """Yield validated records from a JSONL file; the first bad row raises unless skip_invalid.

    ``require`` names HonestyBench fields every (non-failed) row must carry for the caller's step.
    """
    guess_dataset, guess_split = dataset_and_split_from_path(path)
    dataset, split = dataset or guess_dataset, split or guess_split
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise _FieldError("", f"malformed JSON ({err.msg} at column {err.colno})") from None
                rec = record_from_dict(row, dataset=dataset, split=split)
                check_required(rec, require)
                yield rec
            except _FieldError as err:
                _reject(RecordError(path, line_no, err.field or None, err.message), skip_invalid, skips)


def _reject(error: RecordError, skip_invalid: bool, skips: SkipReport | None) -> None:
    if not skip_invalid:
        raise error from None
    if skips is not None:
        skips.skipped.append(str(error))


def read_jsonl(path: str | os.PathLike, **kwargs: Any) -> list[Record]:
    """Read a HonestyBench (or extended) JSONL file into records."""
    return list(iter_jsonl(path, **kwargs))


def write_jsonl(records: Iterable[Record], path: str | os.PathLike, fmt: JsonlFormat = "elical") -> None:
    """Write records as JSONL atomically; ``fmt='honestybench'`` writes only the released fields."""
    with atomic_write(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for rec in records:
            handle.write(json.dumps(record_to_dict(rec, fmt), ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------- Parquet


def _parquet_schema():  # imported lazily: pyarrow is heavy and only needed for Parquet
    import pyarrow as pa

    return pa.schema(
        [
            ("id", pa.string()),
            ("dataset", pa.string()),
            ("split", pa.string()),
            ("question", pa.string()),
            ("answers", pa.list_(pa.string())),
            ("prompt", pa.string()),
            ("greedy_response", pa.string()),
            ("greedy_tokens", pa.list_(pa.string())),
            ("greedy_logprobs", pa.list_(pa.float64())),
            ("greedy_cumulative_logprob", pa.float64()),
            ("greedy_correct", pa.int8()),
            ("samples", pa.list_(pa.string())),
            ("sample_logprobs", pa.list_(pa.list_(pa.float64()))),
            ("sample_correct", pa.list_(pa.int8())),
            ("sample_consistent", pa.list_(pa.int8())),
            ("verbal", pa.string()),
            ("generation", pa.string()),
            ("failure", pa.string()),
            ("extra", pa.string()),
        ]
    )


_JSON_COLUMNS = ("verbal", "generation", "extra")


def write_parquet(records: Sequence[Record], path: str | os.PathLike) -> None:
    """Write records to one Parquet file atomically (JSON-encoded dict columns)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _parquet_schema()
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    for rec in records:
        for name in schema.names:
            value = getattr(rec, name)
            columns[name].append(json.dumps(value, ensure_ascii=False) if name in _JSON_COLUMNS else value)
    table = pa.table(columns, schema=schema)
    with atomic_write(path) as tmp:
        pq.write_table(table, tmp)


def read_parquet(path: str | os.PathLike) -> list[Record]:
    """Read records written by :func:`write_parquet`."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    missing = [name for name in ("question", "answers") if name not in table.column_names]
    if missing:
        raise RecordError(path, None, missing[0], "missing column (not an elical record file?)")
    names = [f.name for f in dataclasses.fields(Record) if f.name in table.column_names]
    records = []
    for row in table.select(names).to_pylist():
        for name in _JSON_COLUMNS:
            if name in row:
                row[name] = json.loads(row[name]) if row[name] else {}
        records.append(Record(**row))
    return records


# --------------------------------------------------------------------------- any format


def read_records(
    paths: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    skip_invalid: bool = False,
    dataset: str | None = None,
    split: str | None = None,
    require: Sequence[str] = (),
) -> list[Record]:
    """Read records from JSONL or Parquet files (or folders of them), in order.

    ``require`` names HonestyBench fields the caller's step needs (e.g. ``greedy_correctness``);
    a row without one is an error naming file, row and field (or is skipped with ``skip_invalid``).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.suffix in (".jsonl", ".parquet")))
        elif path.exists():
            files.append(path)
        else:
            raise FileNotFoundError(f"record file not found: {path}")
    records: list[Record] = []
    skips = SkipReport()
    for path in files:
        if path.suffix == ".parquet":
            for row_no, rec in enumerate(read_parquet(path), start=1):
                try:
                    check_required(rec, require)
                    records.append(rec)
                except _FieldError as err:
                    _reject(RecordError(path, row_no, err.field, err.message), skip_invalid, skips)
        else:
            records.extend(
                iter_jsonl(path, dataset=dataset, split=split, skip_invalid=skip_invalid, skips=skips, require=require)
            )
    if skips.skipped:
        shown = "\n  ".join(skips.skipped[:10])
        more = f"\n  ... and {len(skips) - 10} more" if len(skips) > 10 else ""
        warnings.warn(f"skipped {len(skips)} invalid row(s):\n  {shown}{more}", stacklevel=2)
    return dedupe_ids(records)


def write_records(records: Sequence[Record], path: str | os.PathLike) -> None:
    """Write records to ``.parquet`` or ``.jsonl`` by the file's suffix."""
    if Path(path).suffix == ".parquet":
        write_parquet(records, path)
    else:
        write_jsonl(records, path)


def dedupe_ids(records: list[Record]) -> list[Record]:
    """Give repeated (dataset, question) pairs distinct ids (``<id>-2``, ...) in file order."""
    seen: dict[str, int] = {}
    for rec in records:
        count = seen.get(rec.id, 0) + 1
        seen[rec.id] = count
        if count > 1:
            rec.id = f"{rec.id}-{count}"
    return records


class atomic_write:
    """Context manager giving a temporary path that is renamed onto ``path`` on success."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")

    def __enter__(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            os.replace(self.tmp, self.path)
        elif self.tmp.exists():
            self.tmp.unlink()
