"""The paper's shape as checkable targets: what EliCal should do with few labels, per run.

1. EliCal at 1k labels reaches at least 95 % of the all-labels AUROC in-domain, on every seed (the
   all-labels reference of a seed is its best model trained on every label: Cal-Only or EliCal).
2. EliCal is above Cal-Only out of domain at every budget, with the paired bootstrap interval above 0.
3. EliCal at 1k labels is at least as good as the best training-free baseline in-domain.

Where no budget of the run is 1000, the claims name the budget that stands for it (:func:`one_k_budget`).
Each target says whether it is met, and when missed, by how much (from results.csv and differences.csv).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from elical.evaluation.differences import BEST_BASELINE
from elical.run.results import paired_row


@dataclass
class Target:
    """One target: what it asks, whether it is met (None: not measurable here) and the numbers behind it."""

    claim: str
    met: bool | None
    evidence: str


def one_k_budget(budgets: list[int]) -> int | None:
    """The budget that stands for '1k labels': the smallest at or above 1000, else the largest below."""
    if not budgets:
        return None
    above = [b for b in budgets if b >= 1000]
    return min(above) if above else max(budgets)


def one_k_words(budget: int | None) -> str:
    """How a claim names the budget standing for the paper's 1k labels, saying when it is not 1000."""
    if budget is None or budget == 1000:
        return "EliCal at 1k labels"
    if budget > 1000:
        return f"EliCal at {budget} labels (the smallest budget of this run at or above the paper's 1k)"
    return f"EliCal at {budget} labels (this run's largest budget short of all labels, standing in for the paper's 1k)"


def paper_targets(results: pd.DataFrame, differences: pd.DataFrame, pool_size: int) -> list[Target]:
    """The three targets, measured on this run (AUROC; trained budgets below the whole pool)."""
    auroc = results[results.metric == "auroc"]
    budgets = sorted({int(b) for b in auroc[auroc.method == "EliCal"].budget if 0 < int(b) < pool_size})
    return [_ninety_five_every_seed(auroc, one_k_budget(budgets), pool_size),
            _above_cal_only_ood(differences, budgets + [pool_size]),
            _versus_training_free(differences, one_k_budget(budgets))]


def _ninety_five_every_seed(auroc: pd.DataFrame, budget: int | None, pool_size: int) -> Target:
    claim = f"{one_k_words(budget)} reaches >= 95 % of the all-labels AUROC in-domain on every seed"
    rows = auroc[auroc.split == "in-domain"]
    if budget is None:
        return Target(claim, None, "no EliCal budget below the whole pool")
    elical = rows[(rows.method == "EliCal") & (rows.budget == budget)].set_index("seed").value
    full = rows[rows.method.isin(["EliCal", "Cal-Only"]) & (rows.budget == pool_size)].groupby("seed").value.max()
    ratios = (elical / full).dropna()
    if ratios.empty:
        return Target(claim, None, "no all-labels model trained with the same seeds")
    worst = float(ratios.min())
    text = ", ".join(f"seed {int(s)}: {100 * r:.1f} %" for s, r in ratios.items())
    short = "" if worst >= 0.95 else f"; missed by {100 * (0.95 - worst):.1f} points on the worst seed"
    return Target(claim, worst >= 0.95, f"EliCal / best all-labels model: {text}{short}")


def _above_cal_only_ood(differences: pd.DataFrame, budgets: list[int]) -> Target:
    claim = "EliCal is above Cal-Only out of domain at every budget (paired interval above 0)"
    rows = {b: paired_row(differences, "EliCal - Cal-Only", b, "ood", "auroc") for b in budgets}
    found = {b: r for b, r in rows.items() if r is not None}
    if not found:
        return Target(claim, None, "no out-of-domain EliCal - Cal-Only difference (no OOD group, or a method not trained)")
    parts, missed = [], []
    for budget, r in sorted(found.items()):
        low = float(r["ci_low"])
        parts.append(f"{budget}: {float(r['diff']):+.3f} [{low:.3f}, {float(r['ci_high']):.3f}]")
        if not low > 0:
            missed.append(f"{budget} labels (lower bound {low:+.3f})")
    short = f"; missed at {', '.join(missed)}" if missed else ""
    return Target(claim, not missed, "EliCal - Cal-Only AUROC by budget: " + "; ".join(parts) + short)


def _versus_training_free(differences: pd.DataFrame, budget: int | None) -> Target:
    claim = f"{one_k_words(budget)} is at least as good as the best training-free baseline in-domain"
    r = paired_row(differences, f"EliCal - {BEST_BASELINE}", budget, "in-domain", "auroc") if budget else None
    if r is None:
        return Target(claim, None, "no EliCal - best training-free difference at that budget")
    diff = float(r["diff"])
    if math.isnan(diff):
        return Target(claim, None, "the difference is undefined")
    short = "" if diff >= 0 else f"; missed by {-diff:.3f} AUROC"
    return Target(claim, diff >= 0,
                  f"EliCal - {r['method_b']} AUROC {diff:+.3f} "
                  f"[{float(r['ci_low']):.3f}, {float(r['ci_high']):.3f}]{short}")
