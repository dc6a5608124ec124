"""The settings contract (elical.core.settings_contract): a field's mark alone decides whether it enters the
settings records that fingerprints, resume checks and --overwrite compare."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, Field

from elical.core.settings_contract import Output, mark, output_settings


def _leaves(annotation: Any) -> list[Any]:
    """The types (and Literal values, as Literal[...]) an annotation allows, unions and Annotated unwrapped."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _leaves(get_args(annotation)[0])
    if origin is Union or str(origin) == "<class 'types.UnionType'>":
        return [leaf for arg in get_args(annotation) for leaf in _leaves(arg)]
    return [annotation]


def another_value(config: BaseModel, name: str, **given: Any) -> Any:
    """A value of field ``name`` other than ``config``'s (``given`` where named): another Literal choice,
    the other boolean, a number or text changed, a nested config with its first field changed."""
    if name in given:
        return given[name]
    value = getattr(config, name)
    leaves = _leaves(type(config).model_fields[name].annotation)
    choices = [c for leaf in leaves if get_origin(leaf) is Literal for c in get_args(leaf)]
    if choices:
        return next(c for c in choices if c != value)
    if value is None:
        kind = next(leaf for leaf in leaves if leaf is not type(None))
        return {bool: True, int: 3, float: 0.5}.get(kind, "x")
    if isinstance(value, BaseModel):
        first = next(iter(type(value).model_fields))
        return value.model_copy(update={first: another_value(value, first)})
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1 if isinstance(value, int) else value / 2 or 0.5
    if isinstance(value, str):
        return value + "x"
    return value[:1] if len(value) > 1 else [*value, "x"]


class Inner(BaseModel):
    size: Annotated[int, Output.NEVER] = 1
    kind: str = "a"
    on: Annotated[bool, Output.WHEN_ON] = False


class Outer(BaseModel):
    seed: int = 0
    device: Annotated[str, Output.NEVER] = "cpu"
    fast: Annotated[bool, Output.WHEN_ON] = False
    recipe: Annotated[str, Output.COMPUTED] = "full"
    lr: Annotated[float, Output.PER_STAGE] = Field(0.1, description="the stage's own")
    inner: Inner = Field(default_factory=Inner)


def test_marks_decide_what_is_recorded():
    assert output_settings(Outer()) == {"seed": 0, "lr": 0.1, "inner": {"kind": "a"}}
    on = Outer(fast=True, device="cuda", inner=Inner(on=True, size=9))
    assert output_settings(on) == {"seed": 0, "lr": 0.1, "fast": True, "inner": {"kind": "a", "on": True}}
    assert output_settings(Outer(), leave_out={Output.PER_STAGE}) == {"seed": 0, "inner": {"kind": "a"}}
    assert mark(Outer, "lr") is Output.PER_STAGE and mark(Outer, "seed") is None


def test_annotate_records_every_field_but_those_marked_never():
    from elical.annotate.config import AnnotateConfig

    base = AnnotateConfig()
    reference = base.output_settings()
    assert "fast_decode" not in reference and "batch_size" not in reference["judges"]
    assert AnnotateConfig(fast_decode=True, repetition_penalty=1.0).output_settings()["fast_decode"] is True
    for name in AnnotateConfig.model_fields:
        changed = base.model_copy(update={name: another_value(base, name)}).output_settings()
        assert (changed == reference) == (mark(AnnotateConfig, name) is Output.NEVER), name
    for name in type(base.judges).model_fields:
        judges = base.judges.model_copy(update={name: another_value(base.judges, name)})
        changed = base.model_copy(update={"judges": judges}).output_settings()
        assert (changed == reference) == (mark(type(base.judges), name) is Output.NEVER), name


def test_run_steps_leave_out_what_is_marked_never():
    """The run's train step records every train.settings field but the NEVER ones (stage 2's recipe through
    stage2_settings); honesty and retrieval leave out their batch sizes, the tuning device and the target."""
    from elical.model.key import ModelKey
    from elical.run.config import load_run_config
    from elical.run.fingerprints import honesty_settings, train_settings
    from elical.run.steps.retrieval_step import step_settings
    from elical.run.subjects.by_name import Subject
    from elical.train.config import TrainSettings

    def same(cfg, name: str) -> bool:
        key = ModelKey("elical", 10 if 10 in cfg.train.budgets else cfg.train.budgets[0], 0)
        settings = cfg.train.settings.model_copy(update={name: another_value(cfg.train.settings, name)})
        changed = train_settings(cfg.model_copy(update={"train": cfg.train.model_copy(update={"settings": settings})}),
                                 key, "a")
        return changed == train_settings(cfg, key, "a")

    recipes = [load_run_config(overrides={"train": {"settings": {"stage2": recipe}}, "honesty": {}, "retrieval": {}})
               for recipe in ("mixed", "l2sp", "wise")]  # each recipe's own setting decides only its models
    for name in TrainSettings.model_fields:
        assert all(same(c, name) for c in recipes) == (mark(TrainSettings, name) is Output.NEVER), name
    cfg = recipes[0]

    assert cfg.honesty is not None and cfg.retrieval is not None
    honesty = honesty_settings(cfg, "a", "g")
    tune = cfg.honesty.settings.tune.model_copy(update={"device": "cpu"})
    quick = cfg.honesty.settings.model_copy(update={"batch_size": 3, "tune": tune})
    assert honesty_settings(cfg.model_copy(update={"honesty": cfg.honesty.model_copy(update={"settings": quick})}),
                            "a", "g") == honesty
    slower = cfg.honesty.settings.model_copy(update={"tune": tune.model_copy(update={"batch_size": 3})})
    assert honesty_settings(cfg.model_copy(update={"honesty": cfg.honesty.model_copy(update={"settings": slower})}),
                            "a", "g") != honesty

    subject = Subject(model="m", items=[], groups={})
    retrieval = step_settings(cfg, subject)
    assert "batch_size" not in retrieval["answers"] and "target" not in retrieval["answers"]
    for change, same in (({"batch_size": 3, "target": 0.5}, True), ({"k": 5}, False)):
        plan = cfg.retrieval.model_copy(update=change)
        assert (step_settings(cfg.model_copy(update={"retrieval": plan}), subject) == retrieval) is same, change
