"""Figures: reliability diagrams and AUROC per dataset (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure  # no pyplot: the caller's backend (a notebook's) is left alone

from elical import metrics
from elical.report.tables import column_label, metric_frame


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
