"""Risk-coverage and AURC of abstention: hand-computed values, ties, and the bounds a ranking can reach."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from elical.metrics import aurc, optimal_aurc, risk_coverage


def test_hand_computed_curve_and_aurc():
    curve = risk_coverage([0.9, 0.8, 0.7, 0.6], [1, 1, 0, 1])
    np.testing.assert_allclose(curve.threshold, [0.9, 0.8, 0.7, 0.6])
    np.testing.assert_allclose(curve.coverage, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(curve.risk, [0, 0, 1 / 3, 1 / 4])
    assert curve.aurc == pytest.approx((0 + 0 + 1 / 3 + 1 / 4) / 4)


def test_input_order_does_not_matter():
    assert aurc([0.6, 0.9, 0.7, 0.8], [1, 1, 0, 1]) == pytest.approx(aurc([0.9, 0.8, 0.7, 0.6], [1, 1, 0, 1]))


def test_ties_form_one_point_and_score_the_mean_over_their_orders():
    conf, correct = [0.9, 0.5, 0.5, 0.1], [1, 0, 1, 0]
    curve = risk_coverage(conf, correct)
    np.testing.assert_allclose(curve.coverage, [0.25, 0.75, 1.0])
    np.testing.assert_allclose(curve.risk, [0, 1 / 3, 1 / 2])
    # the two tie orders: correct first (risks 0, 0, 1/3, 1/2) or wrong first (0, 1/2, 1/3, 1/2)
    assert curve.aurc == pytest.approx(((0 + 0 + 1 / 3 + 1 / 2) + (0 + 1 / 2 + 1 / 3 + 1 / 2)) / 8)


def test_ties_equal_the_average_over_every_tie_breaking():
    rng = np.random.default_rng(1)
    conf = rng.choice([0.2, 0.5, 0.8], size=7)
    correct = rng.integers(0, 2, size=7)
    values = []
    for order in itertools.permutations(range(7)):
        jitter = np.empty(7)
        jitter[list(order)] = np.arange(7) * 1e-6  # a distinct order inside every tie
        values.append(aurc(conf + jitter, correct))
    assert aurc(conf, correct) == pytest.approx(np.mean(values))


def test_all_correct_is_zero_and_one_confidence_everywhere_is_the_error_rate():
    assert aurc([0.3, 0.9, 0.5], [1, 1, 1]) == 0.0
    curve = risk_coverage([1.0] * 5, [1, 0, 1, 1, 0])
    np.testing.assert_allclose(curve.coverage, [1.0])
    np.testing.assert_allclose(curve.risk, [0.4])
    assert curve.aurc == pytest.approx(0.4)


def test_a_perfect_ranking_gives_the_least_aurc():
    rng = np.random.default_rng(0)
    correct = rng.integers(0, 2, size=200)
    best = optimal_aurc(correct)
    # sorting by correctness, with distinct confidences, is the same perfect ranking
    assert aurc(correct + rng.uniform(0, 0.5, size=200), correct) == pytest.approx(best)
    for _ in range(20):
        assert aurc(rng.uniform(size=200), correct) >= best - 1e-12
    assert aurc(1 - correct, correct) > aurc(rng.uniform(size=200), correct) > best  # reversed ranking is worst


def test_bad_input_is_an_error():
    with pytest.raises(ValueError, match="confidence has 2 values but correct has 3"):
        aurc([0.1, 0.2], [1, 0, 1])
    with pytest.raises(ValueError, match="empty input"):
        aurc([], [])
