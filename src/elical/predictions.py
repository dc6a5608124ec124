"""Confidence prediction files: one confidence per record id, with the method and config that made it.

A prediction file is Parquet (``.parquet``), CSV (``.csv``) or JSONL (``.jsonl``) with the columns
``id`` and ``confidence``. Parquet keeps the method name, the producing config and, for a trained
model, its :class:`elical.model_key.ModelKey` (method, budget, seed) in its schema metadata; for CSV
and JSONL an optional ``method`` column carries the name. Without any, the file stem is the method name.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elical.model_key import ModelKey
from elical.records import RecordError, atomic_write


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
    """Read a prediction file, checking ids are present and unique and confidences are numbers in [0, 1];
    a bad file or row is a RecordError naming the file and row."""
    import pandas as pd

    path = Path(path)
    method, meta, key = path.stem, {}, None
    if path.suffix not in (".parquet", ".csv", ".jsonl"):
        raise RecordError(path, None, None, "unknown prediction format (use .parquet, .csv or .jsonl)")
    if not path.is_file():
        raise FileNotFoundError(f"prediction file not found: {path}")
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            schema_meta = table.schema.metadata or {}
            method = schema_meta.get(b"elical.method", method.encode()).decode()
            meta = json.loads(schema_meta.get(b"elical.meta", b"{}"))
            if b"elical.model_key" in schema_meta:
                key = ModelKey.from_dict(json.loads(schema_meta[b"elical.model_key"]))
            frame = table.to_pandas()
        elif path.suffix == ".csv":
            frame = pd.read_csv(path, dtype={"id": str})
        else:
            frame = pd.read_json(path, lines=True, dtype={"id": str})
    except (OSError, ValueError) as err:  # UnicodeDecodeError, pandas and pyarrow parse errors
        reason = " ".join(str(err).split())[:200]
        raise RecordError(path, None, None, f"not a readable {path.suffix[1:]} file ({reason})") from None
    for column in ("id", "confidence"):
        if column not in frame.columns:
            raise RecordError(path, None, column, f"missing column; found {list(frame.columns)}")
    if "method" in frame.columns and len(frame):
        method = str(frame["method"].iloc[0])
    first_row = 2 if path.suffix == ".csv" else 1  # a CSV's row 1 is its header
    values = pd.to_numeric(frame["confidence"], errors="coerce").astype(float).tolist()
    seen: set[str] = set()
    for row, (rid, raw, value) in enumerate(zip(frame["id"], frame["confidence"], values), start=first_row):
        if pd.isna(rid) or str(rid) == "":
            raise RecordError(path, row, "id", "missing id")
        if str(rid) in seen:
            raise RecordError(path, row, "id", f"duplicate id {str(rid)!r}")
        seen.add(str(rid))
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise RecordError(path, row, "confidence", f"expected a number in [0, 1], got {raw!r}")
    return Predictions(method=method, confidence=dict(zip(map(str, frame["id"]), values)), meta=meta, key=key)


def unmatched_note(predictions: Predictions, record_ids: Collection[str]) -> str | None:
    """A note when some prediction ids match no record (predictions of other questions are ignored)."""
    ids = set(record_ids)
    unmatched = sum(1 for rid in predictions.confidence if rid not in ids)
    if not unmatched:
        return None
    return (f"{predictions.method}: {unmatched} of {len(predictions.confidence)} prediction id(s) match no record "
            "(ignored; predictions of other questions or files?)")
