"""Annotation budgets (nested, seeded, stratified), validation split, and training targets."""

from __future__ import annotations

from collections import Counter

import pytest

from elical.records import Record
from elical.train.budgets import budget_order, budget_subset, split_validation
from elical.train.targets import MissingFieldError, require_targets, target_kind, target_value


def pool(sizes: dict[str, int]) -> list[Record]:
    return [Record(question=f"{d} question {i}", answers=["a"], dataset=d) for d, n in sizes.items() for i in range(n)]


def test_budgets_are_nested_seeded_and_stratified():
    records = pool({"nq": 500, "tq": 300, "pararel": 150, "hq": 50})
    small, large = budget_subset(records, 100, seed=3), budget_subset(records, 200, seed=3)
    assert set(small) < set(large) and len(set(small)) == 100
    assert budget_subset(records, 100, seed=3) == small  # seeded
    assert set(budget_subset(records, 100, seed=4)) != set(small)
    for budget in (10, 37, 100, 200, 555):
        counts = Counter(records[i].dataset for i in budget_subset(records, budget, seed=3))
        for dataset, n in {"nq": 500, "tq": 300, "pararel": 150, "hq": 50}.items():
            assert abs(counts[dataset] - budget * n / 1000) <= 1, (budget, dataset, counts)


def test_budget_order_ignores_file_order():
    records = pool({"a": 40, "b": 20})
    order = [records[i].id for i in budget_order(records, 0)]
    reversed_records = records[::-1]
    assert [reversed_records[i].id for i in budget_order(reversed_records, 0)] == order


def test_budget_errors():
    records = pool({"a": 5})
    with pytest.raises(ValueError, match="exceeds the 5 records"):
        budget_subset(records, 6, 0)
    with pytest.raises(ValueError, match="must be positive"):
        budget_subset(records, 0, 0)
    assert len(budget_subset(records, None, 0)) == 5


def test_validation_split_is_disjoint_stratified_and_from_the_given_pool():
    records = pool({"a": 60, "b": 40})
    indices = budget_subset(records, 50, seed=1)
    train, val = split_validation(indices, records, 0.2, seed=1)
    assert set(train) | set(val) == set(indices) and not set(train) & set(val)
    assert len(val) == 10
    assert Counter(records[i].dataset for i in val) == {"a": 6, "b": 4}


def test_targets_consistency_share_of_correct_and_greedy():
    rec = Record(question="q", answers=["a"], samples=["x"] * 4, sample_consistent=[1, 1, 0, 1],
                 sample_correct=[0, 1, 0, 0], greedy_correct=1)
    assert target_value(rec, target_kind("eli", "samples")) == 0.75
    assert target_value(rec, target_kind("cal", "samples")) == 0.25
    assert target_value(rec, target_kind("cal", "greedy")) == 1.0


def test_require_targets_names_the_missing_field():
    bare = [Record(question="q", answers=["a"])]
    with pytest.raises(MissingFieldError, match="consistency_judgement"):
        require_targets(bare, "consistency", "mode eli-only")
    mixed = bare + [Record(question="r", answers=["a"], samples=["x"], sample_consistent=[1])]
    with pytest.raises(MissingFieldError, match="1 of 2 records lack 'consistency_judgement'"):
        require_targets(mixed, "consistency", "mode eli-only")


def test_loss_kinds_mse_default_and_bce_on_soft_targets():
    import math

    import torch

    from elical.train.loop import per_question_loss

    logits, target = torch.tensor([0.0, 2.0]), torch.tensor([0.25, 1.0])
    mse = per_question_loss(logits, target, "mse")
    assert torch.allclose(mse, torch.tensor([0.0625, (1 / (1 + math.exp(-2)) - 1) ** 2]))
    bce = per_question_loss(logits, target, "bce")
    assert torch.allclose(bce, torch.tensor([math.log(2), math.log(1 + math.exp(-2))]))


def test_yaml_no_means_no_mixed_precision():
    import yaml

    from elical.train.config import TrainConfig

    assert TrainConfig(mixed_precision=yaml.safe_load("no")).mixed_precision == "no"
