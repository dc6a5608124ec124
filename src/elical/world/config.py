"""Settings of the synthetic knowledge world and of its tiny language model (pydantic, YAML-loadable).

Unknown keys are errors, so a typo fails when the settings are read, before any work."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from elical.inputs import InputError, one_line
from elical.prompts import MC_TEMPLATE, QA_TEMPLATE
from elical.yaml_config import read_yaml_mapping

Section = TypeVar("Section", bound=BaseModel)


class WorldConfig(BaseModel):
    """How the synthetic world is drawn: entities, exposure of each fact in the corpus, question splits.

    Exposure model: a person's popularity is log-normal (``popularity_mu``, ``popularity_sigma``);
    each fact about them is stated ``Poisson(popularity * relation salience)`` times, so counts spread
    from never to often. A share of facts per relation (``contested``) is *contested*: the corpus states
    one wrong value more often than the right one. Every statement is also replaced by a random wrong
    value with probability ``statement_noise`` (noisy exposure).
    """

    model_config = ConfigDict(extra="forbid")

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
    salience: dict[str, float] = Field(
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
    contested: dict[str, float] = Field(
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

    @field_validator("n_people")
    @classmethod
    def _enough_people(cls, value: int) -> int:
        if value < 10:
            raise ValueError(f"expected at least 10, got {value}")
        return value

    @field_validator("qa_fraction")
    @classmethod
    def _qa_share(cls, value: float) -> float:
        if not 0.0 <= value < 1.0:
            raise ValueError(f"expected a share in [0, 1), got {value}")
        return value

    @field_validator("train_pool_fraction")
    @classmethod
    def _pool_share(cls, value: float) -> float:
        if not 0.0 < value < 1.0:
            raise ValueError(f"expected a share in (0, 1), got {value}")
        return value

    @field_validator("mc_options")
    @classmethod
    def _letters(cls, value: int) -> int:
        if value < 2 or value > 26:
            raise ValueError(f"expected 2..26, got {value}")
        return value


class LMConfig(BaseModel):
    """The tiny causal LM: a real HF architecture from a config, and how it is pretrained."""

    model_config = ConfigDict(extra="forbid")

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
    qa_template: str = QA_TEMPLATE
    mc_template: str = MC_TEMPLATE
    seed: int = 0
    save_dtype: str = "float16"

    @field_validator("arch")
    @classmethod
    def _known_arch(cls, value: str) -> str:
        if value not in ("llama", "qwen2"):
            raise ValueError(f"expected 'llama' or 'qwen2', got {value!r}")
        return value

    @model_validator(mode="after")
    def _heads_divide(self) -> LMConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"lm.hidden_size {self.hidden_size} is not divisible by lm.num_heads {self.num_heads}")
        return self


def from_dict(cls: type[Section], data: dict[str, Any] | None, where: str) -> Section:
    """``data`` (None: the defaults) validated as ``cls``; a bad or unknown key (a typo) is an InputError
    naming ``where`` and the key."""
    try:
        return cls.model_validate(data or {})
    except ValidationError as err:
        raise InputError(f"{where}: {one_line(err)}") from None


def load_world_configs(path: str | None, **lm_overrides: Any) -> tuple[WorldConfig, LMConfig]:
    """World and LM configs from a YAML file's ``world:`` and ``lm:`` sections (or defaults), then the
    non-None ``lm_overrides``; a bad or unknown key is an InputError naming the file, section and key."""
    data: dict[str, Any] = read_yaml_mapping(path, "a mapping with 'world:' and/or 'lm:' sections") if path else {}
    lm_data = {**(data.get("lm") or {}), **{k: v for k, v in lm_overrides.items() if v is not None}}
    return from_dict(WorldConfig, data.get("world"), f"{path}: world"), from_dict(LMConfig, lm_data, f"{path}: lm")
