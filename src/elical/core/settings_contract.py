"""Which config fields decide outputs, marked once on each field (a leaf module: pydantic only).

A field's annotation carries its mark, ``Annotated[int, Range(1), Output.NEVER]``; an unmarked field
decides outputs. The settings records that fingerprints, resume checks and ``--overwrite`` compare
(elical.core.fingerprint) come from :func:`output_settings`, so a new field decides outputs (a changed value
blocks a resume) unless it is marked otherwise, and no list of names is kept beside the configs.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import Enum
from typing import Any

from pydantic import BaseModel


class Output(Enum):
    """How a field enters the settings that decide outputs (the mark; unmarked: recorded as it is)."""

    NEVER = "never"
    """How fast, where or with what bookkeeping the work runs (batch size, device, compilation, servers,
    shard files): never decides outputs, so changing it never blocks a resume."""
    WHEN_ON = "when on"
    """Decides outputs only when on: recorded as true then and absent when off, so folders made before
    the option existed still resume without it."""
    COMPUTED = "computed"
    """Decides outputs through a value its users compute and record in its place (the trainer's stage-2
    recipe, :func:`elical.train.config.stage2_settings`)."""
    PER_STAGE = "per stage"
    """Recorded as it is by a whole run, but by each training stage in the form that stage uses (its
    epochs and learning rate, the precision as it resolves on the machine, which stages run)."""
    LORA = "lora"
    """Decides LoRA training only: a head-only stage (frozen backbone) leaves it out."""
    CALIBRATION = "calibration"
    """Decides the calibration stage only: the elicitation stage leaves it out."""


def mark(model: type[BaseModel], name: str) -> Output | None:
    """The mark of field ``name`` of ``model`` (None: unmarked, it decides outputs as it is)."""
    return next((m for m in model.model_fields[name].metadata if isinstance(m, Output)), None)


def output_settings(config: BaseModel, leave_out: Collection[Output] = ()) -> dict[str, Any]:
    """The settings of ``config`` that decide outputs, as JSON values (``model_dump(mode="json")``): every
    field but those marked :attr:`Output.NEVER`, :attr:`Output.COMPUTED` or a mark in ``leave_out``;
    :attr:`Output.WHEN_ON` fields as true when on, absent when off; nested configs likewise."""
    exclude, on = _marked(config, {Output.NEVER, Output.COMPUTED, *leave_out})
    data = config.model_dump(mode="json", exclude=exclude)
    for path in on:
        *parents, name = path
        where = data
        for parent in parents:
            where = where[parent]
        where[name] = True
    return data


def _marked(config: BaseModel, left_out: set[Output]) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    """``model_dump``'s nested ``exclude`` for the fields left out, and the paths of WHEN_ON fields that are on."""
    exclude: dict[str, Any] = {}
    on: list[tuple[str, ...]] = []
    for name in type(config).model_fields:
        kind, value = mark(type(config), name), getattr(config, name)
        if kind is Output.WHEN_ON:
            exclude[name] = True
            if value:
                on.append((name,))
        elif kind in left_out:
            exclude[name] = True
        elif isinstance(value, BaseModel):
            inner, inner_on = _marked(value, left_out)
            if inner:
                exclude[name] = inner
            on += [(name, *path) for path in inner_on]
    return exclude, on
