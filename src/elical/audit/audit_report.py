"""The label audit's results as report blocks: quality.md / quality.html of ``elical label-audit --labels``, and
the "Label quality" section of a run's report (elical.run.report), both made from quality.json."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from elical.audit.sample import AUDIT_DIR, PAGE, QUALITY, judges_found
from elical.records import Record
from elical.report.document import MISSING, Block, Bullets, Document, Heading, Paragraph, Table
from elical.run.folder import RunFolder

SECTION = "Label quality"
NO_AUDIT = ("No label audit: the correctness and consistency labels of this run were not checked by hand. "
            "`elical label-audit RUN` draws a sheet to label.")
RATES = (("error", "error"), ("precision", "precision"), ("recall", "recall"),
         ("judged_positive", "judged positive"), ("labelled_positive", "labelled positive"))
ASKED = {"correctness": "right", "consistency": "the same answer"}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def _percent(row: Mapping[str, Any], name: str) -> str:
    """'12.5 [3.1, 25.0]': a rate in percent with its interval (a dash where it is not defined)."""
    value = _number(row.get(name))
    if value is None:
        return MISSING
    low, high = _number(row.get(f"{name}_low")), _number(row.get(f"{name}_high"))
    return f"{100 * value:.1f}" + (f" [{100 * low:.1f}, {100 * high:.1f}]" if low is not None and high is not None else "")


def quality_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """quality_table rows as display strings: group, n and each rate in percent with its 95 % interval."""
    shown = [{"group": "all" if row["group"] == "all" else f"{row['group']}: {row['value']}", "n": str(row["n"]),
              **{label: _percent(row, name) for name, label in RATES}} for row in rows]
    return pd.DataFrame(shown, columns=["group", "n", *(label for _, label in RATES)])


def _auroc(value: object) -> str:
    number = _number(value)
    return MISSING if number is None else f"{number:.3f}"


def auroc_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The AUROC estimate per method: against the judge's labels, the hand labels, and their difference."""
    shown = [{"method": row["method"], "kind": row["kind"], "n": str(row["n"]),
              "AUROC, judge's labels": _auroc(row["auroc_judge"]), "AUROC, hand labels": _auroc(row["auroc_hand"]),
              "hand - judge": MISSING if _number(row["difference"]) is None else f"{row['difference']:+.3f}"}
             for row in rows]
    return pd.DataFrame(shown, columns=["method", "kind", "n", "AUROC, judge's labels", "AUROC, hand labels",
                                        "hand - judge"])


def agreement_frame(agreement: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per task: items labelled twice, agreement, Cohen's kappa, and each kind of disagreement."""
    rows = [(task, a["n"], f"{100 * a['agree']:.1f}", "-" if _number(a.get("kappa")) is None else f"{a['kappa']:.2f}",
             a["first_1_second_0"], a["first_0_second_1"]) for task, a in agreement.items()]
    return pd.DataFrame(rows, columns=["task", "labelled twice", "agree (%)", "Cohen's kappa", "first 1, second 0",
                                       "first 0, second 1"])


def quality_blocks(summary: Mapping[str, Any]) -> list[Block]:
    """What an audit found (quality.json's contents): how it was drawn and labelled, one table per judge,
    the AUROC estimate, and the notes."""
    settings = summary.get("settings", {})
    drawn = f"seed {settings.get('seed')}, {settings.get('per_stratum')} per stratum" if settings.get("seed") is not None \
        else "draw settings not recorded"
    blocks: list[Block] = [Paragraph(
        f"{summary['labelled']} of the {summary['drawn']} items of the sheet `{settings.get('sheet')}` ({drawn}) "
        f"were labelled by hand (`{settings.get('labels')}`). Items are drawn per task, dataset and judge decision; "
        "each labelled item stands for its stratum's share of the run, so the rates estimate the whole run's "
        "decisions, not the sheet's. Error: share of the judge's decisions that are wrong; precision: share of "
        "its positive decisions (right / the same answer) that are; recall: share of the positive items it "
        f"calls positive. Percent, with 95 % stratified bootstrap intervals ({settings.get('n_resamples')} "
        "resamples); a dash where a rate is not defined.")]
    for task, part in summary.get("tasks", {}).items():
        caption = (f"{task.capitalize()} judge `{part.get('judge')}`: {part['labelled']} of {part['drawn']} drawn "
                   f"items labelled (is the reply {ASKED.get(task, 'right')}?)")
        if part.get("rows"):
            blocks.append(Table(quality_frame(part["rows"]), caption))
        else:
            blocks.append(Paragraph(f"{caption}: no labels, nothing to score."))
    if summary.get("agreement"):
        blocks += [Paragraph(
            f"Two labellers: `{summary.get('second_labels')}` labelled some of the items again, blind to the first "
            "labels (the ones scored above). Agreement is the share of those items both label alike; Cohen's kappa "
            "discounts what their own rates of 1s would give by chance (1: always alike, 0: chance). Where labellers "
            "disagree, no judge's error can be measured more finely than that."),
            Table(agreement_frame(summary["agreement"]), "Agreement of two labellers")]
    effect = summary.get("auroc", {})
    if effect.get("rows"):
        blocks += [Paragraph(
            f"Effect on AUROC (an estimate on the {effect['n']} audited correctness items of evaluated questions, "
            "weighted as above, pooled over datasets; no interval): each method's AUROC against the judge's "
            "labels, as the run measures it, and against the hand labels."),
            Table(auroc_frame(effect["rows"]), "Estimated effect of the judge's errors on AUROC")]
    else:
        blocks.append(Paragraph(f"Effect on AUROC: not estimated ({effect.get('why', 'nothing to compare')})."))
    if summary.get("notes"):
        blocks.append(Bullets(tuple(summary["notes"])))
    return blocks


def quality_document(summary: Mapping[str, Any]) -> Document:
    """quality.md / quality.html."""
    run = summary.get("settings", {}).get("run")
    return Document(f"Label audit: {Path(run).name}" if run else "Label audit", quality_blocks(summary))


def label_quality_blocks(run: Path, records: Sequence[Record] = ()) -> list[Block]:
    """The run report's "Label quality" section: the audit's tables when ``<run>/audit/quality.json`` exists
    (with a warning when the run's judges are not the audited ones), else a plain statement that none was done."""
    folder = RunFolder(run).audit
    blocks: list[Block] = [Heading(SECTION)]
    path = folder / f"{QUALITY}.json"
    if not path.is_file():
        blocks.append(Paragraph(NO_AUDIT))
        if (folder / PAGE).is_file():
            blocks.append(Paragraph(f"A sheet is drawn (`{AUDIT_DIR}/{PAGE}`); once labelled, "
                                    "`elical label-audit RUN --labels labels.jsonl` scores it."))
        return blocks
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
        found = quality_blocks(summary)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        return blocks + [Paragraph(f"`{AUDIT_DIR}/{path.name}` could not be read ({type(err).__name__}: {err}); "
                                   "`elical label-audit RUN --labels labels.jsonl` writes it again.")]
    audited = summary.get("settings", {}).get("judges") or {}
    now = {task: sorted(counts) for task, counts in judges_found(records).items()}
    changed = [f"{task}: audited `{audited[task]}`, the run's records now `{', '.join(names)}`"
               for task, names in now.items() if task in audited and names != [audited[task]]]
    if changed:
        blocks.append(Paragraph("**The audit is stale**: the run's judges changed since it was labelled ("
                                + "; ".join(changed) + "); draw and label a new sheet."))
    return blocks + found + [Paragraph(f"Files: `{AUDIT_DIR}/{QUALITY}.md`, `{AUDIT_DIR}/{QUALITY}.json`, "
                                       f"`{AUDIT_DIR}/sheet.jsonl`.")]
