"""The paper's targets on a run: met, missed and by how much, from known results and differences."""

from __future__ import annotations

import pandas as pd

from elical.run.paper_targets import one_k_budget, one_k_words, paper_targets


def _results(elical_1k: list[float], cal_all: list[float]) -> pd.DataFrame:
    rows = []
    for seed, (e, c) in enumerate(zip(elical_1k, cal_all)):
        rows += [("EliCal", 1000, seed, "in-domain", "auroc", e), ("Cal-Only", 2000, seed, "in-domain", "auroc", c),
                 ("EliCal", 2000, seed, "in-domain", "auroc", c - 0.01), ("EliCal", 100, seed, "in-domain", "auroc", 0.5)]
    return pd.DataFrame(rows, columns=["method", "budget", "seed", "split", "metric", "value"])


def _differences(ood: dict[int, tuple[float, float, float]], vs_free: tuple[float, float, float]) -> pd.DataFrame:
    rows = [("EliCal - Cal-Only", "Cal-Only", b, "ood", *v) for b, v in ood.items()]
    rows.append(("EliCal - best training-free", "Consis-Sem", 1000, "in-domain", *vs_free))
    frame = pd.DataFrame(rows, columns=["comparison", "method_b", "budget", "group", "diff", "ci_low", "ci_high"])
    return frame.assign(seed="mean", dataset="average", metric="auroc")


def test_targets_met_and_missed_with_their_shortfall():
    results = _results([0.74, 0.80], [0.80, 0.80])  # seed 0: 92.5 % of its all-labels model
    differences = _differences({100: (0.05, 0.01, 0.09), 1000: (0.04, -0.02, 0.1), 2000: (0.02, 0.001, 0.04)},
                               (-0.03, -0.08, 0.02))
    ninety_five, ood, free = paper_targets(results, differences, pool_size=2000)
    assert ninety_five.met is False and "seed 0: 92.5 %" in ninety_five.evidence
    assert "missed by 2.5 points on the worst seed" in ninety_five.evidence
    assert ood.met is False and "missed at 1000 labels (lower bound -0.020)" in ood.evidence
    assert free.met is False and "missed by 0.030" in free.evidence


def test_targets_met_and_not_measurable():
    results = _results([0.79, 0.80], [0.80, 0.80])
    differences = _differences({100: (0.05, 0.01, 0.09), 2000: (0.02, 0.001, 0.04)}, (0.1, 0.05, 0.15))
    assert [t.met for t in paper_targets(results, differences, 2000)] == [True, True, True]
    empty = pd.DataFrame(columns=["comparison", "seed", "group", "dataset", "metric", "budget"])
    assert [t.met for t in paper_targets(results.iloc[0:0], empty, 2000)] == [None, None, None]


def test_the_1k_budget_is_the_smallest_at_or_above_1000_else_the_largest():
    assert one_k_budget([100, 300, 1000, 3000]) == 1000
    assert one_k_budget([50, 150, 500]) == 500
    assert one_k_budget([1200, 5000]) == 1200
    assert one_k_budget([]) is None


def test_claims_name_the_budget_that_stands_for_1k_without_calling_it_1k():
    assert one_k_words(1000) == "EliCal at 1k labels"
    assert one_k_words(1200) == "EliCal at 1200 labels (the smallest budget of this run at or above the paper's 1k)"
    assert one_k_words(30).startswith("EliCal at 30 labels (this run's largest budget short of all labels")
    results = _results([0.79, 0.80], [0.80, 0.80])
    claims = [t.claim for t in paper_targets(results[results.budget != 1000], _differences({}, (0, 0, 0)), 2000)]
    assert claims[0].startswith("EliCal at 100 labels (this run's largest budget") and "1k budget" not in claims[0]
