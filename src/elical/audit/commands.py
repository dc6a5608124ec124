"""`elical label-audit`: draw a labelling sheet from a run's own judged items, write the blind labelling page,
then read the labels back and estimate how often each judge is wrong.

The audit folder (``<run>/audit/`` for a run folder, ``--out`` for record files)::

    sheet.jsonl    the drawn items with the judges' decisions and weights (sample.py's rows), in page order
    label.html     the labelling page (page.py): blind to the decisions, labels kept in the browser
    audit.json     how the sheet was drawn: source, run folder, seed, per_stratum, tasks, judges
    quality.md, quality.html, quality.json   each judge's quality on the labels (after ``--labels``)

The page shows each task's items in an order that interleaves the strata (so no run of items shares a
decision) while keeping each stratum's own seeded order: labelling only the first part of the page still
labels a nested, smaller draw of every stratum. Scoring weights each labelled item by its stratum's size
over the items labelled in it, so a partly labelled sheet still estimates the whole run (strata left
without labels are named in the notes).
"""

from __future__ import annotations

import json
import math
import os
import random
from collections import Counter, defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elical.audit.page import sheet_key, write_page
from elical.audit.sample import (  # the folder's names and judges_found: importable here too
    CATEGORIES,
    PAGE,
    QUALITY,
    SETTINGS,
    SHEET,
    TASKS,
    UNKNOWN_JUDGE,
    draw_sheet,
    judges_found,
    write_sheet,
)
from elical.audit.score import Labelled, agreement, quality_table, weighted_auroc
from elical.core.inputs import InputError, check_output
from elical.records import Record, atomic_write, iter_json_objects, read_records
from elical.run.folder import RunFolder

NO_CATEGORY = "none"
SHEET_FIELDS = ("item", "task", "record_id", "dataset", "split", "decision", "stratum", "weight")

PathLike = str | os.PathLike[str]


# --------------------------------------------------------------------------- the source: a run or record files


@dataclass
class AuditSource:
    """The records to audit and where they came from (``run`` is None for record files)."""

    records: list[Record]
    files: list[Path]
    run: Path | None = None


def run_record_files(folder: Path) -> tuple[Path, Path]:
    """A run folder's calibration pool and evaluated records."""
    run = RunFolder(folder)
    return run.pool, run.evaluation_records


def is_run_folder(path: Path) -> bool:
    """Whether ``path`` is a run folder `elical run` has annotated (both record files written)."""
    return path.is_dir() and all(p.is_file() for p in run_record_files(path))


def read_source(paths: Sequence[PathLike]) -> AuditSource:
    """The records of one run folder, or of record files (and folders of them)."""
    given = [Path(p) for p in paths]
    if not given:
        raise InputError("RUN_OR_RECORDS: give a run folder or record files")
    for path in given:
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such run folder or record file")
    runs = [p for p in given if is_run_folder(p)]
    if runs:
        if len(given) > 1:
            raise InputError(f"{runs[0]}: a run folder is audited on its own (got {len(given)} paths)")
        files = list(run_record_files(runs[0]))
        return AuditSource(read_records(files), files, runs[0])
    for path in given:
        if path.is_dir() and (path / SHEET).exists():
            raise InputError(f"{path}: is an audit folder (it holds {SHEET}), not records; pass the run folder or "
                             "the record files")
        if path.is_dir() and (RunFolder(path).config.is_file() or RunFolder(path).records.is_dir()):
            missing = [p.name for p in run_record_files(path) if not p.is_file()]
            raise InputError(f"{path}: a run folder without records/{' and records/'.join(missing)} (has its "
                             "annotation finished?)")
    return AuditSource(read_records(given), given)


def record_judges(records: Sequence[Record], tasks: Sequence[str] = TASKS) -> dict[str, str]:
    """The judge (name@version) that made each task's decisions; records of several judges are an error, as
    one sheet would mix their errors."""
    judges = {}
    for task, counts in judges_found(records, tasks).items():
        if len(counts) > 1:
            listed = ", ".join(f"{name} ({n} records)" for name, n in counts.most_common())
            raise InputError(f"the records were judged by several {task} judges: {listed}; audit the records of "
                             "one judge at a time")
        judges[task] = next(iter(counts))
    return judges


# --------------------------------------------------------------------------- drawing


@dataclass
class Drawn:
    """What :func:`draw_audit` wrote."""

    out_dir: Path
    sheet: Path
    page: Path
    rows: list[dict[str, Any]]
    judges: dict[str, str]
    run: Path | None = None

    def counts(self) -> dict[str, tuple[int, int]]:
        """Per task: (items drawn, strata)."""
        items: Counter[str] = Counter(r["task"] for r in self.rows)
        strata: dict[str, set[str]] = defaultdict(set)
        for row in self.rows:
            strata[row["task"]].add(row["stratum"])
        return {task: (items[task], len(strata[task])) for task in TASKS if task in items}


def check_tasks(tasks: Sequence[str]) -> tuple[str, ...]:
    """The tasks, each once, in the usual order; an unknown one is an error naming --task."""
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise InputError(f"--task: unknown task {unknown[0]!r} (use {' or '.join(TASKS)})")
    if not tasks:
        raise InputError("--task: give at least one task")
    return tuple(t for t in TASKS if t in tasks)


def default_out(source: AuditSource, out_dir: PathLike | None) -> Path:
    """``out_dir``, else ``<run>/audit`` for a run folder; record files need ``--out``."""
    if out_dir is not None:
        return check_output(out_dir, "folder")
    if source.run is None:
        raise InputError("--out: give the audit folder (only a run folder has a default one, RUN/audit)")
    return RunFolder(source.run).audit


def labelling_order(rows: Sequence[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The rows task by task, each task's strata interleaved at random (seeded) while every stratum keeps its
    own order: no stretch of the page gives its decisions away, and a page labelled up to any point holds
    the first items of each stratum, a nested smaller draw."""
    rng = random.Random(f"{seed}/page-order")
    ordered: list[dict[str, Any]] = []
    present = {r["task"] for r in rows}
    for task in [t for t in TASKS if t in present] + sorted(present - set(TASKS)):
        queues: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        for row in rows:
            if row["task"] == task:
                queues[row["stratum"]].append(row)
        slots = [name for name, queue in sorted(queues.items()) for _ in queue]
        rng.shuffle(slots)
        ordered += [queues[name].popleft() for name in slots]
    return ordered


def _sheet_labels(path: Path) -> int | None:
    """How many rows of an existing sheet carry a label (None: the file cannot be read as a sheet)."""
    try:
        return sum(row.get("label") is not None for _, row in iter_json_objects(path))
    except (ValueError, OSError):
        return None


def draw_audit(source: PathLike | Sequence[PathLike], out_dir: PathLike | None = None, *, per_stratum: int = 20,
               seed: int = 0, tasks: Sequence[str] = TASKS, overwrite: bool = False) -> Drawn:
    """Draw the labelling sheet of a run folder (its pool and evaluated records) or of record files, and write
    ``sheet.jsonl``, ``label.html`` and ``audit.json`` into ``out_dir`` (default ``<run>/audit``). Every
    input is checked before anything is written; a sheet that already holds labels (or was scored) is
    kept unless ``overwrite``."""
    paths = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if per_stratum < 1:
        raise InputError(f"--per-stratum: must be at least 1, got {per_stratum}")
    tasks = check_tasks(tasks)
    src = read_source(paths)
    out = default_out(src, out_dir)
    sheet, scored = out / SHEET, out / f"{QUALITY}.json"
    if not overwrite and (sheet.exists() or scored.exists()):
        labelled = _sheet_labels(sheet) if sheet.exists() else 0
        if labelled or scored.exists() or labelled is None:
            what = (f"holds {labelled} labels" if labelled else "cannot be read" if labelled is None
                    else f"was scored ({scored.name})")
            raise InputError(f"{sheet}: the existing sheet {what}; score it with --labels, or pass --overwrite to "
                             "draw a new one (its labels no longer apply)")
    judges = record_judges(src.records, tasks)
    rows = draw_sheet(src.records, judges, per_stratum, seed, tasks)
    if not rows:
        raise InputError(f"{', '.join(map(str, paths))}: no judged {' or '.join(tasks)} decisions to draw (every "
                         "record failed or lacks greedy_correctness / consistency judgements)")
    rows = labelling_order(rows, seed)
    strata: dict[str, list[float]] = {}
    for row in rows:
        strata.setdefault(row["stratum"], [0, row["weight"]])[0] += 1
    settings = {
        "source": [str(p) for p in paths], "run": str(src.run.resolve()) if src.run else None,
        "records": [str(p.resolve()) for p in src.files], "per_stratum": per_stratum, "seed": seed,
        "tasks": list(tasks), "judges": judges, "items": len(rows), "sheet_key": sheet_key(rows),
        "strata": {name: {"drawn": int(n), "size": round(n * w)} for name, (n, w) in sorted(strata.items())},
    }
    write_sheet(rows, sheet)
    name = src.run.resolve().name if src.run else Path(paths[0]).stem
    page = write_page(rows, out / PAGE, f"Label audit: {name}")
    with atomic_write(out / SETTINGS) as tmp:
        tmp.write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")
    for suffix in (".md", ".html", ".json"):  # scores of an earlier sheet no longer apply
        (out / f"{QUALITY}{suffix}").unlink(missing_ok=True)
    return Drawn(out, sheet, page, rows, judges, src.run)


# --------------------------------------------------------------------------- reading sheets and labels


def _problem(path: Path, line: int, name: str, message: str) -> InputError:
    return InputError(f"{path}:{line}: field '{name}': {message}")


def _is_label(value: object) -> bool:
    return isinstance(value, (bool, int)) and value in (0, 1)


def read_sheet(path: PathLike) -> list[dict[str, Any]]:
    """A sheet's rows, each checked for the fields scoring needs (errors name file:line:field)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no sheet here (draw one first: elical label-audit RUN)")
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for line, row in iter_json_objects(path):
        for name in SHEET_FIELDS:
            if name not in row:
                raise _problem(path, line, name, "missing (not a sheet drawn by elical label-audit?)")
        if row["task"] not in TASKS:
            raise _problem(path, line, "task", f"unknown task {row['task']!r} (use {' or '.join(TASKS)})")
        if not _is_label(row["decision"]):
            raise _problem(path, line, "decision", f"must be 0 or 1, got {row['decision']!r}")
        weight = row["weight"]
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 1:
            raise _problem(path, line, "weight", f"must be a number >= 1, got {weight!r}")
        if row["item"] in seen:
            raise _problem(path, line, "item", f"{row['item']!r} twice (also at line {seen[row['item']]})")
        seen[row["item"]] = line
        rows.append(row)
    if not rows:
        raise InputError(f"{path}: an empty sheet")
    return rows


@dataclass(frozen=True)
class Label:
    """One hand label read back."""

    item: str
    label: int
    category: str | None
    line: int


def read_labels(path: PathLike, items: Mapping[str, Any]) -> dict[str, Label]:
    """The labels of a labels file: the page's labels.jsonl ({item, label, category}) or a sheet with ``label``
    filled in (rows whose label is null are unlabelled). ``items`` are the sheet's; a label of another item,
    a label that is not 0/1, an unknown category or an item labelled twice is an error naming file:line:field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--labels {path}: no such file")
    labels: dict[str, Label] = {}
    for line, row in iter_json_objects(path):
        item = row.get("item")
        if not isinstance(item, str) or not item:
            raise _problem(path, line, "item", f"missing or not a string (got {item!r})")
        if item not in items:
            raise _problem(path, line, "item", f"{item!r} is not an item of the sheet (labels of another sheet?)")
        if "label" not in row:
            raise _problem(path, line, "label", "missing (0 or 1)")
        value = row["label"]
        if value is None:
            continue
        if not _is_label(value):
            raise _problem(path, line, "label", f"must be 0 or 1, got {value!r}")
        category = row.get("category") or None
        if category is not None and category not in CATEGORIES:
            raise _problem(path, line, "category", f"unknown category {category!r} (one of {', '.join(CATEGORIES)})")
        if item in labels:
            raise _problem(path, line, "item", f"{item!r} labelled twice (also at line {labels[item].line})")
        labels[item] = Label(item, int(value), category, line)
    if not labels:
        raise InputError(f"{path}: no labelled items (label 0 or 1)")
    return labels


# --------------------------------------------------------------------------- scoring


@dataclass
class LabelledRows:
    """The labelled items of one task, each with its sheet row, weighted by the labels per stratum."""

    task: str
    items: list[tuple[dict[str, Any], Labelled]] = field(default_factory=list)
    drawn: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def labelled(self) -> list[Labelled]:
        return [item for _, item in self.items]


def labelled_items(rows: Sequence[dict[str, Any]], labels: Mapping[str, Label]) -> dict[str, LabelledRows]:
    """Per task, the sheet's labelled items as :class:`Labelled`: an item stands for its stratum's size over
    the items labelled in it (the sheet's weight when every drawn item is labelled)."""
    strata: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        strata[row["stratum"]].append(row)
    out: dict[str, LabelledRows] = {}
    for name in sorted(strata):
        members = strata[name]
        first = members[0]
        part = out.setdefault(first["task"], LabelledRows(first["task"]))
        part.drawn += len(members)
        size = round(float(first["weight"]) * len(members))
        done = [row for row in members if row["item"] in labels]
        if not done:
            side = "positive" if first["decision"] else "negative"
            part.notes.append(f"{first['task']}: no labels in the stratum of {first['dataset']} items judged {side} "
                              f"({size} of the run's items): the estimates leave it out")
            continue
        for row in done:
            label = labels[row["item"]]
            part.items.append((row, Labelled(decision=bool(row["decision"]), label=bool(label.label),
                                             weight=size / len(done), stratum=name, dataset=str(row["dataset"]),
                                             category=label.category or NO_CATEGORY)))
    return out


def _plain(value: Any) -> Any:
    """A JSON value: NaN as null, numpy numbers as Python ones."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _read_settings(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / SETTINGS).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def audited_run(folder: Path, settings: Mapping[str, Any]) -> Path | None:
    """The run folder an audit folder belongs to: its parent when it is ``<run>/audit`` (so a moved run still
    finds it), else the one audit.json names, if it still is one."""
    if RunFolder(folder.parent).audit == folder and is_run_folder(folder.parent):
        return folder.parent
    named = settings.get("run")
    return Path(named) if named and is_run_folder(Path(named)) else None


def _method_confidences(run: Path | None, record_files: Sequence[str], ids: set[str],
                        notes: list[str]) -> list[tuple[str, str, dict[str, float]]]:
    """(method, kind, confidence by record id) for the audited evaluated records: the training-free
    methods computed from the records, then each prediction file of the run's scores/ folder."""
    from elical.confidence import applicable_estimators, score_records

    methods: list[tuple[str, str, dict[str, float]]] = []
    files = [str(p) for p in run_record_files(run)[1:]] if run is not None else list(record_files)
    try:
        records = [r for r in read_records(files) if r.id in ids] if files else []
    except (OSError, ValueError) as err:
        notes.append(f"training-free methods left out: the records could not be read again ({err})")
        records = []
    if records:
        estimators, _ = applicable_estimators(records)
        scores = score_records(records, estimators)
        for name, values in scores.items():
            methods.append((name, "training-free", {r.id: float(v) for r, v in zip(records, values)}))
    if run is not None and RunFolder(run).scores.is_dir():
        from elical.model.predictions import read_predictions

        for path in sorted(RunFolder(run).scores.glob("*.parquet")):
            try:
                predictions = read_predictions(path)
            except (OSError, ValueError) as err:
                notes.append(f"{path.name}: left out of the AUROC estimate ({err})")
                continue
            name = predictions.key.name if predictions.key is not None else predictions.method
            methods.append((name, "trained", {i: c for i, c in predictions.confidence.items() if i in ids}))
    return methods


def auroc_effect(correctness: LabelledRows | None, run: Path | None, record_files: Sequence[str],
                 notes: list[str]) -> dict[str, Any]:
    """Each method's weighted AUROC on the audited correctness items of evaluated records, against the judge's
    labels and against the hand labels: what the judge's errors do to the reported AUROC (an estimate on
    these items only)."""
    audited = [(row, item) for row, item in (correctness.items if correctness else []) if row["split"] != "train"]
    result: dict[str, Any] = {"n": len(audited), "rows": []}
    if not audited:
        result["why"] = "no labelled correctness items of evaluated records (split other than train)"
        return result
    by_id = {str(row["record_id"]): item for row, item in audited}
    for method, kind, confidence in _method_confidences(run, record_files, set(by_id), notes):
        pairs = [(c, by_id[i]) for i, c in confidence.items() if i in by_id and not math.isnan(c)]
        if not pairs:
            continue
        conf, weights = [c for c, _ in pairs], [it.weight for _, it in pairs]
        judged = weighted_auroc(conf, [it.decision for _, it in pairs], weights)
        hand = weighted_auroc(conf, [it.label for _, it in pairs], weights)
        result["rows"].append({"method": method, "kind": kind, "n": len(pairs), "auroc_judge": judged,
                               "auroc_hand": hand, "difference": hand - judged})
    if not result["rows"]:
        result["why"] = ("no confidences for the audited evaluated items (no scores/ folder of a run and no "
                         "training-free method the records support)")
    return result


@dataclass
class Scored:
    """What :func:`score_audit` computed and wrote."""

    summary: dict[str, Any]
    markdown: str
    quality_md: Path
    quality_html: Path
    quality_json: Path
    run: Path | None = None


def labeller_agreement(rows: Sequence[dict[str, Any]], first: Mapping[str, Label],
                       second: Mapping[str, Label]) -> dict[str, dict[str, Any]]:
    """Per task, :func:`~elical.audit.score.agreement` of two labellers on the items both labelled, and the
    items they disagree on."""
    out: dict[str, dict[str, Any]] = {}
    for task in TASKS:
        both = [row["item"] for row in rows if row["task"] == task and row["item"] in first and row["item"] in second]
        if both:
            out[task] = agreement([first[i].label for i in both], [second[i].label for i in both]) | {
                "disagreements": [i for i in both if first[i].label != second[i].label]}
    return out


def score_audit(sheet_or_out_dir: PathLike, labels_path: PathLike, *, n_resamples: int = 1000,
                seed: int = 0, second_labels: PathLike | None = None) -> Scored:
    """Score the run's judges against the hand labels of a sheet: per task, :func:`quality_table` by dataset
    and category (population-weighted error, precision and recall with stratified bootstrap intervals), and
    the estimated effect of the judge's errors on each method's AUROC; with ``second_labels`` (a second
    labeller's labels of some of the items, made blind to the first), how often the two labellers agree.
    Writes quality.md, quality.html and quality.json beside the sheet."""
    from elical.audit.audit_report import quality_document
    from elical.report.document import to_markdown, write_document

    given = Path(sheet_or_out_dir)
    sheet = given / SHEET if given.is_dir() else given
    if n_resamples < 1:
        raise InputError(f"--resamples: must be at least 1, got {n_resamples}")
    rows = read_sheet(sheet)
    items = {row["item"]: row for row in rows}
    labels = read_labels(labels_path, items)
    twice = None
    if second_labels is not None:
        twice = labeller_agreement(rows, labels, read_labels(second_labels, items))
        if not twice:
            raise InputError(f"--second-labels {second_labels}: labels no item that {labels_path} labels")
    folder = sheet.parent
    settings = _read_settings(folder)
    run = audited_run(folder, settings)
    parts = labelled_items(rows, labels)
    judges = dict(settings.get("judges") or {})
    for row in rows:
        judges.setdefault(row["task"], str(row.get("judge", UNKNOWN_JUDGE)))
    notes: list[str] = []
    tasks: dict[str, Any] = {}
    for task in TASKS:
        part = parts.get(task)
        if part is None:
            continue
        notes += part.notes
        if not part.items:
            tasks[task] = {"judge": judges.get(task), "labelled": 0, "drawn": part.drawn, "rows": []}
            continue
        by = ("dataset", "category") if any(i.category != NO_CATEGORY for i in part.labelled) else ("dataset",)
        table = quality_table(part.labelled, by=by, n_resamples=n_resamples, seed=seed)
        tasks[task] = {"judge": judges.get(task), "labelled": len(part.items), "drawn": part.drawn,
                       "population": round(sum(i.weight for i in part.labelled)), "by": list(by), "rows": table}
    effect = auroc_effect(parts.get("correctness"), run, settings.get("records") or [], notes)
    summary = _plain({
        "settings": {"sheet": str(sheet), "labels": str(labels_path), "seed": settings.get("seed"),
                     "per_stratum": settings.get("per_stratum"), "judges": judges, "run": str(run) if run else None,
                     "source": settings.get("source"), "n_resamples": n_resamples, "bootstrap_seed": seed},
        "labelled": len(labels), "drawn": len(rows), "tasks": tasks, "auroc": effect, "notes": notes,
    } | ({"agreement": twice, "second_labels": str(second_labels)} if twice else {}))
    document = quality_document(summary)
    with atomic_write(folder / f"{QUALITY}.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    md, page = write_document(document, folder, QUALITY)
    return Scored(summary, to_markdown(document), md, page, folder / f"{QUALITY}.json", run)


def audit_folder_of(paths: Sequence[PathLike], out_dir: PathLike | None) -> Path:
    """Where an audit's sheet lies: ``out_dir``, else ``<run>/audit`` of a run folder, else the one folder
    given when it is an audit folder itself."""
    if out_dir is not None:
        return Path(out_dir)
    given = [Path(p) for p in paths]
    if len(given) == 1 and is_run_folder(given[0]):
        return RunFolder(given[0]).audit
    if len(given) == 1 and given[0].is_dir() and (given[0] / SHEET).is_file():
        return given[0]
    if len(given) == 1 and not given[0].exists():
        raise FileNotFoundError(f"{given[0]}: no such run folder or file")
    raise InputError("--out: give the audit folder that holds the sheet (only a run folder has a default one, "
                     "RUN/audit)")

