"""The QA item every loader yields, and deterministic sharding of item lists."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from elical.records import record_id

CHOICE_LETTERS = "ABCDEFGHIJ"


@dataclass
class QAItem:
    """One question with its gold aliases; ``choices`` is set for multiple-choice items (MMLU)."""

    question: str
    answers: list[str]
    dataset: str = "unknown"
    split: str = "test"
    choices: list[str] | None = None
    id: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id:
            self.id = record_id(self.dataset, self.question)

    @property
    def is_multiple_choice(self) -> bool:
        return bool(self.choices)


def parse_shard(spec: str | tuple[int, int] | None) -> tuple[int, int]:
    """Parse ``"i/n"`` (0-based shard i of n) into ``(i, n)``, checking 0 <= i < n."""
    if spec is None:
        return 0, 1
    if isinstance(spec, tuple):
        index, count = spec
    else:
        try:
            left, right = str(spec).split("/")
            index, count = int(left), int(right)
        except ValueError:
            raise ValueError(f"shard must look like 'i/n' (e.g. '0/4'), got {spec!r}") from None
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard index must satisfy 0 <= i < n, got {index}/{count}")
    return index, count


def shard_of(item_id: str, count: int) -> int:
    """The shard (of ``count``) an id belongs to: a pure function of the id, not of file order."""
    base = item_id.split("-")[0]
    try:
        value = int(base, 16)
    except ValueError:
        import hashlib

        value = int(hashlib.sha1(item_id.encode()).hexdigest()[:16], 16)
    return value % count


def select_shard(items: Iterable[QAItem], shard: str | tuple[int, int] | None) -> list[QAItem]:
    """Keep the items of shard ``i/n``; the n shards partition any item list exactly."""
    index, count = parse_shard(shard)
    return [item for item in items if shard_of(item.id, count) == index]
