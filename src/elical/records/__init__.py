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

from elical.records.convert import JsonlFormat, check_required, record_from_dict, record_to_dict
from elical.records.files import (
    SkipReport,
    atomic_write,
    dataset_and_split_from_path,
    dedupe_ids,
    iter_json_objects,
    iter_jsonl,
    read_jsonl,
    read_parquet,
    read_parquet_table,
    read_records,
    write_jsonl,
    write_parquet,
    write_records,
)
from elical.records.record import (
    ELICAL_FIELDS,
    HB_FIELDS,
    KNOWN_SPLITS,
    RECORD_ATTRIBUTE,
    VERBAL_KINDS,
    MissingFieldError,
    Record,
    RecordError,
    has_annotation,
    is_logprob,
    record_id,
    verbal_kind,
)

__all__ = [
    "ELICAL_FIELDS",
    "HB_FIELDS",
    "KNOWN_SPLITS",
    "RECORD_ATTRIBUTE",
    "VERBAL_KINDS",
    "JsonlFormat",
    "MissingFieldError",
    "Record",
    "RecordError",
    "SkipReport",
    "atomic_write",
    "check_required",
    "dataset_and_split_from_path",
    "dedupe_ids",
    "has_annotation",
    "is_logprob",
    "iter_json_objects",
    "iter_jsonl",
    "read_jsonl",
    "read_parquet",
    "read_parquet_table",
    "read_records",
    "record_from_dict",
    "record_id",
    "record_to_dict",
    "verbal_kind",
    "write_jsonl",
    "write_parquet",
    "write_records",
]
