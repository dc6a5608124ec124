"""Table-2-style tables: methods as rows, datasets grouped in-domain / OOD / MC with averages.

Computing the frames (:func:`metric_frame`, :func:`metric_matrix`) is kept apart from showing them:
:func:`metric_blocks` turns them into document blocks (x100, best per column in bold) that
:mod:`elical.report.document` renders as Markdown or HTML, and :func:`render_rich` draws one in a terminal.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from elical.data.registry import display_name, paper_position
from elical.evaluation.evaluate import AVERAGE, GROUP_ORDER
from elical.metrics.base import higher_is_better, metric_label
from elical.report.document import MISSING, Block, Heading, Table, blocks_markdown

# A dataset's name in tables and its place among the columns are declared with it, in elical.data.registry.
GROUP_LABELS = {"in-domain": "In-domain", "ood": "OOD", "mc": "MC", "other": "Other"}

if TYPE_CHECKING:
    from rich.table import Table as RichTable


def _dataset_sort_key(name: str) -> tuple[int, int, str]:
    return (*paper_position(name), name)


def column_layout(rows: pd.DataFrame) -> list[tuple[str, str]]:
    """(group, dataset) columns in Table-2 order: groups in order, datasets in paper order, then the average."""
    present = set(rows.group)
    groups = [g for g in GROUP_ORDER if g in present] + sorted(present - set(GROUP_ORDER))
    layout: list[tuple[str, str]] = []
    for group in groups:
        datasets = sorted({d for d in rows.dataset[rows.group == group] if d != AVERAGE}, key=_dataset_sort_key)
        layout.extend((group, d) for d in datasets + ([AVERAGE] if len(datasets) > 1 else []))
    return layout


def column_label(group: str, dataset: str) -> tuple[str, str]:
    """Display names of a (group, dataset) column."""
    return GROUP_LABELS.get(group, group), "Avg" if dataset == AVERAGE else display_name(dataset)


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


def best_cells(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Where each column holds its best value (highest, or lowest for an error metric such as ECE)."""
    best = frame.max() if higher_is_better(metric) else frame.min()
    return frame.eq(best, axis=1) & frame.notna()


def x100(value: float | None) -> str:
    """A score for display: x100 with two decimals, a dash where it is not defined."""
    return MISSING if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.2f}"


def metric_table(table: pd.DataFrame, metric: str) -> Table:
    """One metric as a display table: 'Method' then (group, dataset) columns, x100, best per column bold."""
    frame = metric_matrix(table, metric)
    bold = best_cells(frame, metric).reset_index(drop=True)
    bold.insert(0, ("Method", ""), False)
    return Table(frame.map(x100).reset_index(names="Method"), bold=bold)


def metric_blocks(table: pd.DataFrame, metrics: list[str] | None = None) -> list[Block]:
    """A heading ('AUROC (x100, higher is better)') and a table per metric (default: every scored metric)."""
    if metrics is None:
        metrics = [m for m in dict.fromkeys(table.metric) if m not in ("n", "missing")]
    blocks: list[Block] = []
    for metric in metrics:
        arrow = "higher" if higher_is_better(metric) else "lower"
        blocks += [Heading(f"{metric_label(metric)} (x100, {arrow} is better)", 3), metric_table(table, metric)]
    return blocks


def render_markdown(table: pd.DataFrame, metrics: list[str] | None = None) -> str:
    """Markdown with one Table-2-style table per metric (x100, best per column in bold)."""
    return blocks_markdown(metric_blocks(table, metrics))


def render_rich(table: pd.DataFrame, metric: str) -> RichTable:
    """A rich Table of one metric for the terminal."""
    from rich.table import Table as RichTable

    frame = metric_matrix(table, metric)
    best = best_cells(frame, metric)
    out = RichTable(title=f"{metric_label(metric)} x100", title_justify="left")
    out.add_column("Method", style="bold")
    for group, dataset in frame.columns:
        out.add_column(f"{group}\n{dataset}", justify="right", style="cyan" if dataset == "Avg" else None)
    for method, row in frame.iterrows():
        out.add_row(str(method), *[f"[bold]{x100(v)}[/bold]" if best.loc[method, c] else x100(v) for c, v in row.items()])
    return out
