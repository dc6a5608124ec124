"""The settings of a confidence model, declared once: the trainer's config inherits them and a saved
model's :class:`ModelConfig` is built from them (a leaf module: no torch, so configs load fast)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from elical.core.inputs import Range
from elical.core.settings_contract import Output
from elical.core.wordings import QA_TEMPLATE, SYSTEM_PROMPT  # the paper's QA prompt

HeadKind = Literal["linear", "mlp"]


class ModelFields(BaseModel):
    """The backbone, LoRA and head settings that decide a model (``elical run``'s train.settings has them)."""

    model_config = ConfigDict(extra="forbid")

    head: HeadKind = "linear"
    # The head also reads the answering LM's own next-token distribution at the pooled token (its largest
    # log-probability and its entropy; the base model's, LoRA off, through its output layer): still
    # before any answer is generated. A tiny LM holds what it knows there but not linearly in its hidden state
    # (benchmarks/results/world_probe_lens_cpu.txt).
    lens: Annotated[bool, Output.WHEN_ON] = False
    # With lens: the summary holds the next-token distribution's LENS_TOP (5) largest log-probabilities, sorted,
    # and its entropy (6 numbers) instead of the largest and the entropy (2): how much the runner-up answers get,
    # not only the first (1 - p_max spread over one rival or over many). The head's MLP reads its inputs at their
    # own scale, and the largest log-probability varies little (sd 0.46 nats on the world pool, against 2.3 for
    # the second): alone it barely moves the head (benchmarks/results/world_lens_top_cpu.md).
    lens_top: Annotated[bool, Output.WHEN_ON] = False
    lora_r: Annotated[int, Range(1), Output.LORA] = 8
    lora_alpha: Annotated[int, Range(1), Output.LORA] = 16  # LoRA's update is scaled by alpha / r: 0 would switch it off
    lora_dropout: Annotated[float, Range(0, 1, high_open=True), Output.LORA] = 0.0
    target_modules: Annotated[str | list[str], Output.LORA] = "all-linear"
    max_length: Annotated[int, Range(1)] = 512
    dtype: Annotated[str, Output.PER_STAGE] = "auto"  # auto: bfloat16 on GPU, float32 on CPU
    attn_implementation: Annotated[str, Output.NEVER] = "sdpa"  # the attention kernel: the same sums, reordered

    @model_validator(mode="after")
    def _top_needs_lens(self) -> ModelFields:
        if self.lens_top and not self.lens:
            raise ValueError("lens_top changes the lens summary: it needs lens: true")
        return self


class PromptFields(BaseModel):
    """The QA prompt a model reads questions in (``elical run`` fills it from its annotate prompts)."""

    model_config = ConfigDict(extra="forbid")

    qa_template: str = QA_TEMPLATE
    system_prompt: str | None = SYSTEM_PROMPT


class ModelConfig(PromptFields, ModelFields):
    """Everything needed to rebuild a ConfidenceModel around its backbone (saved in elical_model.json)."""

    base_model: str = ""
    lora: bool = True
    fused_lora: bool = True  # LoRA update added inside the B matmul (see elical.model.network.fused_lora_forward)
    extra: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """The config saved in a model folder; a field it does not know is a ValueError naming it."""
        known = set(cls.model_fields)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown model config field(s) {unknown}; expected some of {sorted(known)}")
        return cls(**data)
