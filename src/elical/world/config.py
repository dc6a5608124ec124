"""Settings of the synthetic knowledge world and of its tiny language model (dataclasses, YAML-loadable)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WorldConfig:
    """How the synthetic world is drawn: entities, exposure of each fact in the corpus, question splits.

    Exposure model: a person's popularity is log-normal (``popularity_mu``, ``popularity_sigma``);
    each fact about them is stated ``Poisson(popularity * relation salience)`` times, so counts spread
    from never to often. A share of facts per relation (``contested``) is *contested*: the corpus states
    one wrong value more often than the right one. Every statement is also replaced by a random wrong
    value with probability ``statement_noise`` (noisy exposure).
    """

    seed: int = 0
    n_people: int = 900
    n_cities: int = 60
    n_countries: int = 12
    popularity_mu: float = 0.0
    popularity_sigma: float = 1.4
    max_mentions: int = 24
    statement_noise: float = 0.04
    contested_wrong_ratio: tuple[float, float] = (2.0, 3.5)
    city_mentions: int = 12
    qa_fraction: float = 0.3
    mc_options: int = 4
    train_pool_fraction: float = 0.72
    n_ood_per_relation: int = 250
    n_paraphrase: int = 400
    n_multihop: int = 300
    n_mc: int = 400
    # relation salience (mean exposure multiplier) and contested share; names must be world relations
    salience: dict[str, float] = field(
        default_factory=lambda: {
            "birth_city": 1.0,
            "profession": 1.4,
            "employer": 0.8,
            "instrument": 0.7,
            "birth_year": 0.6,
            "university": 0.9,
            "language": 1.0,
            "sport": 0.8,
        }
    )
    contested: dict[str, float] = field(
        default_factory=lambda: {
            "birth_city": 0.12,
            "profession": 0.05,
            "employer": 0.10,
            "instrument": 0.04,
            "birth_year": 0.15,
            "university": 0.08,
            "language": 0.10,
            "sport": 0.06,
        }
    )

    def __post_init__(self) -> None:
        if self.n_people < 10:
            raise ValueError(f"world.n_people: expected at least 10, got {self.n_people}")
        if not 0.0 <= self.qa_fraction < 1.0:
            raise ValueError(f"world.qa_fraction: expected a share in [0, 1), got {self.qa_fraction}")
        if not 0.0 < self.train_pool_fraction < 1.0:
            raise ValueError(f"world.train_pool_fraction: expected a share in (0, 1), got {self.train_pool_fraction}")
        if self.mc_options < 2 or self.mc_options > 26:
            raise ValueError(f"world.mc_options: expected 2..26, got {self.mc_options}")
        self.contested_wrong_ratio = tuple(self.contested_wrong_ratio)  # type: ignore[assignment]


@dataclass
class LMConfig:
    """The tiny causal LM: a real HF architecture from a config, and how it is pretrained."""

    arch: str = "llama"
    hidden_size: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 768
    max_position_embeddings: int = 256
    seq_len: int = 128
    batch_size: int = 64
    steps: int = 8000
    lr: float = 2e-3
    min_lr_ratio: float = 0.05
    warmup_steps: int = 200
    weight_decay: float = 0.1
    qa_weight: float = 0.35
    system_prompt: str | None = None
    qa_template: str = "Answer the following question.\nQuestion: {question}"
    mc_template: str = (
        "Select the correct answer to the following question based on your internal knowledge.\nQuestion: {question}{options}"
    )
    seed: int = 0
    save_dtype: str = "float16"

    def __post_init__(self) -> None:
        if self.arch not in ("llama", "qwen2"):
            raise ValueError(f"lm.arch: expected 'llama' or 'qwen2', got {self.arch!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"lm.hidden_size {self.hidden_size} is not divisible by lm.num_heads {self.num_heads}")


def from_dict(cls: type, data: dict[str, Any] | None, where: str) -> Any:
    """Build a config dataclass from a dict, naming unknown keys (typos) in the error."""
    data = dict(data or {})
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; expected some of {sorted(names)}")
    return cls(**data)


def load_world_configs(path: str | None, **lm_overrides: Any) -> tuple[WorldConfig, LMConfig]:
    """World and LM configs from a YAML file's ``world:`` and ``lm:`` sections (or defaults), then overrides."""
    data: dict[str, Any] = {}
    if path:
        from elical.yaml_config import read_yaml_mapping

        data = read_yaml_mapping(path, "a mapping with 'world:' and/or 'lm:' sections")
    world = from_dict(WorldConfig, data.get("world"), f"{path}: world")
    lm_data = dict(data.get("lm") or {})
    lm_data.update({k: v for k, v in lm_overrides.items() if v is not None})
    return world, from_dict(LMConfig, lm_data, f"{path}: lm")
