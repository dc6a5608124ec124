"""TrainConfig: every setting of `elical train` in one object, loadable from YAML (paper defaults)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from typing_extensions import Self

from elical.core.choices import Mode, Stage2Recipe
from elical.core.inputs import Range, Seed
from elical.core.settings_contract import Output
from elical.core.yaml_config import YamlConfig
from elical.model.settings import ModelConfig, ModelFields, PromptFields

# Settings that change how fast a model trains or where it is written, not the model, are marked Output.NEVER
# (elical.core.settings_contract): changing them never blocks a resume. Packing, micro-batches, compilation and the
# attention kernel only reorder floating-point sums. bf16 LoRA copies give the same numbers as autocast's casts
# (elical.train.speed), a fused AdamW the same update in one kernel. The other marks say how a training stage
# records a setting (trainer.stage_settings).


# TrainConfig fields of EliCal's calibration stage only (recorded through stage2_settings)
ELICAL_STAGE2 = {"stage2", "stage2_mix", "stage2_l2sp", "stage2_wise", "stage2_refit"}


def stage2_settings(mode: str, stage2: str, stage2_mix: float, stage2_l2sp: float,
                    stage2_refit: bool = False, stage2_wise: float = 0.5) -> dict[str, object]:
    """What the stage-2 recipe adds to the settings that decide a model: nothing for the paper's full
    update (so folders made before recipes existed still resume) or for modes other than elical; a recipe's
    own setting (stage2_mix, stage2_l2sp, stage2_wise) only with that recipe; stage2_refit only when on, with a
    recipe that trains and does not imply it (not platt, not wise)."""
    if mode != "elical":
        return {}
    refit: dict[str, object] = {"stage2_refit": True} if stage2_refit and stage2 not in ("platt", "wise") else {}
    if stage2 == "full":
        return refit
    own = {"mixed": {"stage2_mix": stage2_mix}, "l2sp": {"stage2_l2sp": stage2_l2sp},
           "wise": {"stage2_wise": stage2_wise}}.get(stage2, {})
    return {"stage2": stage2, **own, **refit}


def stage2_epochs(n_labels: int, epochs: int | None = None, passes: int | None = None, min_epochs: int = 3,
                  max_epochs: int = 50) -> int:
    """Calibration (stage 2) epochs for ``n_labels`` labelled questions, the one rule: ``epochs`` when set;
    else, with ``passes``, passes / labels clipped to [min_epochs, max_epochs] (small budgets get more
    epochs, so a run's cost grows less than linearly with its labels); else the authors' 50 epochs up to
    10k labels and 15 above."""
    if epochs is not None:
        return epochs
    if passes is not None:
        return int(min(max_epochs, max(min_epochs, round(passes / max(1, n_labels)))))
    return 50 if n_labels <= 10_000 else 15


class TrainSettings(YamlConfig, ModelFields):
    """The trainer's settings that ``elical run`` takes from its ``train.settings`` section: every
    :class:`TrainConfig` field but those the run fills per model (model, method, seed, budget, output
    folder, prompts). The model's own fields come from :class:`ModelFields`. Defaults follow the paper
    (reference.md section 2)."""

    model_config = ConfigDict(extra="forbid")

    # targets and data
    cal_target: Annotated[Literal["samples", "greedy"], Output.CALIBRATION] = "samples"
    head_only_target: Annotated[Literal["cal", "eli"], Output.PER_STAGE] = "cal"  # which stage head-only trains
    stage2: Annotated[Stage2Recipe, Output.COMPUTED] = Field(
        "wise", description=(
            "EliCal's calibration stage (default wise: chosen on held-out datasets, docs/measurements.md). "
            "full: LoRA and head trained on the labels (the paper). head: LoRA kept "
            "from stage 1, the head trained on its cached features (lr_head_only). platt: stage 1 kept whole, "
            "its logit rescaled by a logistic fit on the labels (a monotone map: stage 1's ranking unchanged). "
            "mixed: full, with stage2_mix unlabelled pool questions per label trained on stage-1 targets. "
            "l2sp: full, with an L2-SP penalty (stage2_l2sp / 2) * sum ||w - w_stage1||^2 pulling every trainable "
            "weight (LoRA and head) toward its stage-1 value. "
            "wise: full from stage 1 refitted to the labels (platt's model), then every trainable weight set "
            "stage2_wise of the way from that start to the trained stage 2 (weight-space ensembling, WiSE-FT)"))
    stage2_mix: Annotated[float, Range(0, 100), Output.COMPUTED] = Field(
        1.0, description=(
            "mixed: unlabelled pool questions per labelled training one; below 1 too (0.25: one per four labels). "
            "Their count is stage2_mix x the labelled training questions rounded to the nearest integer (ties "
            "to even), at most the unlabelled pool; 0 mixes in none"))
    stage2_l2sp: Annotated[float, Range(0), Output.COMPUTED] = Field(
        0.1, description=(
            "l2sp: alpha of the penalty (alpha / 2) * sum ||w - w_stage1||^2 added to stage 2's loss (a mean over "
            "the batch's questions); 0: the full update exactly, larger: closer to stage 1 (on the world, 0.01 is near "
            "full and 1 near stage 1; docs/measurements.md)"))
    stage2_wise: Annotated[float, Range(0, 1), Output.COMPUTED] = Field(
        0.5, description=(
            "wise: the kept weights are (1 - stage2_wise) * start + stage2_wise * trained, the start being stage 1 "
            "with its logit refitted to the labels; 0: platt's model, 1: full with stage2_refit; 0.5, WiSE-FT's "
            "choice when no out-of-domain data says otherwise (docs/measurements.md)"))
    stage2_refit: Annotated[bool, Output.COMPUTED] = Field(
        False, description=(
            "EliCal's stage 2 (full, mixed, l2sp, head): before its first epoch, stage 1's logit is mapped through "
            "a logistic fit on the stage's training labels (a * logit + b, a >= 0, as stage2 platt) folded into "
            "the head's last layer, so training starts from confidences near the accuracy with stage 1's ranking. "
            "Without it an MLP head fitted to self-consistency (mostly above 0.5) outputs about 0.5 wherever its "
            "last ReLU layer is silent, and stage 2 lowers confidences by silencing units: questions pile up on "
            "that constant (benchmarks/results/world_stage2_collapse_cpu.md). Recorded only when on, and only in EliCal's "
            "stage-2 settings (Eli-Only, Cal-Only and stage 1 keep their digests)"))
    val_fraction: Annotated[float, Range(0, 1, low_open=True, high_open=True)] = 0.1
    # optimisation
    loss: Literal["mse", "bce"] = "mse"
    lr: Annotated[float, Range(0, low_open=True), Output.PER_STAGE] = 5e-5
    lr_stage2: Annotated[Annotated[float, Range(0, low_open=True, note="null: lr")] | None, Output.PER_STAGE] = None
    lr_head_only: Annotated[float, Range(0, low_open=True), Output.PER_STAGE] = 1e-3
    weight_decay: Annotated[float, Range(0)] = 0.1
    warmup_ratio: Annotated[float, Range(0, 1)] = Field(0.1, description="share of a stage's steps in lr warm-up")
    # a negative norm would flip the gradient
    max_grad_norm: Annotated[float, Range(0, note="0: no clipping"), Output.LORA] = 1.0
    epochs_stage1: Annotated[int, Range(1), Output.PER_STAGE] = 10
    epochs_stage2: Annotated[Annotated[int, Range(1, note="null: the authors' rule")] | None, Output.PER_STAGE] = Field(
        None, description="None: 50 when <= 10k labels, else 15 (authors)")
    patience: Annotated[int, Range(1)] = Field(4, description="epochs after warm-up that stop a stage early (see selection)")
    selection: Literal["noise-aware", "best", "last"] = Field(
        "noise-aware", description=(
            "which epoch a stage keeps (never one that ends inside the lr warm-up). noise-aware: the lowest "
            "validation MSE only if it beats the last epoch by more than selection_z paired standard errors, "
            "else the last; early stop after `patience` epochs in a row clearly worse than the lowest. best: "
            "lowest validation MSE, early stop after `patience` epochs without a lower one. last: no early stop"))
    selection_z: Annotated[float, Range(0)] = Field(2.0, description="standard errors that make a validation difference clear")
    batch_size: Annotated[int, Range(1)] = 512
    micro_batch_size: Annotated[int, Range(1), Output.NEVER] = 16  # questions per forward when packing is off
    # speed
    packing: Annotated[bool, Output.NEVER] = True
    tokens_per_batch: Annotated[int, Range(1), Output.NEVER] = 8192
    row_length: Annotated[int, Range(1), Output.NEVER] = 1024
    compile: Annotated[bool | None, Output.NEVER] = Field(
        None, description="compile the model (None: on when training on CUDA)")
    compile_mode: Annotated[Literal["layers", "model", "reduce-overhead"], Output.NEVER] = Field(
        "layers", description=(
            "what `compile` compiles: layers (each decoder layer, dynamic shapes), model (the whole training "
            "forward), reduce-overhead (the whole training forward replayed as CUDA graphs; micro-batches are "
            "padded to static shapes, so it needs packing)"))
    lora_dtype: Annotated[Literal["float32", "bf16"], Output.NEVER] = Field(
        "float32", description=(
            "bf16: the forward reads bf16 copies of the float32 LoRA weights, made once per optimizer step in "
            "one batched cast, instead of autocast casting each weight in each forward (same numbers; "
            "float32 weights, gradients and AdamW states are kept); needs a bf16 backbone and one process"))
    fused_optimizer: Annotated[bool, Output.NEVER] = Field(
        False, description="AdamW's fused kernel (torch.optim.AdamW(fused=True))")
    mixed_precision: Annotated[Literal["auto", "no", "bf16", "fp16"], Output.PER_STAGE] = "auto"
    save_steps: Annotated[int, Range(0, note="0: at epoch ends only"), Output.NEVER] = Field(
        200, description="optimizer steps between mid-epoch checkpoints (0: epoch ends only)")

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _yaml_no(cls, value: object) -> object:
        """YAML reads a bare ``no`` as false; it means accelerate's 'no' here."""
        return "no" if value is False else value

    @model_validator(mode="after")
    def _graphs_need_packing(self) -> Self:
        if self.compile_mode == "reduce-overhead" and not self.packing:
            raise ValueError("compile_mode reduce-overhead needs packing: true (CUDA graphs need the static "
                             "micro-batch shapes of packed rows)")
        return self


class TrainConfig(PromptFields, TrainSettings):
    """Settings of one training run: the trainer's settings plus what one model is (base model, mode,
    seed, label budget, prompts) and where it is written."""

    model: str = Field("", description="Hugging Face causal LM: local folder or hub name")
    mode: Annotated[Mode, Output.PER_STAGE] = "elical"  # recorded by the run (trainer._run_settings), not its stages
    output_dir: Annotated[str, Output.NEVER] = "runs/train"
    seed: Seed = 0
    budget: Annotated[Annotated[int, Range(1, note="null: all")] | None, Output.CALIBRATION] = Field(
        None, description="labelled questions for calibration (None: all)")

    @model_validator(mode="after")
    def _compile_needs_lora(self) -> TrainConfig:
        if self.mode == "head-only" and self.compile:
            raise ValueError("compile applies to LoRA training, not to head-only mode")
        if self.mode == "head-only" and self.lora_dtype != "float32":
            raise ValueError("lora_dtype applies to LoRA training, not to head-only mode")
        if self.mode != "elical" and self.stage2 not in ("full", TrainSettings.model_fields["stage2"].default):
            raise ValueError(f"stage2 {self.stage2} applies to mode elical (its calibration stage), not to mode {self.mode}")
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
        fields = self.model_dump(include=set(ModelFields.model_fields) | set(PromptFields.model_fields))
        return ModelConfig(base_model=self.model, lora=self.mode != "head-only", **fields)

    def stage2_epochs(self, n_labels: int) -> int:
        """Epochs for calibration (:func:`stage2_epochs`): as set, else the authors' 50 (<= 10k labels) or 15."""
        return stage2_epochs(n_labels, self.epochs_stage2)
