"""Settings of the synthetic knowledge world and of its tiny language model (pydantic, YAML-loadable).

Unknown keys are errors, so a typo fails when the settings are read, before any work."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from elical.core.inputs import InputError, LineOf, Range, Seed, one_line
from elical.core.wordings import MC_TEMPLATE, QA_TEMPLATE
from elical.core.yaml_config import line_finder, read_yaml_mapping

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

    seed: Seed = 0
    n_people: Annotated[int, Range(10)] = 900
    n_cities: Annotated[int, Range(2)] = 60  # a contested fact needs a wrong value besides the right one
    n_countries: Annotated[int, Range(2)] = 12
    popularity_mu: Annotated[float, Range()] = 0.0
    popularity_sigma: Annotated[float, Range(0)] = 1.4
    max_mentions: Annotated[int, Range(1)] = 24
    statement_noise: Annotated[float, Range(0, 1)] = 0.04
    # (low, high) of the wrong value's mentions per right one, in a contested fact
    contested_wrong_ratio: tuple[Annotated[float, Range(0, low_open=True)], Annotated[float, Range(0, low_open=True)]] = (2.0, 3.5)
    city_mentions: Annotated[int, Range(0)] = 12
    qa_fraction: Annotated[float, Range(0, 1, high_open=True)] = 0.3
    mc_options: Annotated[int, Range(2, 26)] = 4  # answer letters A..Z
    train_pool_fraction: Annotated[float, Range(0, 1, low_open=True, high_open=True)] = 0.72
    n_ood_per_relation: Annotated[int, Range(0)] = 250
    n_paraphrase: Annotated[int, Range(0)] = 400
    n_multihop: Annotated[int, Range(0)] = 300
    n_mc: Annotated[int, Range(0)] = 400
    # relation salience (mean exposure multiplier) and contested share; names must be world relations
    salience: dict[str, Annotated[float, Range(0)]] = Field(
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
    contested: dict[str, Annotated[float, Range(0, 1)]] = Field(
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


class LMConfig(BaseModel):
    """The tiny causal LM: a real HF architecture from a config, and how it is pretrained."""

    model_config = ConfigDict(extra="forbid")

    arch: str = "llama"
    hidden_size: Annotated[int, Range(1)] = 256
    num_layers: Annotated[int, Range(1)] = 2
    num_heads: Annotated[int, Range(1)] = 4
    num_kv_heads: Annotated[int, Range(1)] = 2
    intermediate_size: Annotated[int, Range(1)] = 768
    max_position_embeddings: Annotated[int, Range(1)] = 256
    seq_len: Annotated[int, Range(1)] = 128
    batch_size: Annotated[int, Range(1)] = 64
    steps: Annotated[int, Range(1)] = 8000
    lr: Annotated[float, Range(0, low_open=True)] = 2e-3
    min_lr_ratio: Annotated[float, Range(0, 1)] = 0.05
    warmup_steps: Annotated[int, Range(0)] = 200
    weight_decay: Annotated[float, Range(0)] = 0.1
    qa_weight: Annotated[float, Range(0, 1)] = 0.35  # share of a batch that is QA examples
    system_prompt: str | None = None
    qa_template: str = QA_TEMPLATE
    mc_template: str = MC_TEMPLATE
    seed: Seed = 0
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
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"lm.num_heads {self.num_heads} is not divisible by lm.num_kv_heads {self.num_kv_heads}")
        return self


def from_dict(cls: type[Section], data: dict[str, Any] | None, where: str, line_of: LineOf | None = None) -> Section:
    """``data`` (None: the defaults) validated as ``cls``; a bad or unknown key (a typo) is an InputError
    naming ``where``, the key and (with ``line_of``) its line."""
    try:
        return cls.model_validate(data or {})
    except ValidationError as err:
        raise InputError(f"{where}: {one_line(err, line_of)}") from None


def load_world_configs(path: str | None, **lm_overrides: Any) -> tuple[WorldConfig, LMConfig]:
    """World and LM configs from a YAML file's ``world:`` and ``lm:`` sections (or defaults), then the
    non-None ``lm_overrides``; a bad or unknown key is an InputError naming the file, section and key."""
    data: dict[str, Any] = read_yaml_mapping(path, "a mapping with 'world:' and/or 'lm:' sections") if path else {}
    given = {k: v for k, v in lm_overrides.items() if v is not None}
    lm_data = {**(data.get("lm") or {}), **given}
    world_lines, lm_lines = (line_finder(path, ("world",)), line_finder(path, ("lm",), given)) if path else (None, None)
    source = f"{path}: " if path else ""
    return (from_dict(WorldConfig, data.get("world"), f"{source}world", world_lines),
            from_dict(LMConfig, lm_data, f"{source}lm", lm_lines))
