"""Draw a labelling sheet from a run's judged items: stratified, seeded, nested, population-weighted.

An *item* is one judged decision of the run: the correctness of a greedy answer (against the gold
aliases), or the consistency of one sample with its greedy answer. Items are grouped into strata by
(task, dataset, the judge's decision); each stratum is shuffled by the seed and its first ``per_stratum``
items are drawn, so a larger draw holds a smaller one (same seed). An item's ``weight`` is its stratum's
size over the items drawn from it: weighted means over the sheet estimate the whole run's rates, though
the draw over-represents the rare positive decisions.

A sheet row (JSONL) uses the field names of judge-check's pair files, so a labelled sheet is a pair file:

- correctness: ``{"item", "task", "record_id", "dataset", "split", "question", "answer", "gold",
  ["choices"], "judge", "decision", "stratum", "weight", "label": null, "category": null}``
- consistency: the same with ``"a"`` (the sample), ``"b"`` (the greedy answer) and ``"sample"`` (its
  index) instead of ``answer`` and ``gold``.

``label`` is filled with 1 (right / the same answer) or 0 by a person; ``category`` optionally names
what kind of item it is (:data:`CATEGORIES`).
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elical.records import Record, atomic_write
from elical.run.folder import AUDIT_DIR  # noqa: F401 - the audit folder's name (RunFolder.audit), used by audit/

TASKS = ("correctness", "consistency")
# the audit folder's files (elical.audit.commands describes them)
SHEET, PAGE, SETTINGS = "sheet.jsonl", "label.html", "audit.json"
QUALITY = "quality"  # quality.md, quality.html, quality.json
UNKNOWN_JUDGE = "unknown (not recorded)"
# What kind of item a labeller saw (issue 21's list); "other" for the rest.
CATEGORIES = (
    "plain", "comparison", "list", "mentions-not-asserts", "no-answer", "echo", "alias", "number-date",
    "truncated", "yes-no", "other",
)


@dataclass(frozen=True)
class Candidate:
    """One judged decision of a run, before the draw."""

    task: str
    record: Record
    sample: int | None  # the sample's index for consistency; None for a greedy answer's correctness
    decision: int

    @property
    def item(self) -> str:
        return f"{self.task[:4]}:{self.record.id}" + ("" if self.sample is None else f":{self.sample}")

    @property
    def stratum(self) -> str:
        return f"{self.task}/{self.record.dataset}/{self.decision}"


def candidates(records: Iterable[Record], tasks: Sequence[str] = TASKS) -> list[Candidate]:
    """Every judged decision of the records: each answered greedy reply's correctness, each sample's
    consistency with its greedy reply (failed or unjudged records have none)."""
    out: list[Candidate] = []
    for rec in records:
        if rec.failed or rec.greedy_correct is None:
            continue
        if "correctness" in tasks:
            out.append(Candidate("correctness", rec, None, int(rec.greedy_correct)))
        if "consistency" in tasks and rec.sample_consistent is not None:
            out.extend(Candidate("consistency", rec, j, int(v)) for j, v in enumerate(rec.sample_consistent))
    return out


def draw(pool: Sequence[Candidate], per_stratum: int, seed: int) -> list[tuple[Candidate, float]]:
    """(item, weight) for up to ``per_stratum`` items of each stratum, in a seeded order that is nested
    across sizes: the first n of a stratum are the same for every ``per_stratum`` >= n."""
    if per_stratum < 1:
        raise ValueError(f"per_stratum must be at least 1, got {per_stratum}")
    strata: dict[str, list[Candidate]] = defaultdict(list)
    for cand in pool:
        strata[cand.stratum].append(cand)
    drawn: list[tuple[Candidate, float]] = []
    for name in sorted(strata):
        members = sorted(strata[name], key=lambda c: c.item)  # an order that does not depend on file order
        random.Random(f"{seed}/{name}").shuffle(members)
        chosen = members[:per_stratum]
        drawn.extend((c, len(members) / len(chosen)) for c in chosen)
    return drawn


def sheet_row(cand: Candidate, weight: float, judge: str) -> dict[str, Any]:
    """The sheet row of one drawn item (see the module docstring)."""
    rec = cand.record
    row: dict[str, Any] = {"item": cand.item, "task": cand.task, "record_id": rec.id, "dataset": rec.dataset,
                           "split": rec.split, "question": rec.question}
    if cand.task == "correctness":
        row |= {"answer": rec.greedy_response or "", "gold": list(rec.answers)}
    else:
        assert cand.sample is not None
        row |= {"a": rec.samples[cand.sample], "b": rec.greedy_response or "", "sample": cand.sample}
    if rec.extra.get("choices"):
        row["choices"] = list(rec.extra["choices"])
    return row | {"judge": judge, "decision": cand.decision, "stratum": cand.stratum, "weight": round(weight, 6),
                  "label": None, "category": None}


def draw_sheet(records: Sequence[Record], judges: dict[str, str], per_stratum: int, seed: int,
               tasks: Sequence[str] = TASKS) -> list[dict[str, Any]]:
    """The sheet rows of a stratified draw from the records' judged items; ``judges`` names the judge
    (with its version) that made each task's decisions."""
    return [sheet_row(c, w, judges.get(c.task, "unknown")) for c, w in draw(candidates(records, tasks), per_stratum, seed)]


def write_sheet(rows: Sequence[dict[str, Any]], path: str | Path) -> None:
    """The sheet as JSONL, written atomically."""
    with atomic_write(path) as tmp:
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def judges_found(records: Sequence[Record], tasks: Sequence[str] = TASKS) -> dict[str, Counter[str]]:
    """Per task, how many judged records name each judge (records.generation["judges"])."""
    found: dict[str, Counter[str]] = {task: Counter() for task in tasks}
    for rec in records:
        if rec.failed or rec.greedy_correct is None:
            continue
        names = (rec.generation or {}).get("judges") or {}
        for task in tasks:
            if task == "consistency" and not rec.sample_consistent:
                continue
            found[task][str(names.get(task) or UNKNOWN_JUDGE)] += 1
    return {task: counts for task, counts in found.items() if counts}
