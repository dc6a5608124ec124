"""Figures of adaptive retrieval (accuracy against retrieval rate) and abstention (risk against coverage)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
from matplotlib.figure import Figure  # no pyplot: the caller's backend is left alone


def retrieval_figure(curve: pd.DataFrame, summary: Mapping[str, float] | None = None) -> Figure:
    """The gate's accuracy over its thresholds against the share of questions retrieved for, with never and
    always marked and, from ``summary``, the target accuracy and the fewest retrievals reaching it."""
    fig = Figure(figsize=(4.8, 3.8))
    ax = fig.subplots()
    gated = curve[curve.policy == "gated"].sort_values("retrieval_rate")
    ax.plot(100 * gated.retrieval_rate, 100 * gated.accuracy, color="tab:blue", lw=1.5, label="gated by confidence")
    for policy, marker, color in (("never", "s", "tab:grey"), ("always", "D", "tab:red")):
        row = curve[curve.policy == policy].iloc[0]
        ax.scatter([100 * row.retrieval_rate], [100 * row.accuracy], marker=marker, color=color, zorder=3,
                   label=f"{policy} retrieve")
    if summary is not None:
        ax.axhline(100 * summary["goal_accuracy"], ls="--", color="grey", lw=1,
                   label=f"{100 * summary['target']:.0f} % of always")
        ax.scatter([100 * summary["retrieval_rate"]], [100 * summary["accuracy"]], marker="o", facecolor="none",
                   edgecolor="black", s=80, zorder=4,
                   label=f"{100 * summary['retrieval_rate']:.0f} % retrievals suffice")
    ax.set_xlabel("questions retrieved for (%)")
    ax.set_ylabel("accuracy (%)")
    ax.set_xlim(-2, 102)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Adaptive retrieval", fontsize=10)
    fig.tight_layout()
    return fig


def risk_coverage_figure(curve: pd.DataFrame, aurc: float | Mapping[str, float] | None = None) -> Figure:
    """Risk (error rate among the answered) against coverage (share answered, most confident first); with a
    ``method`` column, one curve per method. ``aurc`` (one value, or one per method) goes in the legend."""
    fig = Figure(figsize=(4.8, 3.8))
    ax = fig.subplots()
    groups = curve.groupby("method", sort=False) if "method" in curve else [("confidence", curve)]
    for name, part in groups:
        value = aurc.get(str(name)) if isinstance(aurc, Mapping) else aurc
        label = f"{name} (AURC {value:.3f})" if value is not None else str(name)
        part = part.sort_values("coverage")
        ax.plot(100 * part.coverage, 100 * part.risk, marker="." if len(part) < 40 else None, lw=1.5, label=label)
    ax.set_xlabel("coverage: questions answered (%)")
    ax.set_ylabel("risk: errors among answered (%)")
    ax.set_xlim(0, 102)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Abstention: risk against coverage", fontsize=10)
    fig.tight_layout()
    return fig
