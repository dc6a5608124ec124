"""Record files: JSONL (HonestyBench and extended) and Parquet, read with checks, written atomically."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from elical.records.convert import JsonlFormat, _FieldError, check_required, record_from_dict, record_to_dict
from elical.records.record import KNOWN_SPLITS, Record, RecordError


def dataset_and_split_from_path(path: str | os.PathLike) -> tuple[str, str]:
    """Guess (dataset, split) from a file name such as ``nq_test.jsonl`` or ``hq_dev.parquet``."""
    stem = Path(path).name.split(".")[0]
    match = re.fullmatch(rf"(.+?)[_\-.]({'|'.join(KNOWN_SPLITS)})", stem)
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


def iter_json_objects(path: str | os.PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file; a bad line raises RecordError."""
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise RecordError(path, line_no, None, f"malformed JSON ({err.msg} at column {err.colno})") from None
            if not isinstance(row, dict):
                raise RecordError(path, line_no, None, f"expected a JSON object, got {type(row).__name__}")
            yield line_no, row


def read_jsonl(path: str | os.PathLike, **kwargs: Any) -> list[Record]:
    """Read a HonestyBench (or extended) JSONL file into records."""
    return list(iter_jsonl(path, **kwargs))


def write_jsonl(records: Iterable[Record], path: str | os.PathLike, fmt: JsonlFormat = "elical") -> None:
    """Write records as JSONL atomically; ``fmt='honestybench'`` writes only the released fields."""
    with atomic_write(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record_to_dict(rec, fmt), ensure_ascii=False) + "\n" for rec in records)


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


class _HasId(Protocol):
    id: str


IdT = TypeVar("IdT", bound=_HasId)


def dedupe_ids(items: list[IdT]) -> list[IdT]:
    """Give repeated (dataset, question) ids distinct ids (``<id>-2``, ...) in order; records and QA items alike."""
    seen: dict[str, int] = {}
    for item in items:
        count = seen.get(item.id, 0) + 1
        seen[item.id] = count
        if count > 1:
            item.id = f"{item.id}-{count}"
    return items


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
