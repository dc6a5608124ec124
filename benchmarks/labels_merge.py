"""Merge labellers' label files into a labelled sheet (tests/data/labels), and measure how often two labellers
agree where an item was labelled twice.

The sheet is a label-audit sheet (labels_fresh_draw.py); each labels file holds {item, label, category} lines
(the labelling page's labels.jsonl, or what a labeller wrote for a part of the sheet). Every item of the sheet
must be labelled exactly once across the files; the merged sheet keeps the sheet's rows and order.

    python benchmarks/labels_merge.py SHEET.jsonl LABELS.jsonl [LABELS.jsonl ...] --out LABELLED.jsonl \
        [--task correctness] [--second SECOND.jsonl ...] [--report AGREEMENT.md]

`--task` writes only that task's rows (a sheet of both tasks, labelled in parts that mix them, makes one
labelled sheet per task).

`--second` files hold a second labeller's labels of some of the items, labelled blind to the first: the
report gives, per task, the items labelled twice, the share on which the two agree and Cohen's kappa (as
`elical label-audit --second-labels` does; a floor on how precisely any judge's error can be measured by one
labeller), and lists the disagreements' items. The first files' labels go into the merged sheet.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

from elical.audit.commands import Label, labeller_agreement, read_labels
from elical.audit.sample import write_sheet
from elical.core.inputs import InputError
from elical.records import iter_json_objects


def merged_labels(paths: list[Path], items: dict[str, dict]) -> dict[str, Label]:
    """The labels of all files, each item once across them."""
    labels: dict[str, Label] = {}
    where: dict[str, Path] = {}
    for path in paths:
        for item, label in read_labels(path, items).items():
            if item in labels:
                raise InputError(f"{path}:{label.line}: item {item!r} also labelled in {where[item]}")
            labels[item], where[item] = label, path
    return labels


def agreement_lines(first: dict[str, Label], second: dict[str, Label], rows: list[dict]) -> list[str]:
    """Markdown lines: per task, the doubly labelled items, agreement and Cohen's kappa, then the disagreements."""
    lines = ["| task | labelled twice | agree | Cohen's kappa | first 1, second 0 | first 0, second 1 |",
             "|---|---|---|---|---|---|"]
    found = labeller_agreement(rows, first, second)
    for task, a in found.items():
        lines.append(f"| {task} | {a['n']} | {100 * a['agree']:.1f} % | {a['kappa']:.2f} | {a['first_1_second_0']} | "
                     f"{a['first_0_second_1']} |")
    lines += ["", "Disagreements (item: first, second):", ""]
    lines += [f"- {item}: {first[item].label}, {second[item].label}" for a in found.values() for item in a["disagreements"]]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sheet", type=Path)
    parser.add_argument("labels", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--task", default=None, help="write only this task's rows")
    parser.add_argument("--second", type=Path, nargs="*", default=[])
    parser.add_argument("--report", type=Path, default=None)
    args = parser.parse_args()
    rows = [row for _, row in iter_json_objects(args.sheet)]  # weights may be under 1 (strata scaled to a run)
    items = {row["item"]: row for row in rows}
    labels = merged_labels(args.labels, items)
    kept = [row for row in rows if args.task in (None, row["task"])]
    missing = [row["item"] for row in kept if row["item"] not in labels]
    if missing:
        raise SystemExit(f"{args.sheet}: {len(missing)} items have no label (first: {missing[0]!r})")
    write_sheet([row | {"label": labels[row["item"]].label, "category": labels[row["item"]].category} for row in kept],
                args.out)
    print(f"{len(kept)} items labelled -> {args.out}")
    if args.second:
        lines = [f"# Two labellers on {args.sheet.name} ({platform.node()})", "",
                 *agreement_lines(labels, merged_labels(args.second, items), rows)]
        text = "\n".join(lines) + "\n"
        print(text)
        if args.report:
            args.report.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
