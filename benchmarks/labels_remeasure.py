"""The paper's experiment under old and new labels, side by side (issue 21, item 5).

The same generations (benchmarks/labels_gpu.sh) carry two label sets: the run's own (match@3 / answer@2) and
the relabelled ones (benchmarks/labels_relabel.py; the judges each record names head the table). The confidence models were trained on
the new labels (benchmarks/labels_remeasure_gpu.sh); each method's AUROC is computed here against both label
sets, per seed, in-domain (NQ, HQ, 2Wiki, ParaRel) and out of domain (PopQA, SQuAD, WQ), as the mean of the
per-dataset AUROCs (all sets have 300 questions), with comparison questions (the question offers two
alternatives: elical.annotate.assertion.question_options) in and out. The training-free baselines are
computed from each label set's records (Consis-Sem reads the consistency labels).

    python benchmarks/labels_remeasure.py --old OLD/eval.parquet --new NEW/eval.parquet --scores RUN/scores \
        [--label paper] [--csv out.csv] [--md out.md]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from elical.annotate.assertion import question_options
from elical.confidence.base import score_records
from elical.model.predictions import read_predictions
from elical.records import Record, read_parquet

GROUPS = {"in-domain": ("nq", "hq", "2wiki", "pararel"), "ood": ("popqa", "squad", "wq")}
BASELINES = ("Prob", "N-Prob", "Consis-Sem")


def group_auroc(records: list[Record], confidence: dict[str, float], datasets: tuple[str, ...], keep) -> float:
    """Mean over the datasets of the AUROC of the confidence against greedy correctness, on kept records."""
    values = []
    for name in datasets:
        rows = [r for r in records if r.dataset == name and keep(r) and r.id in confidence]
        labels = [r.greedy_correct for r in rows]
        if len(set(labels)) == 2:
            values.append(roc_auc_score(labels, [confidence[r.id] for r in rows]))
    return float(np.mean(values)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--new", type=Path, required=True)
    parser.add_argument("--scores", type=Path, required=True)
    parser.add_argument("--label", default="paper")
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args()
    labels = {"old": read_parquet(args.old), "new": read_parquet(args.new)}
    comparison = {r.id for r in labels["new"] if question_options(r.question) is not None}
    subsets = {"all": lambda r: True, "no comparison": lambda r: r.id not in comparison}
    confidences: dict[tuple[str, str], dict[str, float]] = {}  # (method, seed) -> id -> confidence
    trained = sorted(args.scores.glob("*.parquet"))
    for path in trained:
        method, seed = path.stem.rsplit("-s", 1)
        confidences[(method, seed)] = dict(read_predictions(path).confidence)
    rows = []
    for label_set, records in labels.items():
        baseline = score_records(records, BASELINES)
        for name, values in baseline.items():
            confidences[(f"{name} [{label_set} labels]", "-")] = dict(zip((r.id for r in records), map(float, values)))
        for (method, seed), confidence in confidences.items():
            if "[" in method and not method.endswith(f"[{label_set} labels]"):
                continue
            for subset, keep in subsets.items():
                for group, datasets in GROUPS.items():
                    rows.append({"prompt": args.label, "labels": label_set, "method": method.split(" [")[0], "seed": seed,
                                 "subset": subset, "group": group, "auroc": group_auroc(records, confidence, datasets, keep)})
    table = pd.DataFrame(rows)
    if args.csv:
        table.to_csv(args.csv, index=False)
    mean = table.groupby(["method", "labels", "subset", "group"], sort=False)["auroc"].agg(["mean", "count"]).reset_index()
    judges = {name: " / ".join(records[0].generation.get("judges", {}).values()) for name, records in labels.items()}
    lines = [f"## {args.label} prompt: AUROC, mean over seeds (count = seeds), old labels ({judges['old']}) vs new "
             f"({judges['new']}); {len(comparison)} of {len(labels['new'])} evaluated questions are comparison questions", "",
             "| method | seeds | in-domain old | in-domain new | in-domain new, no comparison | OOD old | OOD new | OOD new, no comparison |",
             "|---|---|---|---|---|---|---|---|"]
    cells: dict[str, dict[tuple[str, str, str], float]] = defaultdict(dict)
    seeds: dict[str, int] = {}
    for row in mean.itertuples():
        cells[row.method][(row.labels, row.subset, row.group)] = row.mean
        seeds[row.method] = row.count
    for method, got in cells.items():
        def cell(key: tuple[str, str, str], got: dict = got) -> str:
            return f"{got[key]:.3f}" if key in got and not np.isnan(got[key]) else "-"
        lines.append(f"| {method} | {seeds[method]} | " + " | ".join(
            cell(k) for k in [("old", "all", "in-domain"), ("new", "all", "in-domain"), ("new", "no comparison", "in-domain"),
                              ("old", "all", "ood"), ("new", "all", "ood"), ("new", "no comparison", "ood")]) + " |")
    text = "\n".join(lines)
    print(text)
    if args.md:
        args.md.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
