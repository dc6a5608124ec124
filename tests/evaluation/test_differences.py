"""Paired bootstrap differences between methods: evaluate's draws, the run's per-seed and seed-mean rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from elical import metrics
from elical.data.synthetic import synthetic_records
from elical.evaluation.differences import (
    BEST_BASELINE,
    DIFFERENCE_COLUMNS,
    Comparison,
    default_comparisons,
    paired_differences,
)
from elical.evaluation.evaluate import AVERAGE, EvalConfig, evaluate
from elical.model.key import ModelKey
from elical.model.predictions import Predictions
from elical.records import Record
from elical.run.method_differences import RUN_DIFFERENCE_COLUMNS, readings, run_differences, summary_table
from elical.run.results import findings, results_table


def _questions(n: int, prefix: str) -> list[tuple[str, list[str]]]:
    return [(f"{prefix} question {i}?", [f"answer {i}"]) for i in range(n)]


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return (synthetic_records(_questions(150, "a"), "nq", seed=1) + synthetic_records(_questions(90, "b"), "hq", seed=2)
            + synthetic_records(_questions(100, "c"), "popqa", seed=3))


def _noisy(records: list[Record], name: str, noise: float, seed: int, drop: int = 0,
           key: ModelKey | None = None) -> Predictions:
    """A confidence that tracks correctness, with its own noise (methods built so are correlated)."""
    rng = np.random.default_rng(seed)
    conf = np.clip(0.3 + 0.4 * np.array([r.greedy_correct for r in records]) + rng.normal(0, noise, len(records)), 0, 1)
    return Predictions(name, {r.id: float(c) for r, c in list(zip(records, conf))[drop:]}, key=key)


def _row(frame: pd.DataFrame, **where) -> pd.Series:
    rows = frame
    for key, val in where.items():
        rows = rows[rows[key] == val]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_difference_of_a_method_with_itself_is_exactly_zero(records):
    evaluation = evaluate(records, [_noisy(records, "A", 0.3, 0)], EvalConfig(methods=["Prob"], n_resamples=50))
    frame = paired_differences(evaluation, [Comparison("A", "A", (("A", "A"),))])
    assert list(frame.columns) == DIFFERENCE_COLUMNS
    assert set(frame.metric) == {"auroc", "ece@10-uniform", "brier", "alignment"}
    assert (frame["diff"] == 0).all() and (frame.ci_low == 0).all() and (frame.ci_high == 0).all()
    assert not frame.excludes_zero.any()


def test_differences_match_the_table_and_group_averages_are_size_weighted(records):
    preds = [_noisy(records, "A", 0.2, 0), _noisy(records, "B", 0.4, 1)]
    evaluation = evaluate(records, preds, EvalConfig(methods=[], n_resamples=100))
    frame = paired_differences(evaluation, [Comparison("A", "B", (("A", "B"),))])
    table = evaluation.table

    def value(method: str, dataset: str, group: str) -> float:
        return float(table[(table.method == method) & (table.dataset == dataset) & (table.group == group)
                           & (table.metric == "auroc")].value.iloc[0])

    for dataset, group in (("nq", "in-domain"), ("hq", "in-domain"), (AVERAGE, "in-domain"), (AVERAGE, "ood")):
        row = _row(frame, dataset=dataset, group=group, metric="auroc")
        assert row["diff"] == pytest.approx(value("A", dataset, group) - value("B", dataset, group), abs=1e-12)
        assert row.ci_low <= row["diff"] <= row.ci_high
    nq, hq = (_row(frame, dataset=d, metric="auroc")["diff"] for d in ("nq", "hq"))
    in_domain = _row(frame, dataset=AVERAGE, group="in-domain", metric="auroc")
    assert in_domain["diff"] == pytest.approx((150 * nq + 90 * hq) / 240)
    assert in_domain.excludes_zero  # A (less noise) is clearly better on 240 questions


def test_paired_interval_is_narrower_than_unpaired_on_correlated_methods():
    rng = np.random.default_rng(0)
    correct = (rng.random(400) < 0.4).astype(int)
    base = 0.35 + 0.3 * correct + rng.normal(0, 0.25, 400)
    a = np.clip(base + rng.normal(0, 0.03, 400), 0, 1)
    b = np.clip(base + rng.normal(0, 0.03, 400), 0, 1)
    paired = metrics.paired_difference("auroc", a, b, correct, n_resamples=300, seed=1)
    unpaired = (metrics.bootstrap("auroc", a, correct, n_resamples=300, seed=1).replicates
                - metrics.bootstrap("auroc", b, correct, n_resamples=300, seed=2).replicates)
    low, high = metrics.percentile_interval(unpaired)
    assert paired.value == pytest.approx(metrics.auroc(a, correct) - metrics.auroc(b, correct))
    assert (paired.ci_high - paired.ci_low) < 0.5 * (high - low)
    # the evaluation's stored draws are paired the same way
    records = [Record(question=f"q{i}", answers=["x"], dataset="nq", greedy_correct=int(c))
               for i, c in enumerate(correct)]
    preds = [Predictions("A", {r.id: float(v) for r, v in zip(records, a)}),
             Predictions("B", {r.id: float(v) for r, v in zip(records, b)})]
    evaluation = evaluate(records, preds, EvalConfig(methods=[], n_resamples=300))
    row = _row(paired_differences(evaluation, [Comparison("A", "B", (("A", "B"),))]), dataset="nq", metric="auroc")
    assert row.ci_high - row.ci_low < 0.5 * (high - low)


def test_missing_predictions_keep_the_pairing_by_question(records):
    from elical.evaluation.evaluate import _seed_for

    config = EvalConfig(methods=[], n_resamples=40)
    full, partial = _noisy(records, "A", 0.3, 0), _noisy(records, "A2", 0.3, 0, drop=20)
    evaluation = evaluate(records, [full, partial], config)
    # A2 is A without its first 20 questions (all in nq): the same question draws, restricted to the scored ones
    assert evaluation.scores["A2"]["nq"].index.tolist() == list(range(20, 150))
    weights = metrics.bootstrap_weights(150, 40, _seed_for(config, "nq"))[:, 20:]
    scores = evaluation.scores["A2"]["nq"]
    expected = metrics.metric_replicates("auroc", scores.confidence, scores.correct, weights)
    assert np.array_equal(evaluation.draws[("A2", "in-domain", "nq")]["auroc"][1], expected)
    a_draws, a2_draws = evaluation.draws[("A", "in-domain", "hq")], evaluation.draws[("A2", "in-domain", "hq")]
    assert np.array_equal(a_draws["auroc"][1], a2_draws["auroc"][1])  # untouched dataset: identical replicates


def test_best_training_free_baseline_is_resolved_per_split_and_metric(records):
    evaluation = evaluate(records, [_noisy(records, "Model", 0.2, 0)],
                          EvalConfig(methods=["Prob", "Consis-Sem"], n_resamples=30, compare=[("Model", "Prob")]))
    comparisons = default_comparisons(evaluation)
    assert [(c.label_a, c.label_b) for c in comparisons] == [("Model", "Prob"), ("Model", BEST_BASELINE)]
    frame = paired_differences(evaluation, comparisons[1:])
    table = evaluation.table
    for _, row in frame.iterrows():
        at = table[(table.dataset == row.dataset) & (table.group == row.group) & (table.metric == row.metric)
                   & table.method.isin(["Prob", "Consis-Sem"])].set_index("method").value
        assert row.method_b == (at.idxmax() if row.metric in ("auroc", "alignment") else at.idxmin())
    with pytest.raises(ValueError, match="cannot compare Nope"):
        evaluate(records, [], EvalConfig(methods=["Prob"], compare=[("Nope", "Prob")]))


def test_run_differences_per_seed_and_seed_mean(records):
    pool = 500
    preds = [_noisy(records, f"elical-100-s{s}", 0.15, s, key=ModelKey("elical", 100, s)) for s in (0, 1, 2)]
    preds += [_noisy(records, f"cal-only-100-s{s}", 0.35, 10 + s, key=ModelKey("cal-only", 100, s)) for s in (0, 1, 2)]
    evaluation = evaluate(records, preds, EvalConfig(methods=["Prob"], n_resamples=60))
    results = results_table(evaluation.table, pool, evaluation.models)
    diffs = run_differences(evaluation, results, pool)
    assert list(diffs.columns) == RUN_DIFFERENCE_COLUMNS
    assert set(diffs.method_b) == {"Cal-Only", "Prob"} and set(diffs.seed) == {"0", "1", "2", "mean"}
    key = {"method_b": "Cal-Only", "dataset": AVERAGE, "group": "in-domain", "metric": "auroc"}
    per_seed = [_row(diffs, seed=str(s), **key)["diff"] for s in (0, 1, 2)]
    mean = _row(diffs, seed="mean", **key)
    assert mean["diff"] == pytest.approx(np.mean(per_seed))
    # the seed count comes from the per-seed results table
    at = results[(results.split == "in-domain") & (results.metric == "auroc") & (results.budget == 100)]
    wide = at.pivot_table(index="seed", columns="method", values="value")
    assert mean.better_in_seeds == f"{int((wide.EliCal > wide['Cal-Only']).sum())}/3"
    # mean replicate = mean of per-seed replicate differences, computed directly from the draws
    draws = evaluation.draws
    reps = np.mean([draws[(f"elical-100-s{s}", "in-domain", AVERAGE)]["auroc"][1]
                    - draws[(f"cal-only-100-s{s}", "in-domain", AVERAGE)]["auroc"][1] for s in (0, 1, 2)], axis=0)
    assert (mean.ci_low, mean.ci_high) == pytest.approx(metrics.percentile_interval(reps))
    sentences = readings(diffs, pool)
    assert any(s.startswith("EliCal above Cal-Only at 100 labels in-domain (AUROC): +")
               and "better in 3 of 3 seeds" in s for s in sentences), sentences
    table = summary_table(diffs, ["auroc", "alignment"], pool)
    assert list(table.comparison) == ["EliCal - Cal-Only, 100 labels", "EliCal - best training-free, 100 labels"]
    assert table.iloc[1]["in-domain: auroc"].endswith(" vs Prob")
    found = findings(results, records, pool, differences=diffs)
    beats = next(f for f in found if f.question.startswith("Does EliCal beat Cal-Only"))
    assert f"paired difference {mean['diff']:+.3f}" in beats.evidence
