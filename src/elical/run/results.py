"""The run's numbers: results.csv (method, budget, seed, split, metric, value), seed means, findings.

Every claim the report makes is computed here from the measured table, never assumed: whether
self-consistency tracks correctness, whether it is overconfident on contested facts, whether
EliCal beats Cal-Only at the smallest budget (AUROC, ECE, Brier) and reaches 95 % of the all-labels AUROC
with <= 1k labels, and where EliCal loses to Cal-Only or the best training-free method on any metric.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from elical.evaluation.differences import BEST_BASELINE
from elical.evaluation.evaluate import AVERAGE
from elical.metrics.base import higher_is_better, metric_label
from elical.model.key import METHOD_NAMES, TRAINED, ModelKey
from elical.records import Record
from elical.run.method_differences import budget_label

RESULT_COLUMNS = ["method", "budget", "seed", "split", "metric", "value"]
RANK = {method: rank for rank, method in enumerate(TRAINED, start=1)}  # table order after the baselines


def method_columns(name: str, models: Mapping[str, ModelKey], pool_size: int) -> tuple[str, int, float]:
    """(method, labels used, seed) of an evaluated method: a trained model's from its key in ``models``
    (method name -> key); a training-free baseline has 0 labels and no seed."""
    key = models.get(name)
    if key is None:
        return METHOD_NAMES.get(name, name), 0, math.nan
    return METHOD_NAMES[key.method], key.labels(pool_size), float(key.seed)


def results_table(metrics_table: pd.DataFrame, pool_size: int, models: Mapping[str, ModelKey]) -> pd.DataFrame:
    """The long results table: group averages as split 'in-domain'/'ood'/'mc', datasets as 'group/dataset';
    ``models`` (method name -> key, e.g. ``Evaluation.models``) says which methods are trained models."""
    rows = metrics_table[~metrics_table.metric.isin(["n", "missing"])]
    columns = [method_columns(m, models, pool_size) for m in rows.method]
    split = np.where(rows.dataset == AVERAGE, rows.group, rows.group + "/" + rows.dataset)
    out = pd.DataFrame({
        "method": [c[0] for c in columns], "budget": [c[1] for c in columns], "seed": [c[2] for c in columns],
        "split": split, "metric": rows.metric.to_numpy(), "value": rows.value.to_numpy(),
    })
    return out[RESULT_COLUMNS].reset_index(drop=True)


def seed_summary(results: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Mean, standard deviation and count over seeds per (method, budget, split, metric), and per the columns
    ``by`` too (after method; e.g. the label selection strategy)."""
    grouped = results.groupby(["method", *by, "budget", "split", "metric"], sort=False)["value"]
    return grouped.agg(mean="mean", std="std", n="count").reset_index()


def transfer_matrix(summary: pd.DataFrame, training_free: Sequence[str]) -> tuple[pd.DataFrame, pd.Series]:
    """AUROC (mean over seeds) of every trained method and budget on every evaluated dataset: rows (method,
    budget) of trained methods, columns the summary's 'group/dataset' splits; and per dataset the best
    training-free method's name. The report's "Where it transfers" reads it against Eli-Only."""
    auroc = summary[(summary.metric == "auroc") & summary.split.str.contains("/", regex=False)]
    wide = auroc.pivot_table(index=["method", "budget"], columns="split", values="mean", sort=False)
    free = wide.loc[[m for m in wide.index if m[0] in set(training_free)]]
    best = free.idxmax().map(lambda key: key[0]) if not free.empty else pd.Series(dtype=str)
    trained = wide.loc[[m for m in wide.index if m[0] in set(METHOD_NAMES.values())]]
    return trained, best


def mean_metrics_table(metrics_table: pd.DataFrame, pool_size: int, models: Mapping[str, ModelKey]) -> pd.DataFrame:
    """The evaluation table averaged over seeds, methods renamed for display ('EliCal (100)', 'Cal-Only
    (all=1500)', 'Consis-Sem'): baselines first, then each trained method by labels (input to Table 2)."""
    rows = metrics_table[~metrics_table.metric.isin(["n", "missing"])].copy()
    shown = {name: (key.display(pool_size), RANK[key.method], key.labels(pool_size))
             if (key := models.get(name)) else (METHOD_NAMES.get(name, name), 0, 0)
             for name in dict.fromkeys(rows.method)}
    rows["method"] = [shown[name][0] for name in rows.method]
    order = {display: i for i, display in enumerate(dict.fromkeys(rows.method))}
    sort_key = {display: (rank, labels, order[display]) for display, rank, labels in shown.values()}
    out = rows.groupby(["method", "dataset", "group", "metric"], sort=False)[["value", "ci_low", "ci_high"]].mean()
    out = out.reset_index()
    return out.sort_values("method", key=lambda s: s.map(sort_key), kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------------------------- exposure


def exposure_bucket(rec: Record) -> str | None:
    """The exposure bucket of a world record (corpus mentions, or 'contested'); None when unknown."""
    extra = rec.extra or {}
    if "bucket" in extra:
        return str(extra["bucket"])
    if "mentions" not in extra:
        return None
    if extra.get("contested"):
        return "contested"
    m = int(extra["mentions"])
    return "0" if m == 0 else "1" if m == 1 else "2-3" if m <= 3 else "4-7" if m <= 7 else "8+"


# least to most exposure (world: corpus mentions; geo: population quartiles), contested last
BUCKET_ORDER = ["0", "1", "2-3", "4-7", "8+", "pop Q4 (least)", "pop Q3", "pop Q2", "pop Q1 (most)", "contested"]


def consistency_by_exposure(records: Sequence[Record]) -> pd.DataFrame:
    """Per exposure bucket: questions, greedy accuracy, mean self-consistency, and their gap.

    Free-form questions only: a multiple-choice answer is a letter, right by chance one time in four."""
    rows = []
    for rec in records:
        if (rec.extra or {}).get("group") == "mc" or (rec.extra or {}).get("choices"):
            continue
        bucket = exposure_bucket(rec)
        if bucket is None or rec.failed or rec.greedy_correct is None or not rec.sample_consistent:
            continue
        consistency = sum(rec.sample_consistent) / len(rec.sample_consistent)
        rows.append({"bucket": bucket, "correct": rec.greedy_correct, "consistency": consistency})
    if not rows:
        return pd.DataFrame(columns=["bucket", "n", "accuracy", "consistency", "overconfidence"])
    frame = pd.DataFrame(rows)
    out = frame.groupby("bucket").agg(n=("correct", "size"), accuracy=("correct", "mean"),
                                      consistency=("consistency", "mean")).reset_index()
    out["overconfidence"] = out.consistency - out.accuracy
    known = [b for b in BUCKET_ORDER if b in set(out.bucket)] + sorted(set(out.bucket) - set(BUCKET_ORDER))
    return out.set_index("bucket").loc[known].reset_index()


# ------------------------------------------------------------------------------------- findings


@dataclass
class Finding:
    """One measured claim: the question asked, the answer (True/False/None when not shown), evidence.

    ``seeds``: the training seeds a claim about trained models rests on (None: a training-free claim);
    ``interval``: the paired bootstrap interval a comparison's answer rests on (YES only when it lies
    above 0, NO only below; with ``holds`` None and an interval, the interval includes 0)."""

    question: str
    holds: bool | None
    evidence: str
    numbers: dict[str, Any] = field(default_factory=dict)
    seeds: int | None = None
    interval: tuple[float, float] | None = None


def _mean(summary: pd.DataFrame, method: str, budget: int, split: str, metric: str) -> tuple[float, float, int]:
    row = summary[(summary.method == method) & (summary.budget == budget) & (summary.split == split)
                  & (summary.metric == metric)]
    if row.empty:
        return math.nan, math.nan, 0
    return float(row["mean"].iloc[0]), float(row["std"].fillna(0).iloc[0]), int(row["n"].iloc[0])


def paired_row(differences: pd.DataFrame | None, comparison: str, budget: int, split: str,
                metric: str) -> pd.Series | None:
    """The seed-averaged row of ``comparison`` ('EliCal - Cal-Only') in differences.csv, if there is one."""
    if differences is None or differences.empty:
        return None
    group, _, dataset = split.partition("/")
    row = differences[(differences.comparison == comparison) & (differences.budget == budget)
                      & (differences.seed == "mean") & (differences.group == group)
                      & (differences.dataset == (dataset or AVERAGE)) & (differences.metric == metric)]
    return None if row.empty else row.iloc[0]


def _paired_verdict(row: pd.Series | None, metric: str) -> tuple[bool | None, tuple[float, float] | None, str]:
    """(holds, interval, evidence) of 'is A better than B' from a paired difference row: YES only when the
    interval excludes 0 on the better side, NO only on the worse side, None otherwise (or without a row)."""
    if row is None:
        return None, None, "; no paired interval (differences not computed)"
    low, high = float(row.ci_low), float(row.ci_high)
    better = higher_is_better(metric)
    holds = better if low > 0 else (not better) if high < 0 else None
    return holds, (low, high), f"; paired difference {row['diff']:+.3f} [{low:.3f}, {high:.3f}]"


def findings(results: pd.DataFrame, records: Sequence[Record], pool_size: int, split: str = "in-domain",
             consistency_method: str = "Consis-Sem", differences: pd.DataFrame | None = None) -> list[Finding]:
    """The report's measured claims. The comparisons of EliCal with Cal-Only and with the best training-free
    method answer YES/NO only by their paired bootstrap interval in ``differences`` (differences.csv);
    without it they are not shown."""
    summary = seed_summary(results)
    exposure = consistency_by_exposure([r for r in records if r.split != "train"])
    seen = exposure[~exposure.bucket.isin(["contested"])]
    out = [_tracks_correctness(summary, seen, split, consistency_method), _contested(exposure, seen)]
    budgets = sorted(int(b) for b in summary[summary.method == "EliCal"].budget.unique())
    cal_budgets = {int(b) for b in summary[summary.method == "Cal-Only"].budget.unique()}
    shared = [b for b in budgets if b in cal_budgets]
    if not shared:
        out.append(Finding("Does EliCal beat Cal-Only at the smallest budget?", None, "EliCal/Cal-Only not both trained"))
        out.append(Finding("Does EliCal reach 95 % of the all-labels AUROC with <= 1k labels?", None, "not trained"))
        return out
    out.append(_beats_cal_only(results, summary, split, shared[0], differences))
    reaches = _reaches_all_labels(summary, split, shared, pool_size)
    out.append(reaches)
    if reaches.holds is not None:
        out.append(_versus_training_free(summary, split, shared, differences))
    calibration = [m for m in dict.fromkeys(results.metric) if m.startswith("ece@")][:1] + ["brier"]
    out += [_beats_cal_only(results, summary, split, shared[0], differences, m) for m in calibration
            if m in set(results.metric)]
    out.append(_losses(results, summary, differences, pool_size))
    return out


def direction(metric: str) -> str:
    """'higher is better' or 'lower is better'."""
    return "higher is better" if higher_is_better(metric) else "lower is better"


def _tracks_correctness(summary: pd.DataFrame, seen: pd.DataFrame, split: str, consistency_method: str) -> Finding:
    """Whether self-consistency's AUROC reaches 0.7, and whether accuracy rises with exposure."""
    auroc_sc, _, _ = _mean(summary, consistency_method, 0, split, "auroc")
    acc_trend = seen.accuracy.to_numpy()
    rising = bool(len(acc_trend) >= 2 and acc_trend[-1] > acc_trend[0])
    question = "Does self-consistency track correctness?"
    if math.isnan(auroc_sc):
        return Finding(question, None, f"{consistency_method} AUROC is undefined (not scored, or every answer "
                                       "right or every one wrong)")
    verb = "rises" if rising else "does not rise"
    trend = (f"; accuracy {verb} with exposure: {acc_trend[0]:.2f} (bucket {seen.bucket.iloc[0]}) vs "
             f"{acc_trend[-1]:.2f} (bucket {seen.bucket.iloc[-1]})") if len(acc_trend) >= 2 else ""
    return Finding(question, auroc_sc >= 0.7,
                   f"{consistency_method} AUROC {split} = {auroc_sc:.3f} (threshold for 'yes': 0.70){trend}",
                   {"auroc": auroc_sc, "accuracy_rises_with_exposure": rising})


def _contested(exposure: pd.DataFrame, seen: pd.DataFrame) -> Finding:
    """Whether self-consistency overstates accuracy on contested facts more than on the others."""
    question = "Is self-consistency overconfident on contested facts?"
    contested = exposure[exposure.bucket == "contested"]
    if contested.empty:
        why = ("the subject marks none; overconfidence per exposure bucket is in 'Self-consistency and exposure'"
               if not seen.empty else "no exposure information")
        return Finding(question, None, f"no contested facts among the evaluated questions ({why})")
    c = contested.iloc[0]
    weights = seen.n.to_numpy(dtype=float)
    other_gap = float(np.average(seen.overconfidence, weights=weights)) if weights.sum() else math.nan
    holds = bool(c.overconfidence > 0.15 and c.overconfidence > other_gap + 0.1)
    return Finding(question, holds,
                   f"on {int(c.n)} contested facts: mean self-consistency {c.consistency:.2f} vs accuracy "
                   f"{c.accuracy:.2f} (gap {c.overconfidence:+.2f}); other facts: gap {other_gap:+.2f}",
                   {"contested_gap": float(c.overconfidence), "other_gap": other_gap})


def _beats_cal_only(results: pd.DataFrame, summary: pd.DataFrame, split: str, smallest: int,
                    differences: pd.DataFrame | None, metric: str = "auroc") -> Finding:
    """EliCal vs Cal-Only on ``metric`` at the smallest budget both have: means, seeds where EliCal is
    better (in the metric's direction), paired interval."""
    e, es, en = _mean(summary, "EliCal", smallest, split, metric)
    c_, cs, _ = _mean(summary, "Cal-Only", smallest, split, metric)
    per_seed = results[(results.budget == smallest) & (results.split == split) & (results.metric == metric)]
    wide = per_seed.pivot_table(index="seed", columns="method", values="value")
    both = {"EliCal", "Cal-Only"} <= set(wide.columns)
    gap = wide["EliCal"] - wide["Cal-Only"] if both else pd.Series(dtype=float)
    wins = int((gap > 0).sum() if higher_is_better(metric) else (gap < 0).sum())
    seeds = int(gap.notna().sum())
    holds, interval, paired = _paired_verdict(paired_row(differences, "EliCal - Cal-Only", smallest, split, metric),
                                              metric)
    label = metric_label(metric, short=True)
    return Finding(f"Does EliCal beat Cal-Only on {label} ({direction(metric)}) at the smallest budget "
                   f"({smallest} labels)?", holds,
                   f"{label} {split}: EliCal {e:.3f} ± {es:.3f} vs Cal-Only {c_:.3f} ± {cs:.3f} "
                   f"(mean ± sd over {en} seeds; EliCal better in {wins} of {len(wide)} seeds{paired})",
                   {"metric": metric, "elical": e, "cal_only": c_, "wins": wins, "seeds": len(wide)}, seeds, interval)


LOSS_ORDER = {"auroc": 0, "ece": 1, "brier": 2, "alignment": 3}


def _losses(results: pd.DataFrame, summary: pd.DataFrame, differences: pd.DataFrame | None,
            pool_size: int) -> Finding:
    """Every group average, budget and metric where EliCal is worse than Cal-Only or the best training-free
    method with the paired interval on the worse side (YES: at least one), and how many more are worse in
    the mean only."""
    question = "Does EliCal lose to Cal-Only or the best training-free method on any metric?"
    rows = (differences[(differences.seed == "mean") & (differences.dataset == AVERAGE)]
            if differences is not None and not differences.empty else pd.DataFrame())
    if rows.empty:
        return Finding(question, None, "no paired differences (differences.csv not computed)")
    better = np.array([higher_is_better(m) for m in rows.metric])
    worse_mean = np.where(better, rows["diff"] < 0, rows["diff"] > 0)
    shown = worse_mean & np.where(better, rows.ci_high < 0, rows.ci_low > 0)
    lost = rows[shown].assign(order=[LOSS_ORDER.get(m.split("@")[0], 4) for m in rows[shown].metric])
    lost = lost.sort_values(["comparison", "order"], kind="stable")  # Cal-Only first; AUROC, ECE, Brier, alignment
    parts = []
    for (_, method_b, metric, group), part in lost.groupby(["comparison", "method_b", "metric", "group"], sort=False):
        at = ", ".join(f"{budget_label(int(r.budget), pool_size)} ({_pair(summary, r)}, difference {r['diff']:+.3f} "
                       f"[{r.ci_low:.3f}, {r.ci_high:.3f}])" for _, r in part.sort_values("budget").iterrows())
        parts.append(f"worse than {method_b} on {group} {metric_label(metric, short=True)} ({direction(metric)}) "
                     f"at {at}")
    unclear = int(worse_mean.sum() - shown.sum())
    more = (f"; worse in the mean but with an interval that includes 0: {unclear} more (differences.csv)"
            if unclear else "")
    seeds = int(results[results.method == "EliCal"].seed.nunique())
    evidence = ("; ".join(parts) if parts else
                f"no interval lies on EliCal's worse side ({len(rows)} comparisons of group averages)") + more
    return Finding(question, bool(parts), evidence, {"losses": len(lost), "worse_in_mean_only": unclear}, seeds)


def _pair(summary: pd.DataFrame, row: pd.Series) -> str:
    """'EliCal 0.201 vs 0.084': the seed means of a difference row's two methods."""
    budget, split = int(row.budget), str(row.group)
    other = _mean(summary, row.method_b, budget if row.method_b in METHOD_NAMES.values() else 0, split, row.metric)
    return f"EliCal {_mean(summary, 'EliCal', budget, split, row.metric)[0]:.3f} vs {other[0]:.3f}"


def _reaches_all_labels(summary: pd.DataFrame, split: str, shared: list[int], pool_size: int) -> Finding:
    """EliCal's AUROC per budget <= 1000 as a share of the best all-labels model's (holds: None when there
    is no such budget or no all-labels model)."""
    question = "Does EliCal reach 95 % of the all-labels AUROC with <= 1k labels?"
    top = max(pool_size, max(shared))
    ref_candidates = {m: _mean(summary, m, top, split, "auroc")[0] for m in ("Cal-Only", "EliCal")}
    ref_method, reference = max(((m, v) for m, v in ref_candidates.items() if not math.isnan(v)),
                                key=lambda kv: kv[1], default=(None, math.nan))
    small = [b for b in shared if b <= 1000 and b < top]
    if not small or ref_method is None:
        return Finding(question, None, "no budget <= 1000 below the full pool, or no all-labels model")
    ratios = {int(b): _mean(summary, "EliCal", b, split, "auroc")[0] / reference for b in small}
    best_b = max(ratios, key=lambda b: ratios[b])
    first_ok = next((b for b in small if ratios[b] >= 0.95), None)
    text = ", ".join(f"{b}: {100 * r:.1f} %" for b, r in ratios.items())
    seeds = min(_mean(summary, m, b, split, "auroc")[2] for m, b in [(ref_method, top), *(("EliCal", b) for b in small)])
    return Finding(question, first_ok is not None,
                   f"all-labels reference = {ref_method} ({top} labels) AUROC {reference:.3f}; "
                   f"EliCal / reference by budget: {text}" + (f"; first budget at >= 95 %: {first_ok}" if first_ok else ""),
                   {"reference": reference, "ratios": ratios, "best_budget": best_b}, seeds)


def _versus_training_free(summary: pd.DataFrame, split: str, budgets: list[int],
                          differences: pd.DataFrame | None) -> Finding:
    """Whether the best EliCal model beats the best training-free baseline (the paper's EliCal does), by the
    paired interval of EliCal - best training-free at that budget."""
    rows = summary[(summary.split == split) & (summary.metric == "auroc") & (summary.budget == 0)
                   & ~summary.method.isin(list(METHOD_NAMES.values()))]
    question = "Does EliCal beat the best training-free baseline?"
    if rows.empty or not budgets:
        return Finding(question, None, "no training-free baseline or no EliCal model scored")
    best = rows.loc[rows["mean"].idxmax()]
    elical = {b: _mean(summary, "EliCal", b, split, "auroc")[0] for b in budgets}
    top_b = max(elical, key=lambda b: -math.inf if math.isnan(elical[b]) else elical[b])
    row = paired_row(differences, f"EliCal - {BEST_BASELINE}", top_b, split, "auroc")
    holds, interval, paired = _paired_verdict(row, "auroc")
    return Finding(question, holds,
                   f"best training-free: {best.method} AUROC {split} {best['mean']:.3f}; best EliCal: "
                   f"{elical[top_b]:.3f} ({top_b} labels){paired}",
                   {"baseline": best.method, "baseline_auroc": float(best["mean"]), "elical": elical[top_b]},
                   _mean(summary, "EliCal", top_b, split, "auroc")[2], interval)
