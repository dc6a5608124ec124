"""Write an evaluation to a folder: metrics.csv, differences.csv, table.md, figures/*.png, evaluation.json."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from elical.differences import default_comparisons, paired_differences, reading
from elical.evaluate import AVERAGE, Evaluation
from elical.provenance import provenance
from elical.records import atomic_write
from elical.report import figures
from elical.report.tables import metric_label, render_markdown


@dataclass
class WrittenReport:
    """Paths of what :func:`write_evaluation` wrote."""

    metrics_csv: Path
    differences_csv: Path
    table_md: Path
    figures: list[Path]
    config_json: Path


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_").lower()


def write_evaluation(evaluation: Evaluation, out_dir: str | Path, inputs: dict[str, Any] | None = None) -> WrittenReport:
    """Write the metrics table, a Table-2-style Markdown file, plots, per-method scores and the config."""
    out = Path(out_dir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    table = evaluation.table

    metrics_csv = out / "metrics.csv"
    with atomic_write(metrics_csv) as tmp:
        table.to_csv(tmp, index=False, float_format="%.6g")

    differences = paired_differences(evaluation, default_comparisons(evaluation))
    differences_csv = out / "differences.csv"
    with atomic_write(differences_csv) as tmp:
        differences.to_csv(tmp, index=False, float_format="%.6g")

    table_md = out / "table.md"
    notes = "".join(f"- {note}\n" for note in evaluation.notes)
    level = int(round(100 * evaluation.config.level))
    averages = differences[differences.dataset == AVERAGE]
    readings = "".join(f"- {reading(row)}\n" for _, row in averages.iterrows())
    with atomic_write(table_md) as tmp:
        tmp.write_text(
            "# Evaluation\n\n"
            f"Values x100; {level} % bootstrap intervals ({evaluation.config.n_resamples} resamples) are in "
            "metrics.csv. Averages are weighted by dataset size.\n\n"
            + render_markdown(table)
            + (f"\n## Differences (paired bootstrap, {level} %; per dataset in differences.csv)\n\n{readings}"
               if readings else "")
            + (f"\n## Notes\n\n{notes}" if notes else "")
        )

    written = []
    for method, by_dataset in evaluation.scores.items():
        conf = np.concatenate([s.confidence for s in by_dataset.values()])
        correct = np.concatenate([s.correct for s in by_dataset.values()])
        if conf.size and conf.min() >= 0 and conf.max() <= 1:
            path = out / "figures" / f"reliability_{_slug(method)}.png"
            figures.reliability_diagram(
                conf, correct, method, path, evaluation.config.ece_bins, evaluation.config.ece_strategy
            )
            written.append(path)
    for metric in ("auroc", "alignment"):
        if metric in set(table.metric):
            path = out / "figures" / f"{metric}_by_dataset.png"
            figures.metric_by_dataset(table, metric, path, metric_label(metric))
            written.append(path)

    config_json = out / "evaluation.json"
    with atomic_write(config_json) as tmp:
        tmp.write_text(json.dumps({**evaluation.to_config_dict(), "inputs": inputs or {}, **provenance()}, indent=2))
    return WrittenReport(metrics_csv, differences_csv, table_md, written, config_json)
