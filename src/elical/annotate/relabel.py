"""Relabel a finished annotation with other judges, keeping its generations: a new folder as ``elical annotate``
would have made it with those judges, without generating again.

Judges change (a new version of their rules, another judge), and an annotation folder labelled by older rules is
refused on resume, never relabelled silently. Generating is the expensive part; judging is not. So
:func:`relabel` reads a finished folder's records, judges every answered record again with the judges of the
new config (:func:`~elical.annotate.pipeline.judge_records`, as an annotation judges them) and writes a new
folder: its settings are the old folder's with the new judges, so ``elical annotate`` with those settings
finds every question done, and the later steps read it as any annotation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from elical.annotate.config import AnnotateConfig, JudgeConfig
from elical.annotate.folder import step_outputs, write_expected, write_part
from elical.annotate.judges import Judges
from elical.core.fingerprint import check_or_write_settings, recorded_settings
from elical.core.folder_lock import folder_lock
from elical.core.inputs import InputError
from elical.core.io import atomic_write
from elical.records import Record, read_parquet, write_parquet


def relabel(source: str | Path, out: str | Path, judges: Mapping[str, Any] | None = None,
            overwrite: bool = False) -> list[Record]:
    """Judge the records of the finished annotation folder ``source`` again, with its judge settings changed by
    ``judges`` (JudgeConfig fields; none: the same judges in their current versions), and write them, with the
    source's other settings, as the finished annotation folder ``out``; return the records. ``overwrite``
    replaces an annotation ``out`` holds already (which other settings otherwise refuse)."""
    from elical.annotate.judge_factory import build_judges
    from elical.annotate.pipeline import annotation_fingerprint

    source, out = Path(source), Path(out)
    config, recorded = _finished(source)
    if out.resolve() == source.resolve():
        raise InputError(f"{out}: relabel writes a new folder; give --out another folder than the source")
    new_judges = JudgeConfig.model_validate({**config.judges.model_dump(), **(judges or {})})
    if {str(new_judges.correctness), str(new_judges.consistency)} & {"llm", "cascade"} and not new_judges.llm_model:
        raise InputError("the llm and cascade judges need a judge model to relabel (--judge-model): no answering "
                         "model is loaded to judge with")
    config = AnnotateConfig.model_validate({**config.model_dump(), "judges": new_judges.model_dump(), "shard": "0/1"})
    records = read_parquet(source / "records.parquet")
    inputs = {k: v for k, v in (recorded.get("input") or {}).items() if k != "verbal_examples"}
    settings = annotation_fingerprint(config, inputs, bool(recorded.get("fast_decode")))
    with folder_lock(out):
        check_or_write_settings(out, settings, overwrite, "annotate", step_outputs(out))
        built = build_judges(config, backend=None, out_dir=out)
        before = [_labels(r) for r in records]
        names = judge_again(records, built)
        built.flush()
        _write_folder(out, config, records, {
            "relabelled_from": str(source),
            "judges": names,
            "questions": len(records),
            "annotated_now": 0,
            "failed": sum(r.failed for r in records),
            "labels_changed": _changed(before, [_labels(r) for r in records]),
        })
    return records


def judge_again(records: Sequence[Record], judges: Judges) -> dict[str, str]:
    """Judge every answered record again with ``judges``, as an annotation judges them, and name the judges in its
    generation note; the judges' names by task."""
    from elical.annotate.pipeline import judge_records

    answered = [r for r in records if not r.failed]
    judge_records(answered, judges)
    names = {"correctness": judges.correctness.name, "consistency": judges.consistency.name}
    for rec in answered:
        rec.generation = {**rec.generation, "judges": names}
    return names


def _finished(source: Path) -> tuple[AnnotateConfig, dict[str, Any]]:
    """The source folder's config and recorded settings, once it is known to hold a finished annotation."""
    if not (source / "annotate.yaml").is_file():
        raise InputError(f"{source}: not an annotation folder (no annotate.yaml); give the --out folder of elical annotate")
    recorded = recorded_settings(source, "annotate")
    if recorded is None or not (source / "records.parquet").is_file():
        raise InputError(f"{source}: the annotation is not finished (no records.parquet); rerun its elical annotate "
                         f"command to finish it (a folder of --shard runs: elical annotate-merge {source} --out "
                         f"{source / 'records.parquet'}), then relabel")
    return AnnotateConfig.from_yaml(source / "annotate.yaml"), recorded


def _labels(rec: Record) -> tuple[int | None, tuple[int, ...], tuple[int, ...]]:
    return rec.greedy_correct, tuple(rec.sample_correct or ()), tuple(rec.sample_consistent or ())


def _changed(before: Sequence[tuple[Any, ...]], after: Sequence[tuple[Any, ...]]) -> dict[str, int]:
    """How many labels of each kind the new judges decide otherwise."""
    return {
        "greedy_correct": sum(b[0] != a[0] for b, a in zip(before, after)),
        "sample_correct": sum(x != y for b, a in zip(before, after) for x, y in zip(b[1], a[1])),
        "sample_consistent": sum(x != y for b, a in zip(before, after) for x, y in zip(b[2], a[2])),
    }


def _write_folder(out: Path, config: AnnotateConfig, records: list[Record], meta: dict[str, Any]) -> None:
    """The files of a finished one-shard annotation (elical.annotate.pipeline's layout): the config, the ids the shard
    holds, one part file with every record, the meta file and records.parquet."""
    out.mkdir(parents=True, exist_ok=True)
    config.to_yaml(out / "annotate.yaml")
    write_expected(out, 0, 1, [r.id for r in records])
    write_part(records, out, 0, 1, 0)
    with atomic_write(out / "meta-0of1.json") as tmp:
        tmp.write_text(json.dumps(meta, indent=2))
    write_parquet(records, out / "records.parquet")
