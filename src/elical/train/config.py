"""TrainConfig: every setting of `elical train` in one object, loadable from YAML (paper defaults)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from elical.model import QA_TEMPLATE, SYSTEM_PROMPT, ModelConfig
from elical.yaml_config import YamlConfig

Mode = Literal["eli-only", "cal-only", "elical", "head-only"]


class TrainConfig(YamlConfig):
    """Settings of one training run; defaults follow the paper (reference.md section 2)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field("", description="Hugging Face causal LM: local folder or hub name")
    mode: Mode = "elical"
    output_dir: str = "runs/train"
    seed: int = 0
    # model
    head: Literal["linear", "mlp"] = "linear"
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    target_modules: str | list[str] = "all-linear"
    qa_template: str = QA_TEMPLATE
    system_prompt: str | None = SYSTEM_PROMPT
    max_length: int = 512
    dtype: str = "auto"
    attn_implementation: str = "sdpa"
    # targets and data
    cal_target: Literal["samples", "greedy"] = "samples"
    head_only_target: Literal["cal", "eli"] = "cal"
    budget: int | None = Field(None, description="labelled questions for calibration (None: all)")
    val_fraction: float = 0.1
    # optimisation
    loss: Literal["mse", "bce"] = "mse"
    lr: float = 5e-5
    lr_stage2: float | None = None
    lr_head_only: float = 1e-3
    weight_decay: float = 0.1
    warmup_ratio: float = 0.1
    max_grad_norm: float = 1.0
    epochs_stage1: int = 10
    epochs_stage2: int | None = Field(None, description="None: 50 when <= 10k labels, else 15 (authors)")
    patience: int = 4
    batch_size: int = 512
    micro_batch_size: int = 16  # questions per forward when packing is off
    # speed
    packing: bool = True
    tokens_per_batch: int = 8192
    row_length: int = 1024
    compile: bool | None = Field(None, description="compile decoder layers (None: on when training on CUDA)")
    mixed_precision: Literal["auto", "no", "bf16", "fp16"] = "auto"
    save_steps: int = 200

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _yaml_no(cls, value: object) -> object:
        """YAML reads a bare ``no`` as false; it means accelerate's 'no' here."""
        return "no" if value is False else value

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        if self.batch_size < 1 or self.tokens_per_batch < 1 or self.row_length < 1:
            raise ValueError("batch_size, tokens_per_batch and row_length must be positive")
        if self.mode == "head-only" and self.compile:
            raise ValueError("compile applies to LoRA training, not to head-only mode")
        return self

    @classmethod
    def from_sources(cls, path: str | Path | None, overrides: dict) -> TrainConfig:
        """A YAML file (optional) with command-line overrides on top (None values ignored)."""
        data = {}
        if path is not None:
            data = cls.from_yaml(path).model_dump(exclude_unset=True)
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)

    def model_settings(self) -> ModelConfig:
        """The ModelConfig this run builds (head-only: no LoRA)."""
        return ModelConfig(
            base_model=self.model, head=self.head, lora=self.mode != "head-only", lora_r=self.lora_r,
            lora_alpha=self.lora_alpha, lora_dropout=self.lora_dropout, target_modules=self.target_modules,
            qa_template=self.qa_template, system_prompt=self.system_prompt, max_length=self.max_length,
            dtype=self.dtype, attn_implementation=self.attn_implementation,
        )

    def stage2_epochs(self, n_labels: int) -> int:
        """Epochs for calibration: as set, else the authors' 50 (<= 10k labels) or 15."""
        if self.epochs_stage2 is not None:
            return self.epochs_stage2
        return 50 if n_labels <= 10_000 else 15
