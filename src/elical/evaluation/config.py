"""EvalConfig, the settings of an evaluation (``elical evaluate``, a run's ``evaluate:`` section), and the
dataset groups; apart from :mod:`elical.evaluation.evaluate` (which needs numpy and pandas) so that a run's config stays
light."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from elical.core.choices import BinStrategy, Convention
from elical.core.inputs import Range, Seed
from elical.data.registry import GROUP_ORDER, REGISTRY, dataset_group

__all__ = ["DATASET_GROUPS", "GROUP_ORDER", "MAX_ALIGNMENT_REPEATS", "MAX_ECE_BINS", "MAX_RESAMPLES", "EvalConfig"]

# Dataset name (as in file names, and its aliases; lower case) -> evaluation group, after the paper's HonestyBench
# split: each dataset's group is declared once, in elical.data.registry.
DATASET_GROUPS: dict[str, str] = {key: spec.group for key, spec in REGISTRY.items() if spec.group != "other"}

# Upper bounds where each unit is an array slot per question and bootstrap resample: 10**9 exhausts memory.
MAX_ECE_BINS = 10_000
MAX_RESAMPLES = 100_000
MAX_ALIGNMENT_REPEATS = 10_000


class EvalConfig(BaseModel):
    """Settings of an evaluation (the ``evaluate:`` section of a run); written beside its results."""

    model_config = ConfigDict(extra="forbid")

    methods: list[str] | None = None  # training-free baselines to score (None: every one the records support)
    n_resamples: Annotated[int, Range(1, MAX_RESAMPLES)] = 200
    level: Annotated[float, Range(0, 1, low_open=True, high_open=True)] = 0.95
    seed: Seed = 0
    ece_bins: Annotated[int, Range(1, MAX_ECE_BINS)] = 10
    ece_strategy: BinStrategy = "uniform"
    alignment_repeats: Annotated[int, Range(1, MAX_ALIGNMENT_REPEATS)] = 10
    alignment_fraction: Annotated[float, Range(0, 1, low_open=True, high_open=True)] = 0.2
    convention: Convention = "elical"
    groups: dict[str, str] = Field(default_factory=dict)  # dataset -> group overrides
    compare: list[tuple[str, str]] = Field(default_factory=list)  # (A, B): report A - B with a paired interval

    @property
    def ece_name(self) -> str:
        """ECE's metric name carries its bin count and strategy, so the number never travels without them."""
        return f"ece@{self.ece_bins}-{self.ece_strategy}" + ("-paper" if self.convention == "paper" else "")

    def group_of(self, dataset: str) -> str:
        """The evaluation group of a dataset (``groups`` first, then the paper's split)."""
        return self.groups.get(dataset) or dataset_group(dataset)
