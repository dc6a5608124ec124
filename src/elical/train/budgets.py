"""Annotation budgets: nested, seeded subsets stratified by dataset (the 1k subset lies inside the 2k).

All records get one seeded order; a budget of b labels is the first b of that order, so smaller
budgets are prefixes of larger ones (nested). The order interleaves datasets systematically: the
i-th question (in a seeded shuffle) of a dataset with n questions gets the key (i + u_d) / n, with a
seeded offset u_d in [0, 1); sorting by key gives every prefix a share of each dataset within one
question of its share of the pool (stratified). The authors drew each budget independently
(reference.md 7.9).
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence

from elical.records import Record


def _seeded_key(seed: int, text: str) -> str:
    return hashlib.sha1(f"{seed}\x1f{text}".encode()).hexdigest()


def budget_order(records: Sequence[Record], seed: int) -> list[int]:
    """Indices of ``records`` in the seeded, dataset-stratified labelling order."""
    by_dataset: dict[str, list[int]] = defaultdict(list)
    for i, rec in enumerate(records):
        by_dataset[rec.dataset].append(i)
    # Shuffle by a hash of (seed, id): independent of file order and of other datasets.
    return interleave({dataset: sorted(members, key=lambda i: _seeded_key(seed, records[i].id))
                       for dataset, members in by_dataset.items()}, seed)


def interleave(ordered: Mapping[str, Sequence[int]], seed: int) -> list[int]:
    """Each dataset's ordered indices merged into one order that keeps every prefix stratified: the r-th of a
    dataset of n gets the key (r + u_d) / n, u_d a seeded offset in [0, 1) (see the module docstring)."""
    keyed: list[tuple[float, str, int]] = []
    for dataset, members in sorted(ordered.items()):
        offset = random.Random(_seeded_key(seed, dataset)).random()
        keyed.extend(((rank + offset) / len(members), dataset, i) for rank, i in enumerate(members))
    keyed.sort()
    return [i for _, _, i in keyed]


def budget_subset(records: Sequence[Record], budget: int | None, seed: int) -> list[int]:
    """Indices of the first ``budget`` records in the labelling order (all when budget is None)."""
    order = budget_order(records, seed)
    if budget is None:
        return order
    if budget <= 0:
        raise ValueError(f"annotation budget must be positive, got {budget}")
    if budget > len(order):
        raise ValueError(f"--budget {budget} exceeds the {len(order)} records available with labels; lower "
                         f"--budget to at most {len(order)}, or drop it to calibrate on all of them")
    return order[:budget]


def split_validation(indices: Sequence[int], records: Sequence[Record], fraction: float, seed: int,
                     minimum: int = 1) -> tuple[list[int], list[int]]:
    """Carve a validation split from training indices, stratified by dataset: (train, val).

    Used for checkpoint selection and early stopping; never evaluation data (reference.md 7.3).
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"validation fraction must lie in (0, 1), got {fraction}")
    if len(indices) < 2:
        raise ValueError(f"need at least 2 training records to carve a validation split, got {len(indices)}")
    order = [indices[i] for i in budget_order([records[i] for i in indices], seed + 7919)]
    n_val = min(len(order) - 1, max(minimum, round(fraction * len(order))))
    val = set(order[:n_val])
    return [i for i in indices if i not in val], [i for i in indices if i in val]


def split_records(records: Sequence[Record], fraction: float, seed: int) -> tuple[list[Record], list[Record]]:
    """:func:`split_validation` of all of ``records``, as records: (train, val). The honesty gate chooses
    its tau on the validation part, the same seeded, dataset-stratified split training uses."""
    train, val = split_validation(range(len(records)), records, fraction, seed)
    return [records[i] for i in train], [records[i] for i in val]
