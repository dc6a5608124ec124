"""Table-2-style tables: methods as rows, datasets grouped in-domain / OOD / MC with averages."""

from __future__ import annotations

import math

import pandas as pd

from elical.evaluate import AVERAGE, GROUP_ORDER
from elical.metrics import higher_is_better

DISPLAY_NAMES = {
    "nq": "NQ", "tq": "TQ", "triviaqa": "TQ", "hq": "HQ", "hotpotqa": "HQ", "2wiki": "2Wiki", "pararel": "ParaRel",
    "squad": "SQuAD", "wq": "WQ", "webquestions": "WQ", "cwq": "CWQ", "musique": "MuSiQue", "popqa": "PopQA",
    "mmlu": "MMLU", "nonambigqa": "NonAmbigQA",
}
PAPER_ORDER = list(DISPLAY_NAMES)
GROUP_LABELS = {"in-domain": "In-domain", "ood": "OOD", "mc": "MC", "other": "Other"}
METRIC_LABELS = {"auroc": "AUROC", "alignment": "Alignment", "brier": "Brier"}


def metric_label(metric: str) -> str:
    """Human name of a metric ('ece@10-uniform' -> 'ECE (10 uniform bins)')."""
    if metric.startswith("ece@"):
        bins, _, rest = metric[4:].partition("-")
        return f"ECE ({bins} {rest.replace('-', ', ')} bins)"
    return METRIC_LABELS.get(metric, metric)


def _dataset_sort_key(name: str) -> tuple[int, str]:
    return (PAPER_ORDER.index(name) if name in PAPER_ORDER else len(PAPER_ORDER), name)


def column_layout(rows: pd.DataFrame) -> list[tuple[str, str]]:
    """(group, dataset) columns in Table-2 order: groups in order, datasets in paper order, then the average."""
    present = set(rows.group)
    groups = [g for g in GROUP_ORDER if g in present] + sorted(present - set(GROUP_ORDER))
    layout = []
    for group in groups:
        datasets = sorted({d for d in rows.dataset[rows.group == group] if d != AVERAGE}, key=_dataset_sort_key)
        layout.extend((group, d) for d in datasets + ([AVERAGE] if len(datasets) > 1 else []))
    return layout


def column_label(group: str, dataset: str) -> tuple[str, str]:
    """Display names of a (group, dataset) column."""
    return GROUP_LABELS.get(group, group), "Avg" if dataset == AVERAGE else DISPLAY_NAMES.get(dataset, dataset)


def metric_frame(table: pd.DataFrame, metric: str, field: str = "value") -> pd.DataFrame:
    """One metric's ``field`` (value, ci_low or ci_high) as methods x (group, dataset) columns."""
    rows = table[table.metric == metric]
    wide = rows.pivot_table(index="method", columns=["group", "dataset"], values=field, dropna=False, sort=False)
    methods = list(dict.fromkeys(rows.method))
    return wide.reindex(index=methods, columns=pd.MultiIndex.from_tuples(column_layout(rows)))


def metric_matrix(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One metric as a methods x columns frame with display labels (group label, dataset label)."""
    frame = metric_frame(table, metric)
    frame.columns = pd.MultiIndex.from_tuples([column_label(g, d) for g, d in frame.columns])
    return frame


def _best(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    higher = higher_is_better(metric)
    best = frame.max() if higher else frame.min()
    return frame.eq(best, axis=1) & frame.notna()


def _cell(value: float) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.2f}"


def render_markdown(table: pd.DataFrame, metrics: list[str] | None = None) -> str:
    """Markdown with one Table-2-style table per metric (x100, best per column in bold)."""
    metrics = metrics or [m for m in dict.fromkeys(table.metric) if m not in ("n", "missing")]
    parts = []
    for metric in metrics:
        frame = metric_matrix(table, metric)
        best = _best(frame, metric)
        header = ["Method"] + [f"{g}: {d}" for g, d in frame.columns]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for method, row in frame.iterrows():
            cells = [f"**{_cell(v)}**" if best.loc[method, col] else _cell(v) for col, v in row.items()]
            lines.append("| " + " | ".join([str(method)] + cells) + " |")
        arrow = "higher" if higher_is_better(metric) else "lower"
        parts.append(f"### {metric_label(metric)} (x100, {arrow} is better)\n\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"


def render_rich(table: pd.DataFrame, metric: str):
    """A rich Table of one metric for the terminal."""
    from rich.table import Table

    frame = metric_matrix(table, metric)
    best = _best(frame, metric)
    out = Table(title=f"{metric_label(metric)} x100", title_justify="left")
    out.add_column("Method", style="bold")
    for group, dataset in frame.columns:
        out.add_column(f"{group}\n{dataset}", justify="right", style="cyan" if dataset == "Avg" else None)
    for method, row in frame.iterrows():
        out.add_row(str(method), *[f"[bold]{_cell(v)}[/bold]" if best.loc[method, c] else _cell(v) for c, v in row.items()])
    return out
