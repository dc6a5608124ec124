"""Read QA items from JSONL, MMLU-style CSV, folders of either, and cached Hugging Face datasets."""

from __future__ import annotations

import csv
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from elical.core.inputs import InputError, read_text, text_lines
from elical.core.strict_json import JsonError, loads
from elical.data.items import CHOICE_LETTERS, QAItem
from elical.data.registry import ConversionError, lookup
from elical.records import (
    KNOWN_SPLITS,
    RecordError,
    dataset_and_split_from_path,
    dedupe_ids,
    iter_json_objects,
)


class _OfDataset(Protocol):
    dataset: str


Item = TypeVar("Item", bound=_OfDataset)


def first_of_each_dataset(items: Sequence[Item], limit: int | None) -> list[Item]:
    """``--limit``'s one meaning everywhere: the first ``limit`` items of each dataset, in the order given
    (all when None); a file holding NQ, PopQA and MMLU keeps ``limit`` of each, as do three files."""
    if limit is None:
        return list(items)
    seen: Counter[str] = Counter()
    kept = []
    for item in items:
        seen[item.dataset] += 1
        if seen[item.dataset] <= limit:
            kept.append(item)
    return kept


def _item(row: dict[str, Any], dataset: str, split: str, where: tuple[Any, int | None]) -> QAItem:
    spec = lookup(dataset)
    try:
        question, answers, choices = spec.converter(row)
    except ConversionError as err:
        raise RecordError(where[0], where[1], None, f"{err} (dataset format '{spec.name}')") from None
    return QAItem(question=question, answers=answers, dataset=dataset, split=split, choices=choices)


def iter_jsonl_items(path: str | os.PathLike, dataset: str | None = None, split: str | None = None) -> Iterator[QAItem]:
    """Yield items from a JSONL (or JSON list) file; the dataset's converter reads each row."""
    guess_dataset, guess_split = dataset_and_split_from_path(path)
    dataset, split = dataset or guess_dataset, split or guess_split
    path = Path(path)
    if path.suffix == ".json":
        try:
            rows = loads(read_text(path))
        except JsonError as err:
            raise RecordError(path, err.line, None, err.message) from None
        if isinstance(rows, dict) and "data" in rows:
            rows = rows["data"]
        if not isinstance(rows, list):
            raise RecordError(path, None, None, "expected a JSON list of objects (or {'data': [...]})")
        for index, row in enumerate(rows, start=1):
            if not isinstance(row, dict):
                raise RecordError(path, index, None, f"expected a JSON object, got {type(row).__name__}")
            yield _item(row, dataset, split, (path, index))
        return
    for line_no, row in iter_json_objects(path):
        yield _item(row, dataset, split, (path, line_no))


MMLU_COLUMNS = 6  # question, A, B, C, D, answer letter


def iter_mmlu_csv(path: str | os.PathLike, split: str | None = None, dataset: str = "mmlu") -> Iterator[QAItem]:
    """Yield MMLU items from a header-less CSV (question, A, B, C, D, answer letter); a row of another
    width (often an unquoted comma) is a RecordError naming the file and line."""
    path = Path(path)
    stem = path.stem
    match = re.fullmatch(rf"(.+?)_({'|'.join(KNOWN_SPLITS)})", stem)
    subject = match.group(1) if match else stem
    split = split or (match.group(2) if match else path.parent.name if path.parent.name in KNOWN_SPLITS else "test")
    reader = csv.reader(line for _, line in text_lines(path))
    for row in reader:
        line_no = reader.line_num
        if not row:
            continue
        if line_no == 1 and [c.strip().lower() for c in row[:2]] == ["question", "a"]:
            continue  # a header line
        if len(row) != MMLU_COLUMNS:
            raise RecordError(path, line_no, None, f"expected {MMLU_COLUMNS} columns (question, A, B, C, D, answer "
                                                   f"letter), got {len(row)}; quote fields that hold commas")
        fields = {"question": row[0], "answer": row[-1]}
        fields.update(zip(CHOICE_LETTERS, row[1:-1]))
        item = _item(fields, dataset, split, (path, line_no))
        item.meta["subject"] = subject
        yield item


def load_hf(name: str, split: str, config: str | None = None, dataset: str | None = None) -> list[QAItem]:
    """Items from a Hugging Face dataset already in the local cache (never downloads)."""
    try:
        import datasets
    except ImportError as err:
        raise ImportError("reading Hugging Face datasets needs the extra: pip install 'elical[datasets]'") from err
    data = datasets.load_dataset(name, config, split=split, download_mode="reuse_cache_if_exists")
    dataset = dataset or lookup(name.split("/")[-1]).name
    if dataset == "generic":
        dataset = name.split("/")[-1]
    return [_item(dict(row), dataset, split, (f"hf:{name}", i)) for i, row in enumerate(data, start=1)]


QA_SUFFIXES = (".jsonl", ".json", ".csv")


def load_items(
    source: str | os.PathLike,
    dataset: str | None = None,
    split: str | None = None,
    limit: int | None = None,
) -> list[QAItem]:
    """Load QA items from a file, a folder of files, or ``hf:NAME[:CONFIG]:SPLIT``; ``limit`` keeps the first n
    of each dataset (:func:`first_of_each_dataset`). A source without questions (an empty file, a folder
    without QA files) is an InputError naming it."""
    if limit is not None and limit < 1:
        raise InputError(f"limit: expected at least 1 question per dataset, got {limit}")
    text = str(source)
    if text.startswith("hf:"):
        parts = text[3:].split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"expected hf:NAME:SPLIT or hf:NAME:CONFIG:SPLIT, got {text!r}")
        name, config, hf_split = (parts[0], None, parts[1]) if len(parts) == 2 else parts
        hf_items = load_hf(name, hf_split, config, dataset)
        return dedupe_ids(first_of_each_dataset(hf_items, limit))
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"QA source not found: {path}")
    files = sorted(p for p in path.iterdir() if p.suffix in QA_SUFFIXES and not p.name.startswith(".")) if path.is_dir() else [path]
    if not files:
        raise InputError(f"{path}: no QA files ({', '.join(QA_SUFFIXES)}) in this folder")
    items: list[QAItem] = []
    for file in files:
        iterator: Iterable[QAItem]
        if file.suffix == ".csv":
            iterator = iter_mmlu_csv(file, split=split or (path.name if path.is_dir() and path.name in KNOWN_SPLITS else None), dataset=dataset or "mmlu")
        else:
            iterator = iter_jsonl_items(file, dataset, split)
        count = len(items)
        items.extend(iterator)
        if len(items) == count:
            raise InputError(f"{file}: no questions (empty file)")
    return dedupe_ids(first_of_each_dataset(items, limit))


def load_many(sources: Iterable[str | os.PathLike], limit: int | None = None) -> list[QAItem]:
    """Concatenate several sources (each with its own dataset name), keeping ids unique; ``limit`` keeps the
    first n of each dataset (:func:`first_of_each_dataset`)."""
    items: list[QAItem] = []
    for source in sources:
        items.extend(load_items(source, limit=limit))
    return dedupe_ids(first_of_each_dataset(items, limit))
