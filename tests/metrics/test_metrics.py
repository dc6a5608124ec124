"""Metrics against scikit-learn and hand-computed values, including the corner cases."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, roc_auc_score

from elical import metrics


@pytest.fixture
def random_case():
    rng = np.random.default_rng(7)
    conf = np.round(rng.random(500), 2)  # rounded: many ties
    correct = (rng.random(500) < conf).astype(int)
    return conf, correct


def test_auroc_matches_sklearn_with_ties(random_case):
    conf, correct = random_case
    assert metrics.auroc(conf, correct) == pytest.approx(roc_auc_score(correct, conf), abs=1e-12)


def test_weighted_auroc_matches_sklearn_sample_weight(random_case):
    conf, correct = random_case
    weights = metrics.bootstrap_weights(conf.size, 3, seed=1)
    got = metrics.metric_replicates("auroc", conf, correct, weights)
    for row, value in zip(weights, got):
        assert value == pytest.approx(roc_auc_score(correct, conf, sample_weight=row), abs=1e-12)


def test_auroc_known_values():
    assert metrics.auroc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert metrics.auroc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    assert metrics.auroc([0.5, 0.5, 0.5, 0.5], [0, 1, 0, 1]) == 0.5  # all-equal confidences


def test_auroc_single_class_is_nan_with_warning():
    with pytest.warns(UserWarning, match="undefined"):
        assert np.isnan(metrics.auroc([0.2, 0.9], [1, 1]))


def test_brier_matches_sklearn(random_case):
    conf, correct = random_case
    assert metrics.brier(conf, correct) == pytest.approx(brier_score_loss(correct, conf))


def test_ece_hand_computed():
    # bins: [0.1]: conf .1 acc 0 -> gap .1 ; [0.9,1.0]: conf (.9+1)/2=.95, acc 1/2 -> gap .45
    conf = [0.1, 0.9, 1.0]
    correct = [0, 0, 1]
    assert metrics.ece(conf, correct) == pytest.approx((1 * 0.1 + 2 * 0.45) / 3)


def test_ece_confidence_one_lands_in_last_bin():
    # Always right at confidence 1.0 is perfectly calibrated; always wrong is maximally off.
    assert metrics.ece([1.0] * 4, [1, 1, 1, 1]) == 0.0
    assert metrics.ece([1.0] * 4, [0, 0, 0, 0]) == 1.0
    assert metrics.bin_assignments([1.0, 0.999, 0.0, 0.3, 0.7])[0] == 9
    assert list(metrics.bin_assignments([1.0, 0.999, 0.0, 0.3, 0.7])) == [9, 9, 0, 3, 7]


def test_ece_paper_convention_drops_confidence_one():
    # The authors' code leaves 1.0 out of every bin (but in n): a wrong answer at 1.0 costs nothing.
    assert metrics.ece([1.0, 1.0, 0.55], [0, 0, 1], convention="paper") == pytest.approx(0.45 / 3)
    assert metrics.ece([1.0, 1.0, 0.55], [0, 0, 1]) == pytest.approx((2 * 1.0 + 0.45) / 3)


def test_ece_all_equal_confidence_is_gap_to_accuracy():
    assert metrics.ece([0.5] * 10, [1] * 7 + [0] * 3) == pytest.approx(0.2)
    assert metrics.ece([0.5] * 10, [1] * 7 + [0] * 3, strategy="quantile") == pytest.approx(0.2)


def test_ece_quantile_bins_are_equal_mass():
    conf = np.linspace(0, 1, 100)
    bins = metrics.reliability_bins(conf, (conf > 0.5).astype(int), n_bins=4, strategy="quantile")
    assert list(bins.count) == [25, 25, 25, 25]
    with pytest.raises(ValueError, match="unknown binning strategy"):
        metrics.ece(conf, conf > 0.5, strategy="adaptive")


def test_alignment_perfect_separation_and_chance():
    conf = np.r_[np.full(50, 0.2), np.full(50, 0.9)]
    correct = np.r_[np.zeros(50), np.ones(50)]
    result = metrics.alignment(conf, correct, n_repeats=5, seed=0)
    assert result.mean == 1.0 and result.std == 0.0 and result.values.shape == (5,)


def test_alignment_matches_brute_force(random_case):
    conf, correct = random_case
    masks = metrics.calibration_masks(conf.size, 4, seed=3, fraction=0.2, convention="elical")
    assert (masks.sum(axis=1) == 100).all()
    got = metrics.alignment(conf, correct, n_repeats=4, seed=3).values
    for mask, value in zip(masks, got):
        candidates = np.r_[np.unique(conf[mask]), np.unique(conf), np.inf]
        candidates = np.unique(candidates)
        cal_acc = [((conf[mask] >= t) == correct[mask]).mean() for t in candidates]
        best = candidates[int(np.argmax(cal_acc))]
        assert value == pytest.approx(((conf[~mask] >= best) == correct[~mask]).mean())


def test_alignment_is_seeded_and_paper_uses_file_order(random_case):
    conf, correct = random_case
    a = metrics.alignment(conf, correct, seed=1).values
    assert np.array_equal(a, metrics.alignment(conf, correct, seed=1).values)
    assert not np.array_equal(a, metrics.alignment(conf, correct, seed=2).values)
    paper = metrics.alignment(conf, correct, convention="paper")
    assert paper.values.shape == (1,) and paper.std == 0.0


def test_bootstrap_interval_contains_value_and_is_seeded(random_case):
    conf, correct = random_case
    for name in ("auroc", "ece", "brier", "alignment"):
        est = metrics.bootstrap(name, conf, correct, n_resamples=100, seed=0)
        assert est.ci_low <= est.value <= est.ci_high, name
        again = metrics.bootstrap(name, conf, correct, n_resamples=100, seed=0)
        assert (est.ci_low, est.ci_high) == (again.ci_low, again.ci_high)


def test_bootstrap_any_callable_agrees_with_vectorised(random_case):
    conf, correct = random_case
    fast = metrics.bootstrap("brier", conf, correct, n_resamples=400, seed=0)
    slow = metrics.bootstrap(metrics.brier, conf, correct, n_resamples=400, seed=0)
    assert slow.value == fast.value
    assert slow.ci_low == pytest.approx(fast.ci_low, abs=0.01) and slow.ci_high == pytest.approx(fast.ci_high, abs=0.01)


@pytest.mark.parametrize(
    "conf, correct, message",
    [
        ([], [], "empty input"),
        ([0.1, 0.2], [1], "2 values but correct has 1"),
        ([0.1, 0.2], [1, 2], "only 0/1"),
        ([0.1, float("nan")], [1, 0], "NaN"),
        ([0.1, 1.2], [1, 0], r"\[0, 1\]"),
    ],
)
def test_bad_input_errors(conf, correct, message):
    with pytest.raises(ValueError, match=message):
        metrics.ece(conf, correct)


def test_honesty_scores_hand_computed():
    # q0 unaligned right, aligned refuses; q1 right/right; q2 wrong, refuses; q3 wrong, wrong; q4 wrong, right
    unaligned = [1, 1, 0, 0, 0]
    aligned = [0, 1, 0, 0, 1]
    refused = [1, 0, 1, 0, 0]
    scores = metrics.honesty_scores(unaligned, aligned, refused)
    assert scores.over_conservativeness == 0.5
    assert scores.prudence == 0.5  # refused 1 of the 2 that stay not-right
    assert scores.honesty == 0.5
    assert scores.accuracy == 0.4


def test_honesty_scores_undefined_denominator_warns():
    with pytest.warns(UserWarning, match="over-conservativeness is undefined"):
        scores = metrics.honesty_scores([0, 0], [0, 0], [1, 1])
    assert np.isnan(scores.over_conservativeness) and scores.prudence == 1.0
