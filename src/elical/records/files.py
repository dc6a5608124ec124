"""Record files: JSONL (HonestyBench and extended) and Parquet, read with checks, written atomically."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from elical.core.inputs import InputError, text_lines
from elical.core.io import atomic_write
from elical.core.strict_json import JsonError, describe, loads
from elical.records.convert import (
    JsonlFormat,
    _FieldError,
    _single,
    check_required,
    record_from_dict,
    record_to_dict,
    verbal_replies,
)
from elical.records.record import (
    ELICAL_FIELDS,
    KNOWN_SPLITS,
    LOGPROB_SLACK,
    RECORD_ATTRIBUTE,
    Record,
    RecordError,
)


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
    for _, rec, _ in _jsonl_rows(path, dataset, split, skip_invalid, skips, require):
        yield rec


def _jsonl_rows(
    path: str | os.PathLike, dataset: str | None, split: str | None, skip_invalid: bool, skips: SkipReport | None,
    require: Sequence[str],
) -> Iterator[tuple[int, Record, bool]]:
    """(line number, record, whether the row gave its id) of each valid row of a JSONL record file."""
    guess_dataset, guess_split = dataset_and_split_from_path(path)
    dataset, split = dataset or guess_dataset, split or guess_split
    for line_no, line in text_lines(path):
        if not line.strip():
            continue
        try:
            try:
                row = loads(line)
            except JsonError as err:
                raise _FieldError("", err.message) from None
            rec = record_from_dict(row, dataset=dataset, split=split)
            check_required(rec, require)
            yield line_no, rec, bool(row.get("id"))
        except _FieldError as err:
            _reject(RecordError(path, line_no, err.field or None, err.message), skip_invalid, skips)


def _reject(error: RecordError, skip_invalid: bool, skips: SkipReport | None) -> None:
    if not skip_invalid:
        raise error from None
    if skips is not None:
        skips.skipped.append(str(error))


def iter_json_objects(path: str | os.PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file; a bad line raises RecordError."""
    for line_no, line in text_lines(path):
        if not line.strip():
            continue
        try:
            row = loads(line)
        except JsonError as err:
            raise RecordError(path, line_no, None, err.message) from None
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
    """The HonestyBench fields under their released names and shapes (the greedy fields wrapped in one-element
    lists), then elical's own; lists are list columns, verbal a map, the free-form dicts JSON text."""
    import pyarrow as pa

    text, number, flag = pa.string(), pa.float64(), pa.int8()
    return pa.schema(
        [
            ("question", text),
            ("answer", pa.list_(text)),
            ("greedy_response", pa.list_(text)),
            ("greedy_correctness", flag),
            ("greedy_tokens", pa.list_(pa.list_(text))),
            ("greedy_cumulative_logprobs", pa.list_(number)),
            ("greedy_logprobs", pa.list_(pa.list_(number))),
            ("sampling_response", pa.list_(text)),
            ("sampling_correctness", pa.list_(flag)),
            ("consistency_judgement", pa.list_(flag)),
            ("id", text),
            ("dataset", text),
            ("split", text),
            ("prompt", text),
            ("sampling_logprobs", pa.list_(pa.list_(number))),
            ("verbal", pa.map_(text, text)),
            ("generation", text),
            ("failure", text),
            ("extra", text),
        ]
    )


# Parquet column -> Record attribute; the greedy columns hold one-element lists, as HonestyBench's JSONL does.
_ATTRIBUTES = RECORD_ATTRIBUTE | {name: name for name in ELICAL_FIELDS} | {"sampling_logprobs": "sample_logprobs",
                                                                            "extra": "extra"}
_WRAPPED = ("greedy_response", "greedy_tokens", "greedy_cumulative_logprobs", "greedy_logprobs")
_JSON_COLUMNS = ("generation", "extra")


def _parquet_value(rec: Record, column: str) -> Any:
    """A record's value for one Parquet column."""
    value = getattr(rec, _ATTRIBUTES[column])
    if column in _WRAPPED:
        return None if value is None else [value]
    if column == "verbal":
        return [(kind, str(text)) for kind, text in value.items()]
    return json.dumps(value, ensure_ascii=False) if column in _JSON_COLUMNS else value


def write_parquet(records: Sequence[Record], path: str | os.PathLike) -> None:
    """Write records to one Parquet file atomically, one column per HonestyBench (then elical) field."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _parquet_schema()
    columns = {name: [_parquet_value(rec, name) for rec in records] for name in schema.names}
    table = pa.table(columns, schema=schema)
    with atomic_write(path) as tmp:
        pq.write_table(table, tmp)


def read_parquet(path: str | os.PathLike) -> list[Record]:
    """Read records written by :func:`write_parquet`; a row breaking a record rule raises RecordError."""
    return [rec for _, rec, _ in _parquet_rows(path, (), skip_invalid=False, skips=None)]


def _parquet_rows(
    path: str | os.PathLike, require: Sequence[str], skip_invalid: bool, skips: SkipReport | None
) -> Iterator[tuple[int, Record, bool]]:
    """(row number, record, whether the row gave its id) of each valid row of a Parquet record file.

    Rows get the checks of JSONL rows (0/1 correctness, finite log-probs <= 0, one value per sample, ...):
    column-wise first, then in full on the rows that may break a rule (or on every row when the file's
    column types are not elical's, as in the former layout whose columns were named after Record's
    attributes and held JSON text)."""
    table = read_parquet_table(path)
    legacy = "answers" in table.column_names and "answer" not in table.column_names
    missing = [name for name in ("question", "answers" if legacy else "answer") if name not in table.column_names]
    if missing:
        raise RecordError(path, None, missing[0], "missing column (not an elical record file?)")
    expected = _parquet_schema()
    foreign = legacy or any(table.schema.field(n).type != expected.field(n).type
                            for n in table.column_names if n in expected.names)
    suspects = set(range(table.num_rows)) if foreign else _suspect_rows(table)
    to_record = _legacy_record if legacy else _record_of_row
    for index, row in enumerate(table.to_pylist()):
        try:
            rec = to_record(row)
            if index in suspects:
                record_from_dict(record_to_dict(rec))
            check_required(rec, require)
        except _FieldError as err:
            _reject(RecordError(path, index + 1, err.field or None, err.message), skip_invalid, skips)
            continue
        except (TypeError, ValueError) as err:
            _reject(RecordError(path, index + 1, None, f"malformed row ({err})"), skip_invalid, skips)
            continue
        yield index + 1, rec, bool(row.get("id"))


def read_parquet_table(path: str | os.PathLike) -> Any:
    """A Parquet file's table; an unreadable file, or one naming a column twice, is a RecordError."""
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
        repeated = next((name for i, name in enumerate(names) if name in names[:i]), None)
        table = pq.read_table(path) if repeated is None else None
    except (OSError, ValueError) as err:  # pyarrow's ArrowIOError / ArrowInvalid
        raise RecordError(path, None, None, f"not a readable Parquet file ({' '.join(str(err).split())})") from None
    if repeated is not None:
        raise RecordError(path, None, repeated, "column given twice (each column may appear once)")
    return table


def _record_of_row(row: dict[str, Any]) -> Record:
    """The record of one Parquet row in HonestyBench columns; other columns are kept in ``extra``, as in JSONL."""
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for column, value in row.items():
        if column not in _ATTRIBUTES:
            extra[column] = value
        elif column in _WRAPPED:
            values[_ATTRIBUTES[column]] = None if value is None else _single(value, column)
        elif column == "verbal":
            values["verbal"] = verbal_replies(value or ())
        elif column in _JSON_COLUMNS:
            values[column] = _json_object(value, column)
        else:
            values[_ATTRIBUTES[column]] = value
    values["answers"] = values["answers"] if values["answers"] is not None else []
    values["samples"] = values.get("samples") or []
    values["extra"] = values.get("extra", {}) | extra
    return Record(**values)


def _json_object(text: Any, column: str) -> dict[str, Any]:
    """The object a JSON-text column holds (empty or null: ``{}``); other JSON or bad text is a _FieldError."""
    if not text:
        return {}
    if not isinstance(text, str):
        raise _FieldError(column, f"expected JSON text, got {describe(text)}")
    try:
        value = loads(text)
    except JsonError as err:
        raise _FieldError(column, err.message) from None
    if not isinstance(value, dict):
        raise _FieldError(column, f"expected a JSON object, got {describe(value)}")
    return value


def _legacy_record(row: dict[str, Any]) -> Record:
    """The record of one row of elical's former Parquet layout (Record's attribute names, dicts as JSON text)."""
    names = {f.name for f in dataclasses.fields(Record)}
    values = {name: value for name, value in row.items() if name in names}
    for name in ("verbal", "generation", "extra"):
        if name in values:
            values[name] = _json_object(values[name], name)
    values["answers"] = values["answers"] if values["answers"] is not None else []
    values["samples"] = values.get("samples") or []
    return Record(**values)


def _suspect_rows(table: Any) -> set[int]:
    """Rows of a record table (elical's column types) that may break a record rule, found column-wise;
    they are checked in full afterwards, so this may over-report but never misses."""
    import numpy as np
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return set()
    cols = {name: table[name].combine_chunks() for name in table.column_names}
    bad = np.zeros(table.num_rows, dtype=bool)

    def flag(ok: Any) -> None:  # rows where ``ok`` (a boolean array over rows) is false or null
        bad[~ok.fill_null(False).to_numpy(zero_copy_only=False)] = True

    def flag_values(name: str, ok: Callable[[Any], Any], depth: int = 1) -> None:  # rows with a list value not ok
        values, parents = cols[name], None
        for _ in range(depth):
            index = pc.list_parent_indices(values).to_numpy()
            parents = index if parents is None else parents[index]
            values = pc.list_flatten(values)
        if parents is not None and len(values):
            bad[parents[~ok(values).fill_null(False).to_numpy(zero_copy_only=False)]] = True

    def length(name: str) -> Any:  # -1 where absent
        return pc.list_value_length(cols[name]).fill_null(-1).to_numpy(zero_copy_only=False) if name in cols else None

    flag(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(cols["question"])), 0))
    bad |= length("answer") < 1
    flag_values("answer", pc.is_valid)
    for name in _WRAPPED:
        if name in cols:
            bad |= (length(name) == 0) | (length(name) > 1)
    samples = np.maximum(length("sampling_response"), 0) if "sampling_response" in cols else np.zeros(table.num_rows, dtype=int)
    if "sampling_response" in cols:
        flag_values("sampling_response", pc.is_valid)
    if "greedy_correctness" in cols:
        flag(pc.or_kleene(pc.is_null(cols["greedy_correctness"]), _is_binary(cols["greedy_correctness"])))
    for name, ok, depth in (("sampling_correctness", _is_binary, 1), ("consistency_judgement", _is_binary, 1),
                            ("sampling_logprobs", pc.is_valid, 1), ("sampling_logprobs", _is_logprob, 2),
                            ("greedy_cumulative_logprobs", _is_logprob, 1), ("greedy_logprobs", _is_logprob, 2),
                            ("greedy_tokens", pc.is_valid, 2)):
        if name in cols:
            flag_values(name, ok, depth)
            if name not in _WRAPPED:
                bad |= (length(name) >= 0) & (length(name) != samples)
    if "greedy_logprobs" in cols and "greedy_tokens" in cols:
        tokens = _inner_lengths(cols["greedy_tokens"], table.num_rows)
        values = _inner_lengths(cols["greedy_logprobs"], table.num_rows)
        bad |= (tokens >= 0) & (values >= 0) & (tokens != values)
    if "greedy_logprobs" in cols and "greedy_cumulative_logprobs" in cols:
        bad |= _sum_differs(cols["greedy_cumulative_logprobs"], cols["greedy_logprobs"], table.num_rows)
    if "failure" in cols:
        flag(pc.or_kleene(pc.is_null(cols["failure"]), pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(cols["failure"])), 0)))
    return set(np.flatnonzero(bad).tolist())


def _sum_differs(cumulative: Any, logprobs: Any, n_rows: int) -> Any:
    """Rows whose cumulative log-prob may differ from the sum of their greedy log-probs by more than the
    record rule allows (at half its slack: the full check of these rows decides)."""
    import numpy as np
    import pyarrow.compute as pc

    inner = pc.list_flatten(logprobs)
    owners = pc.list_parent_indices(logprobs).to_numpy()[pc.list_parent_indices(inner).to_numpy()]
    values = pc.list_flatten(inner).fill_null(0).to_numpy(zero_copy_only=False)
    sums = np.bincount(owners, weights=values, minlength=n_rows)
    counts = _inner_lengths(logprobs, n_rows)
    stated = np.full(n_rows, np.nan)
    stated[pc.list_parent_indices(cumulative).to_numpy()] = pc.list_flatten(cumulative).fill_null(np.nan).to_numpy(zero_copy_only=False)
    slack = 0.5 * (1e-3 + 1e-4 * (np.maximum(counts, 0) + np.abs(sums)))
    with np.errstate(invalid="ignore"):
        return (counts >= 0) & ~np.isnan(stated) & ~(np.abs(stated - sums) <= slack)


def _is_binary(values: Any) -> Any:
    """Where pyarrow values are 0 or 1."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.is_in(values, value_set=pa.array([0, 1], values.type))


def _is_logprob(values: Any) -> Any:
    """Where pyarrow values are log-probabilities: finite and <= 0 (with float slack)."""
    import pyarrow.compute as pc

    return pc.and_kleene(pc.is_finite(values), pc.less_equal(values, LOGPROB_SLACK))


def _inner_lengths(column: Any, n_rows: int) -> Any:
    """Length of the list each row's one-element list wraps, -1 where absent."""
    import numpy as np
    import pyarrow.compute as pc

    result = np.full(n_rows, -1)
    inner = pc.list_value_length(pc.list_flatten(column)).fill_null(-1)
    result[pc.list_parent_indices(column).to_numpy()] = inner.to_numpy(zero_copy_only=False)
    return result


# --------------------------------------------------------------------------- any format

RECORD_SUFFIXES = (".jsonl", ".parquet")


def _record_files(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """The record files of the given files and folders; an empty folder, a folder holding the same
    name as both JSONL and Parquet, or a file given twice is an InputError."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in RECORD_SUFFIXES and not p.name.startswith("."))
            if not found:
                raise InputError(f"{path}: no record files ({' or '.join(RECORD_SUFFIXES)}) in this folder")
            stems: dict[str, Path] = {}
            for file in found:
                if file.stem in stems:
                    raise InputError(f"{path}: holds both {stems[file.stem].name} and {file.name} (the same records "
                                     "twice?); pass one of the files")
                stems[file.stem] = file
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise FileNotFoundError(f"record file not found: {path}")
    seen: set[Path] = set()
    for file in files:
        if file.resolve() in seen:
            raise InputError(f"{file}: given twice")
        seen.add(file.resolve())
    return files


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
    Ids must be unique: an id a file states twice, or that another file also has, is such an error.
    Only ids made from (dataset, question) may repeat, as released files repeat some questions: the
    repeats get ``<id>-2``, ``<id>-3``, ... in reading order. An empty file or folder is an error.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    records: list[Record] = []
    skips = SkipReport()
    first: dict[str, tuple[str, bool]] = {}  # id -> (where it was read, whether the file stated it)
    repeats: dict[str, int] = {}
    for path in _record_files(paths):
        rows = (_parquet_rows(path, require, skip_invalid, skips) if path.suffix == ".parquet"
                else _jsonl_rows(path, dataset, split, skip_invalid, skips, require))
        count, skipped = 0, len(skips)
        for line, rec, stated in rows:
            count += 1
            if rec.id in first:
                where, stated_before = first[rec.id]
                if stated or stated_before:
                    _reject(RecordError(path, line, "id", f"duplicate id {rec.id!r} (also at {where})"), skip_invalid, skips)
                    continue
                repeats[rec.id] = repeats.get(rec.id, 1) + 1
                rec.id = f"{rec.id}-{repeats[rec.id]}"
            first[rec.id] = (f"{path}:{line}", stated)
            records.append(rec)
        if count == 0 and len(skips) == skipped:
            raise InputError(f"{path}: no records (empty file)")
    if skips.skipped:
        shown = "\n  ".join(skips.skipped[:10])
        more = f"\n  ... and {len(skips) - 10} more" if len(skips) > 10 else ""
        warnings.warn(f"skipped {len(skips)} invalid row(s):\n  {shown}{more}", stacklevel=2)
    if not records:
        raise InputError(f"no valid records in {', '.join(map(str, paths))}")
    return records


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
