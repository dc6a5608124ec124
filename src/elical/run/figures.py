"""The run's own figures: metric vs number of labels (paper Figures 5 and 6), and consistency by exposure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure  # no pyplot: the caller's backend (a notebook's) is left alone

COLORS = {"Cal-Only": "tab:orange", "EliCal": "tab:blue", "Head-Only": "tab:green"}


def metric_vs_labels(summary: pd.DataFrame, metric: str, splits: list[str], path: str | Path, ylabel: str,
                     reference_methods: tuple[str, ...] = ("Consis-Sem",)) -> None:
    """One panel per split: Cal-Only and EliCal (mean ± sd over seeds) against labels, log x axis;
    Eli-Only (0 labels) and training-free baselines as horizontal lines."""
    fig = Figure(figsize=(4.2 * len(splits), 3.6))
    axes = fig.subplots(1, len(splits), squeeze=False)
    for ax, split in zip(axes[0], splits):
        rows = summary[(summary.metric == metric) & (summary.split == split)]
        for method, color in COLORS.items():
            line = rows[rows.method == method].sort_values("budget")
            if line.empty:
                continue
            x, y, sd = line.budget.to_numpy(float), line["mean"].to_numpy(float), line["std"].fillna(0).to_numpy(float)
            ax.plot(x, y, marker="o", color=color, label=method)
            ax.fill_between(x, y - sd, y + sd, color=color, alpha=0.2)
        eli = rows[rows.method == "Eli-Only"]
        if not eli.empty:
            ax.axhline(float(eli["mean"].iloc[0]), color="tab:purple", ls="--", lw=1.2, label="Eli-Only (0 labels)")
        for ref, style in zip(reference_methods, (":", "-.")):
            base = rows[rows.method == ref]
            if not base.empty:
                ax.axhline(float(base["mean"].iloc[0]), color="grey", ls=style, lw=1.2,
                           label=f"{ref} (training-free)")
        if np.isfinite(rows["mean"].to_numpy(float)).any() and (rows.budget > 0).any():
            ax.set_xscale("log")
        ax.set_xlabel("labelled questions")
        ax.set_title(split)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


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
