"""Figures: reliability diagrams, a metric per dataset, a metric against labels (paper Figures 5 and 6) and
self-consistency by exposure (matplotlib, no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.figure import Figure  # no pyplot: the caller's backend (a notebook's) is left alone

from elical import metrics
from elical.metrics.base import higher_is_better
from elical.report.tables import column_label, metric_frame

LABEL_CURVES = {"Cal-Only": "tab:orange", "EliCal": "tab:blue", "Head-Only": "tab:green"}
STRATEGY_STYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)))  # one line style per label selection strategy
STRATEGY_MARKERS = ("o", "s", "^", "D", "v")


def reliability_diagram(
    confidence: np.ndarray, correct: np.ndarray, title: str, path: str | Path, n_bins: int = 10,
    strategy: metrics.BinStrategy = "uniform",
) -> None:
    """Accuracy against mean confidence per bin, the diagonal, and how many answers fall in each bin."""
    bins = metrics.reliability_bins(confidence, correct, n_bins, strategy)
    ece = metrics.ece(confidence, correct, n_bins, strategy)
    filled = bins.count > 0
    fig = Figure(figsize=(4.2, 5))
    top, bottom = fig.subplots(2, 1, height_ratios=[3, 1], sharex=True)
    top.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
    top.plot(bins.confidence[filled], bins.accuracy[filled], marker="o", color="tab:blue", label="model")
    for x, acc, conf in zip(bins.confidence[filled], bins.accuracy[filled], bins.confidence[filled]):
        top.plot([x, x], [acc, conf], color="tab:red", lw=1, alpha=0.6)
    top.set_ylabel("accuracy")
    top.set_ylim(0, 1)
    top.set_title(f"{title}\nECE {100 * ece:.1f} ({n_bins} {strategy} bins), n={len(confidence)}", fontsize=10)
    top.legend(loc="upper left", fontsize=8)
    bottom.bar(bins.confidence[filled], bins.count[filled], width=0.8 / n_bins, color="tab:grey")
    bottom.set_xlabel("confidence")
    bottom.set_ylabel("count")
    bottom.set_xlim(0, 1)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def metric_by_dataset(table: pd.DataFrame, metric: str, path: str | Path, ylabel: str) -> None:
    """Grouped bars: one group per dataset (and group average), one bar per method, CI whiskers."""
    values = metric_frame(table, metric)
    lows, highs = metric_frame(table, metric, "ci_low"), metric_frame(table, metric, "ci_high")
    columns = [column_label(g, d) for g, d in values.columns]
    x = np.arange(len(columns))
    width = 0.8 / max(len(values.index), 1)
    fig = Figure(figsize=(max(6, 0.9 * len(columns) + 2), 3.8))
    ax = fig.subplots()
    for i, method in enumerate(values.index):
        value = values.loc[method].to_numpy(dtype=float)
        err = np.array([value - lows.loc[method].to_numpy(float), highs.loc[method].to_numpy(float) - value])
        err = np.nan_to_num(err, nan=0.0).clip(min=0)
        ax.bar(x + (i - (len(values.index) - 1) / 2) * width, value, width, yerr=err, capsize=2, label=method)
    ax.set_xticks(x, [f"{d}\n{g}" if d == "Avg" else d for g, d in columns], fontsize=8)
    ax.set_ylabel(ylabel)
    if metric == "auroc":
        ax.axhline(0.5, color="grey", ls=":", lw=1)
        ax.set_ylim(0.3, 1.0)
    ax.legend(fontsize=7, ncol=min(len(values.index), 4), loc="lower left", bbox_to_anchor=(0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def band_note(summary: pd.DataFrame) -> str:
    """What the shaded bands of :func:`metric_vs_labels` show, from the seed counts in ``summary``."""
    trained = summary[summary.method.isin(list(LABEL_CURVES))]
    seeds = int(trained["n"].max()) if not trained.empty else 0
    if seeds <= 1:
        return "lines: one seed, so no band (a spread needs two or more seeds)"
    return f"lines: mean over {seeds} seeds; shaded band: mean ± 1 sd over the seeds"


def _best_baseline(rows: pd.DataFrame, metric: str, training_free: Sequence[str]) -> pd.Series | None:
    """The summary row of the training-free method with the best mean, or None."""
    rows = rows[rows.method.isin(list(training_free)) & np.isfinite(rows["mean"].to_numpy(float))]
    if rows.empty:
        return None
    return rows.loc[rows["mean"].idxmax() if higher_is_better(metric) else rows["mean"].idxmin()]


def _curve(ax, line: pd.DataFrame, color: str, label: str, style: object = "-", marker: str = "o",
           band: float = 0.2) -> None:
    line = line.sort_values("budget")
    x, y, sd = line.budget.to_numpy(float), line["mean"].to_numpy(float), line["std"].fillna(0).to_numpy(float)
    ax.plot(x, y, marker=marker, color=color, ls=style, label=label)
    ax.fill_between(x, y - sd, y + sd, color=color, alpha=band, lw=0)


def _label_panel(ax, rows: pd.DataFrame, metric: str, training_free: Sequence[str],
                 strategies: pd.DataFrame | None = None) -> None:
    for method, color in LABEL_CURVES.items():
        if strategies is not None and method in set(strategies.method):
            for i, strategy in enumerate(dict.fromkeys(strategies.strategy)):
                line = strategies[(strategies.method == method) & (strategies.strategy == strategy)]
                if not line.empty:
                    _curve(ax, line, color, f"{method} \N{MIDDLE DOT} {strategy}", STRATEGY_STYLES[i % len(STRATEGY_STYLES)],
                           STRATEGY_MARKERS[i % len(STRATEGY_MARKERS)], band=0.08)
            continue
        line = rows[rows.method == method]
        if not line.empty:
            _curve(ax, line, color, method)
    eli = rows[rows.method == "Eli-Only"]
    if not eli.empty:
        ax.axhline(float(eli["mean"].iloc[0]), color="tab:purple", ls="--", lw=1.2, label="Eli-Only (0 labels)")
    best = _best_baseline(rows, metric, training_free)
    if best is not None:
        ax.axhline(float(best["mean"]), color="black", ls=":", lw=1.4, label=f"best training-free: {best.method}")
    budgets = sorted({int(b) for b in rows.budget if b > 0})
    if np.isfinite(rows["mean"].to_numpy(float)).any() and budgets:
        ax.set_xscale("log")
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.minorticks_off()
    ax.set_xlabel("labelled questions")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def metric_vs_labels(summary: pd.DataFrame, metric: str, splits: list[str], path: str | Path, ylabel: str,
                     training_free: Sequence[str], strategies: pd.DataFrame | None = None) -> Figure:
    """One panel per split: Cal-Only, EliCal and Head-Only (mean, ± 1 sd band over seeds) against labels on
    a log axis; Eli-Only (0 labels) and the best of ``training_free`` on that split as horizontal lines.
    ``strategies`` (several label selection strategies: the summary's columns plus ``strategy``): the methods
    it holds get one line per strategy from it (one colour per method, one line style per strategy, named
    'EliCal · uncertainty'). Saved to ``path`` and returned."""
    fig = Figure(figsize=(4.4 * len(splits), 3.9))
    axes = fig.subplots(1, len(splits), squeeze=False)
    for ax, split in zip(axes[0], splits):
        mine = None if strategies is None else strategies[(strategies.metric == metric) & (strategies.split == split)]
        _label_panel(ax, summary[(summary.metric == metric) & (summary.split == split)], metric, training_free, mine)
        ax.set_title(split)
    axes[0][0].set_ylabel(ylabel)
    fig.text(0.01, 0.01, band_note(summary), fontsize=9, color="dimgrey")
    bottom = 0.04
    if strategies is not None:  # one legend under the panels: per-panel ones would cover the lines
        shown: dict[str, Artist] = {}
        for ax in axes[0]:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                shown.setdefault(label, handle)
            ax.get_legend().remove()
        rows = -(-len(shown) // 4)
        fig.set_figheight(3.9 + 0.25 * rows)
        bottom = (0.3 + 0.25 * rows) / fig.get_figheight()
        fig.legend(list(shown.values()), list(shown), loc="lower center", ncol=4, fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 0.2 / fig.get_figheight()))
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, dpi=120)
    return fig


def consistency_exposure_plot(table: pd.DataFrame, path: str | Path,
                              xlabel: str = "times the fact is stated in the pretraining corpus") -> None:
    """Accuracy and mean self-consistency per exposure bucket (bars), with question counts."""
    fig = Figure(figsize=(6, 3.4))
    ax = fig.subplots()
    x = np.arange(len(table))
    ax.bar(x - 0.2, table.accuracy, 0.4, label="greedy accuracy", color="tab:green")
    ax.bar(x + 0.2, table.consistency, 0.4, label="mean self-consistency", color="tab:blue")
    ax.set_xticks(x, [f"{b}\n(n={n})" for b, n in zip(table.bucket, table.n)], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
