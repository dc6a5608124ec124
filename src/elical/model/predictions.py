"""Confidence prediction files: one confidence per record id, with the method and config that made it.

A prediction file is Parquet (``.parquet``), CSV (``.csv``) or JSONL (``.jsonl``) with the columns
``id`` and ``confidence``. Parquet keeps the method name, the producing config and, for a trained
model, its :class:`elical.model.key.ModelKey` (method, budget, seed) in its schema metadata; for CSV
and JSONL an optional ``method`` column carries the name. Without any, the file stem is the method name.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elical.core.inputs import InputError, text_lines
from elical.core.strict_json import describe, loads
from elical.model.key import ModelKey
from elical.records import RecordError, atomic_write, iter_json_objects, read_parquet_table


@dataclass
class Predictions:
    """Confidences of one method, keyed by record id; ``key``: which trained model made them (None for
    other sources)."""

    method: str
    confidence: dict[str, float]
    meta: dict[str, Any] = field(default_factory=dict)
    key: ModelKey | None = None


def write_predictions(
    path: str | os.PathLike,
    ids: Sequence[str],
    confidence: Sequence[float],
    method: str,
    meta: dict[str, Any] | None = None,
    key: ModelKey | None = None,
) -> None:
    """Write one method's confidences atomically; the suffix picks the format. A trained model's ``key``
    is kept in Parquet metadata (CSV and JSONL have none to keep it in: refused there)."""
    import pandas as pd

    if len(ids) != len(confidence):
        raise ValueError(f"got {len(ids)} ids but {len(confidence)} confidences")
    path = Path(path)
    if key is not None and path.suffix != ".parquet":
        raise ValueError(f"{path}: a model key is kept in Parquet metadata only (write a .parquet file)")
    frame = pd.DataFrame({"id": list(ids), "confidence": [float(c) for c in confidence]})
    with atomic_write(path) as tmp:
        if path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(frame, preserve_index=False)
            extra = {b"elical.method": method.encode(), b"elical.meta": json.dumps(meta or {}).encode()}
            if key is not None:
                extra[b"elical.model_key"] = json.dumps(key.to_dict()).encode()
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})
            pq.write_table(table, tmp)
        elif path.suffix == ".csv":
            frame.assign(method=method).to_csv(tmp, index=False)
        elif path.suffix == ".jsonl":
            frame.assign(method=method).to_json(tmp, orient="records", lines=True)
        else:
            raise ValueError(f"{path}: unknown prediction format (use .parquet, .csv or .jsonl)")


def read_predictions(path: str | os.PathLike) -> Predictions:
    """Read a prediction file, checking ids are non-empty strings, present and unique, confidences numbers in
    [0, 1] (never booleans; CSV text that reads as one), one method throughout and no column given twice;
    a bad file or row is a RecordError naming the file and row."""
    path = Path(path)
    if path.suffix not in (".parquet", ".csv", ".jsonl"):
        raise RecordError(path, None, None, "unknown prediction format (use .parquet, .csv or .jsonl)")
    if not path.is_file():
        raise FileNotFoundError(f"prediction file not found: {path}")
    method: str = path.stem
    meta: dict[str, Any] = {}
    key: ModelKey | None = None
    try:
        if path.suffix == ".parquet":
            columns, rows, (method, meta, key) = _parquet_rows(path)
        elif path.suffix == ".csv":
            columns, rows = _csv_rows(path)
        else:
            rows = list(iter_json_objects(path))
            columns = list(rows[0][1]) if rows else []
    except InputError as err:  # a binary or non-UTF-8 text file
        where = str(err).removeprefix(f"{path}:")
        raise RecordError(path, None, None, f"not a readable {path.suffix[1:]} file (line {where.strip()})") from None
    for column in ("id", "confidence"):
        if column not in columns:
            raise RecordError(path, None, column, f"missing column; found {columns}")
    confidence: dict[str, float] = {}
    for row, values in rows:
        rid, raw = values.get("id"), values.get("confidence")
        if rid is None or rid == "":
            raise RecordError(path, row, "id", "missing id")
        if not isinstance(rid, str):
            raise RecordError(path, row, "id", f"expected a string, got {describe(rid)}")
        if rid in confidence:
            raise RecordError(path, row, "id", f"duplicate id {rid!r}")
        value = _confidence(raw)
        if value is None:
            raise RecordError(path, row, "confidence", f"expected a number in [0, 1], got {describe(raw)}")
        confidence[rid] = value
    if "method" in columns and rows:
        method = _one_method(path, rows) or method  # an empty name: the file's
    return Predictions(method=method, confidence=confidence, meta=meta, key=key)


Rows = list[tuple[int, dict[str, Any]]]  # (line or row number, value by column) of a prediction file


def _confidence(value: Any) -> float | None:
    """A confidence: a number (not a boolean) or text holding one, in [0, 1]; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        return None
    return number if 0.0 <= number <= 1.0 else None  # NaN fails too


def _one_method(path: Path, rows: Rows) -> str:
    """The method every row names (a string, the same on each row)."""
    first = rows[0][1].get("method")
    for row, values in rows:
        method = values.get("method")
        if not isinstance(method, str) or method != first:
            raise RecordError(path, row, "method", f"expected the same method name on every row ({describe(first)} "
                                                   f"on the first), got {describe(method)}")
    return str(first)


def _csv_rows(path: Path) -> tuple[list[str], Rows]:
    """A CSV's header and rows (line number, text by column); a repeated column or a row of another width is
    a RecordError."""
    reader = csv.reader(line for _, line in text_lines(path))
    try:
        header = next(reader, [])
        header[:1] = [name.removeprefix("\ufeff") for name in header[:1]]  # a byte-order mark (spreadsheet exports)
        _check_unique(path, header)
        rows: Rows = []
        for values in reader:
            if not values:
                continue
            if len(values) != len(header):
                raise RecordError(path, reader.line_num, None, f"expected {len(header)} columns as in the header, got "
                                                               f"{len(values)}; quote fields that hold commas")
            rows.append((reader.line_num, dict(zip(header, values))))
    except csv.Error as err:
        raise RecordError(path, reader.line_num, None, f"not readable CSV ({err})") from None
    return header, rows


def _parquet_rows(path: Path) -> tuple[list[str], Rows, tuple[str, dict[str, Any], ModelKey | None]]:
    """A Parquet prediction file's columns, rows and (method, meta, model key) from its metadata."""
    table = read_parquet_table(path)
    try:
        schema_meta = table.schema.metadata or {}
        method = schema_meta.get(b"elical.method", path.stem.encode()).decode()
        meta = loads(schema_meta.get(b"elical.meta", b"{}").decode())
        key = ModelKey.from_dict(loads(schema_meta[b"elical.model_key"].decode())) if b"elical.model_key" in schema_meta else None
    except (ValueError, TypeError, KeyError) as err:  # bad metadata
        reason = " ".join(str(err).split())[:200]
        raise RecordError(path, None, None, f"unreadable elical metadata ({reason})") from None
    if not isinstance(meta, dict):
        raise RecordError(path, None, None, "unreadable elical metadata (elical.meta is not a JSON object)")
    return table.column_names, list(enumerate(table.to_pylist(), start=1)), (method, meta, key)


def _check_unique(path: Path, columns: list[str]) -> None:
    """A column named twice is an error (which one counts would be a guess)."""
    repeated = next((name for i, name in enumerate(columns) if name in columns[:i]), None)
    if repeated is not None:
        raise RecordError(path, None, repeated, "column given twice (each column may appear once)")


def unmatched_note(predictions: Predictions, record_ids: Collection[str]) -> str | None:
    """A note when some prediction ids match no record (predictions of other questions are ignored)."""
    ids = set(record_ids)
    unmatched = sum(1 for rid in predictions.confidence if rid not in ids)
    if not unmatched:
        return None
    return (f"{predictions.method}: {unmatched} of {len(predictions.confidence)} prediction id(s) match no record "
            "(ignored; predictions of other questions or files?)")
