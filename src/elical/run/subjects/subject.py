"""What a run works on (:class:`Subject`: model, prompts, questions), the run's annotate settings for
it, and the per-split subsampling of its questions (:mod:`elical.run.subjects.by_name` builds the subjects)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from elical.data.items import QAItem
from elical.records import Record

if TYPE_CHECKING:
    from elical.annotate.config import AnnotateConfig
    from elical.run.config import RunConfig


class _Question(Protocol):
    dataset: str
    split: str


ItemT = TypeVar("ItemT", bound=_Question)  # a QAItem, or a Record already annotated


@dataclass
class Subject:
    """What a run works on: the answering model, its prompt wording, the questions and their groups."""

    model: str
    items: list[QAItem]
    groups: dict[str, str]  # dataset -> in-domain / ood / mc
    prompts: dict[str, Any] = field(default_factory=dict)  # PromptConfig overrides
    info: dict[str, Any] = field(default_factory=dict)
    records: list[Record] | None = None  # already annotated (qa.records): the run does not generate


def subsample(items: Sequence[ItemT], max_train: int | None, max_eval: int | None, seed: int) -> list[ItemT]:
    """At most ``max_train`` training questions (stratified by dataset) and ``max_eval`` per eval dataset."""
    rng = random.Random(seed)
    train = [it for it in items if it.split == "train"]
    by_dataset: dict[str, list[ItemT]] = defaultdict(list)
    for it in items:
        if it.split != "train":
            by_dataset[it.dataset].append(it)
    kept: list[ItemT] = []
    if max_train is not None and len(train) > max_train:
        per: dict[str, list[ItemT]] = defaultdict(list)
        for it in train:
            per[it.dataset].append(it)
        share = max_train / len(train)
        for name in sorted(per):
            members = per[name]
            kept += rng.sample(members, round(share * len(members)))
    else:
        kept += train
    for name in sorted(by_dataset):
        members = by_dataset[name]
        kept += rng.sample(members, max_eval) if max_eval is not None and len(members) > max_eval else members
    return kept


def annotate_config(cfg: RunConfig, subject: Subject) -> AnnotateConfig:
    """The run's annotate settings for its subject: the subject's model and prompt wording."""
    prompts = cfg.annotate.prompts.model_copy(update=subject.prompts)
    return cfg.annotate.model_copy(update={"model": subject.model, "prompts": prompts})
