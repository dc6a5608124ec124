"""QA data: the QAItem type, loaders (JSONL, MMLU CSV, HF datasets), dataset converters, sharding."""

from elical.data.items import QAItem, parse_shard, select_shard, shard_of
from elical.data.loaders import load_hf, load_items, load_many
from elical.data.registry import REGISTRY, DatasetSpec, lookup, register

__all__ = [
    "REGISTRY",
    "DatasetSpec",
    "QAItem",
    "load_hf",
    "load_items",
    "load_many",
    "lookup",
    "parse_shard",
    "register",
    "select_shard",
    "shard_of",
]
