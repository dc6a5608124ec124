"""PredictConfig and GateConfig: the settings of `elical predict` and `elical gate` (elical.train.predict),
apart from the code that loads and applies a model."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from elical.core.inputs import Device, Range


class PredictConfig(BaseModel):
    """How `elical predict` scores questions with a trained model
    (:func:`elical.train.predict.predict_files`)."""

    model_config = ConfigDict(extra="forbid")

    method: str | None = Field(None, description=(
        "the method name stored with the predictions (None: the model's method-budget-seed from its training "
        "settings, e.g. elical-1000-s0; else the model folder's name)"))
    device: Device = Field("auto", description="cpu, cuda, cuda:1 ... (auto: a GPU if any)")
    base_model: str | None = Field(None, description="the backbone's location, if it moved since training")
    tokens_per_batch: Annotated[int, Range(1)] = Field(16384, description="tokens per packed forward pass")
    compile_layers: bool = Field(False, description="compile the decoder layers (many questions, on a GPU)")


class GateConfig(BaseModel):
    """How `elical gate` chooses a model's answer/retrieve/abstain thresholds
    (:func:`elical.train.predict.fit_gate_files`)."""

    model_config = ConfigDict(extra="forbid")

    objective: str = Field("alignment", description=(
        "what the thresholds maximise on the validation records: alignment, honesty, precision:P "
        "(0 < P <= 1) or costs:wrong=W,abstain=A,retrieve=R (elical.model.gate.parse_objective)"))
    device: Device = Field("auto", description="cpu, cuda, cuda:1 ... (auto: a GPU if any)")

    @field_validator("objective")
    @classmethod
    def _known_objective(cls, value: str) -> str:
        """An objective elical.model.gate can parse (its error says what it expected)."""
        from elical.model.gate import parse_objective

        parse_objective(value)
        return value
