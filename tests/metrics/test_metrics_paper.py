"""convention="paper" against a port of the authors' compute_ece / compute_best_threshold / get_alignment.

The oracle below is written from the authors' ``honesty_alignment/eval.py`` (public repository
Trustworthy-Information-Access/Annotation-Efficient-Universal-Honesty-Alignment) in their style,
Python lists and loops, so it shares no code with elical's vectorised kernels. Only their final
``round(100 * align, 2)`` / ``round(ece, 2)`` display rounding is left out: elical reports the unrounded value.
"""

from __future__ import annotations

import numpy as np
import pytest

from elical import metrics


def oracle_compute_ece(conf_data, acc_data):
    n_bins = 10
    bin_edges = np.linspace(0, 1, n_bins + 1)
    conf_data = np.array(conf_data)
    acc_data = np.array(acc_data)
    bin_indices = np.digitize(conf_data, bin_edges) - 1
    ece = 0.0
    for b in range(n_bins):
        mask = bin_indices == b
        if np.sum(mask) > 0:
            avg_pred = np.mean(conf_data[mask])
            avg_true = np.mean(acc_data[mask])
            ece += np.abs(avg_pred - avg_true) * np.sum(mask) / len(acc_data)
    return ece


def oracle_compute_best_threshold(val_conf, val_acc):
    best_thres, best_align = 0.5, 0
    for thres in [i / 100 for i in range(1, 100)]:
        preds = [1 if c >= thres else 0 for c in val_conf]
        if all(p == 0 for p in preds) or all(p == 1 for p in preds):
            continue
        align = sum(int(p == a) for p, a in zip(preds, val_acc)) / len(val_acc)
        if align > best_align:
            best_align, best_thres = align, thres
    return best_thres, best_align


def oracle_get_alignment(conf_list, acc_list):
    half = int(len(conf_list) * 0.2)
    val_conf, val_acc = conf_list[:half], acc_list[:half]
    test_conf, test_acc = conf_list[half:], acc_list[half:]
    thres, _ = oracle_compute_best_threshold(val_conf, val_acc)
    preds = [1 if c >= thres else 0 for c in test_conf]
    return sum(int(p == a) for p, a in zip(preds, test_acc)) / len(test_acc)


def random_sets(count: int = 320, seed: int = 11):
    """(confidence list, correctness list) of many shapes: continuous, j/20, 2-decimal ties, tiny, one-class."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        kind = i % 8
        n = int(rng.integers(1, 11)) if kind in (0, 1) else int(rng.integers(5, 400))
        if kind in (0, 2):  # self-consistency with k = 20: j / 20, 1.0 and 0.0 frequent
            conf = rng.integers(0, 21, n) / 20
        elif kind == 3:  # two decimals: many ties, edges 0.3 / 0.6 / 0.7 hit
            conf = np.round(rng.random(n), 2)
        elif kind == 4:  # a few distinct values only: large ties
            conf = rng.choice([0.0, 0.3, 0.6, 0.7, 1.0], n)
        elif kind == 5:  # outside the threshold grid: every threshold predicts one class
            conf = rng.choice([0.001, 0.995, 1.0], n) if rng.random() < 0.5 else np.full(n, 0.995)
        else:  # continuous
            conf = rng.random(n) ** rng.uniform(0.3, 3)
        p = np.clip(conf + rng.normal(0, 0.25, n), 0, 1) if rng.random() < 0.8 else np.full(n, rng.random())
        correct = (rng.random(n) < p).astype(int)
        if kind == 6 and rng.random() < 0.5:
            correct[:] = int(rng.random() < 0.5)  # a single class
        yield [float(c) for c in conf], [int(a) for a in correct]


@pytest.mark.parametrize("case", list(random_sets()), ids=lambda c: f"n{len(c[0])}")
def test_paper_convention_equals_authors_code(case):
    conf, correct = case
    assert metrics.ece(conf, correct, convention="paper") == oracle_compute_ece(conf, correct)
    assert metrics.alignment(conf, correct, convention="paper").mean == oracle_get_alignment(conf, correct)


def test_random_sets_cover_what_they_claim():
    cases = list(random_sets())
    assert len(cases) >= 300
    assert sum(len(c) <= 10 for c, _ in cases) >= 60
    assert sum(1.0 in c for c, _ in cases) >= 100
    assert sum(len(set(a)) == 1 for _, a in cases) >= 20
    # Cases where the authors' rules matter: every threshold skipped, and a tie between thresholds.
    skipped = [c for c, a in cases
               if len(c) >= 5 and oracle_compute_best_threshold(c[: len(c) // 5], a[: len(a) // 5])[1] == 0]
    assert len(skipped) >= 20


def test_paper_ece_edges_and_confidence_one():
    # 0.3 is below linspace's 0.30000000000000004: it shares bin 2 with 0.25.
    assert metrics.ece([0.25, 0.3], [1, 0], convention="paper") == pytest.approx(abs(0.275 - 0.5))
    assert metrics.ece([0.25, 0.3], [1, 0]) == pytest.approx(0.5 * 0.75 + 0.5 * 0.3)
    # 1.0 is in no bin but counted in n: wrong answers at 1.0 cost nothing, and dilute the rest.
    assert metrics.ece([1.0] * 4, [0] * 4, convention="paper") == 0.0
    assert metrics.ece([1.0, 0.45], [0, 1], convention="paper") == pytest.approx(0.55 / 2)


def test_paper_alignment_rules():
    # n < 5: no calibration rows, every threshold skipped, 0.5 applied to all rows.
    assert metrics.alignment([0.6, 0.4, 0.9, 0.1], [1, 1, 0, 0], convention="paper").mean == 0.5
    # Calibration rows (first 2 of 10) both at 0.8: every threshold predicts one class -> 0.5.
    conf = [0.8, 0.8] + [0.55] * 4 + [0.45] * 4
    correct = [1, 0] + [1] * 4 + [0] * 4
    assert metrics.alignment(conf, correct, convention="paper").mean == 1.0
    # Accuracy 0 on the calibration part never beats the start value: 0.5 stays.
    conf = [0.6, 0.9, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7]
    correct = [1, 0, 1, 1, 1, 1, 0, 0, 0, 0]
    assert metrics.alignment(conf, correct, convention="paper").mean == 0.5  # 0.5 answers all 8: 4 right
    # Equal accuracies: the lowest threshold wins (0.21 here, answering the 0.21 rows too).
    conf = [0.2, 0.3, 0.9, 0.9, 0.9] + [0.25] * 10 + [0.1] * 10
    correct = [0, 1, 1, 1, 1] + [1] * 10 + [0] * 10
    assert metrics.alignment(conf, correct, convention="paper").mean == 1.0


def test_paper_bootstrap_kernels_agree_with_point_values():
    rng = np.random.default_rng(0)
    conf = rng.integers(0, 21, 300) / 20
    correct = (rng.random(300) < conf).astype(int)
    weights = np.vstack([np.ones(300), metrics.bootstrap_weights(300, 3, seed=1)])
    for name, point in (("ece", metrics.ece(conf, correct, convention="paper")),
                        ("alignment", metrics.alignment(conf, correct, convention="paper").mean)):
        replicates = metrics.metric_replicates(name, conf, correct, weights, convention="paper")
        assert replicates[0] == pytest.approx(point, abs=1e-12)
        assert np.isfinite(replicates).all()
    # A resample is the data with repeated rows: the weighted paper ECE equals the ECE of the repeated rows.
    idx = np.repeat(np.arange(300), weights[1].astype(int))
    ece_rep = metrics.metric_replicates("ece", conf, correct, weights[1:2], convention="paper")[0]
    assert ece_rep == pytest.approx(oracle_compute_ece(conf[idx], correct[idx]), abs=1e-12)
