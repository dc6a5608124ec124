"""Write an evaluation to a folder: metrics.csv, differences.csv, table.md and table.html, figures/*.png,
evaluation.json."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from elical.core.io import atomic_write
from elical.core.provenance import provenance
from elical.evaluation.differences import default_comparisons, paired_differences, reading
from elical.evaluation.evaluate import AVERAGE, Evaluation
from elical.metrics.base import metric_label
from elical.report import figures
from elical.report.document import Bullets, Document, Figure, Heading, Paragraph, write_document
from elical.report.tables import metric_blocks


@dataclass
class WrittenReport:
    """Paths of what :func:`write_evaluation` wrote."""

    metrics_csv: Path
    differences_csv: Path
    table_md: Path
    table_html: Path
    figures: list[Path]
    config_json: Path


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_").lower()


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    """``frame`` as CSV (six significant digits), written atomically."""
    with atomic_write(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.6g")
    return path


def draw_figures(evaluation: Evaluation, folder: Path) -> list[tuple[Path, str]]:
    """(path, caption) of the AUROC and alignment bars by dataset, then of a reliability diagram per method
    with confidences in [0, 1]."""
    folder.mkdir(parents=True, exist_ok=True)
    level = round(100 * evaluation.config.level)
    written = []
    for metric in ("auroc", "alignment"):
        if metric in set(evaluation.table.metric):
            path = folder / f"{metric}_by_dataset.png"
            figures.metric_by_dataset(evaluation.table, metric, path, metric_label(metric))
            caption = f"{metric_label(metric)} by dataset and group average (whiskers: {level} % bootstrap intervals)"
            written.append((path, caption))
    for method, by_dataset in evaluation.scores.items():
        conf = np.concatenate([s.confidence for s in by_dataset.values()])
        correct = np.concatenate([s.correct for s in by_dataset.values()])
        if conf.size and conf.min() >= 0 and conf.max() <= 1:
            path = folder / f"reliability_{_slug(method)}.png"
            figures.reliability_diagram(
                conf, correct, method, path, evaluation.config.ece_bins, evaluation.config.ece_strategy
            )
            written.append((path, f"Reliability diagram: {method}, all datasets pooled"))
    return written


def evaluation_document(evaluation: Evaluation, differences: pd.DataFrame, drawn: list[tuple[Path, str]],
                        out: Path) -> Document:
    """The tables, the group-average differences as sentences, the figures and the notes."""
    level = round(100 * evaluation.config.level)
    document = Document("Evaluation", [Paragraph(
        f"Values x100; {level} % bootstrap intervals ({evaluation.config.n_resamples} resamples) are in "
        "metrics.csv. Averages are weighted by dataset size.")])
    document.blocks += metric_blocks(evaluation.table)
    averages = differences[differences.dataset == AVERAGE]
    if not averages.empty:
        document.blocks += [Heading(f"Differences (paired bootstrap, {level} %; per dataset in differences.csv)"),
                            Bullets(tuple(reading(row) for _, row in averages.iterrows()))]
    if drawn:
        document.blocks.append(Heading("Figures"))
        document.blocks += [Figure(path.relative_to(out).as_posix(), caption) for path, caption in drawn]
    if evaluation.notes:
        document.blocks += [Heading("Notes"), Bullets(tuple(evaluation.notes))]
    return document


def write_evaluation(evaluation: Evaluation, out_dir: str | Path, inputs: dict[str, Any] | None = None) -> WrittenReport:
    """Write the metrics table, a Table-2-style report (Markdown and self-contained HTML), plots and the config."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    metrics_csv = write_csv(evaluation.table, out / "metrics.csv")
    differences = paired_differences(evaluation, default_comparisons(evaluation))
    differences_csv = write_csv(differences, out / "differences.csv")
    drawn = draw_figures(evaluation, out / "figures")
    table_md, table_html = write_document(evaluation_document(evaluation, differences, drawn, out), out, "table")
    config_json = out / "evaluation.json"
    with atomic_write(config_json) as tmp:
        tmp.write_text(json.dumps({**evaluation.to_config_dict(), "inputs": inputs or {}, **provenance()}, indent=2))
    return WrittenReport(metrics_csv, differences_csv, table_md, table_html, [path for path, _ in drawn], config_json)
