"""`elical train`: plan the data of each mode, then run its stages.

Modes: ``eli-only`` (stage 1: self-consistency targets on the whole pool), ``cal-only`` (correctness
targets on the labelled budget, from scratch), ``elical`` (stage 1, then stage 2 from the selected
stage-1 model with LoRA AND head trainable), ``head-only`` (frozen backbone, cached features).
Everything a mode needs is checked before any model is loaded.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elical.records import Record, read_records
from elical.train.budgets import budget_subset, split_validation
from elical.train.config import TrainConfig
from elical.train.targets import has_target, require_targets, target_kind, target_value


@dataclass
class StagePlan:
    """Targets (per record; None where unused) and train/val indices of one stage."""

    targets: list[float | None]
    train: list[int]
    val: list[int]


def plan_stages(records: Sequence[Record], cfg: TrainConfig) -> dict[str, StagePlan]:
    """The data of each stage of ``cfg.mode``: 'eli' and/or 'cal' (errors name what is missing)."""
    needs = {"eli-only": ["eli"], "cal-only": ["cal"], "elical": ["eli", "cal"],
             "head-only": [cfg.head_only_target]}[cfg.mode]
    plans: dict[str, StagePlan] = {}
    for stage in needs:
        kind = target_kind(stage, cfg.cal_target)
        what = f"mode {cfg.mode} ({'elicitation' if stage == 'eli' else 'calibration'} stage)"
        if stage == "eli":
            require_targets(records, kind, what)  # every pool question needs its consistency
            pool = list(range(len(records)))
        else:
            labelled = [i for i, r in enumerate(records) if has_target(r, kind)]
            if not labelled:
                require_targets(records, kind, what)  # raises: none is labelled
            chosen = budget_subset([records[i] for i in labelled], cfg.budget, cfg.seed)
            pool = [labelled[i] for i in chosen]
        targets = [target_value(r, kind) if has_target(r, kind) else None for r in records]
        train, val = split_validation(pool, records, cfg.val_fraction, cfg.seed)
        plans[stage] = StagePlan(targets, train, val)
    return plans


def _mixed_precision(cfg: TrainConfig) -> str:
    import torch

    if cfg.mixed_precision != "auto":
        return cfg.mixed_precision
    return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "no"


def train(cfg: TrainConfig, inputs: Sequence[str], show_progress: bool = True) -> dict[str, Any]:
    """Run the training of ``cfg.mode`` on the records in ``inputs``; the model lands in output_dir/model."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedType, set_seed

    from elical.model import ConfidenceModel
    from elical.provenance import provenance
    from elical.train.batching import tokenize_prompts
    from elical.train.head_only import cached_features, train_head
    from elical.train.loop import Stage, StageData, run_stage
    from elical.train.predict import record_prompts

    if not cfg.model:
        raise ValueError("no model given: set `model` (a Hugging Face causal LM folder or name)")
    records = read_records(list(inputs))
    plans = plan_stages(records, cfg)  # all input errors surface here, before any model is loaded
    out = Path(cfg.output_dir)
    accelerator = Accelerator(mixed_precision=_mixed_precision(cfg))
    set_seed(cfg.seed)
    run_info = {"config": cfg.model_dump(), "seed": cfg.seed, "inputs": [str(p) for p in inputs],
                "num_processes": accelerator.num_processes, "provenance": provenance()}
    if accelerator.is_main_process:
        cfg.to_yaml(out / "train_config.yaml")
        (out / "run.json").write_text(json.dumps(run_info, indent=1, default=str))
    fsdp = accelerator.distributed_type == DistributedType.FSDP
    load_device = "cpu" if fsdp else accelerator.device
    model = ConfidenceModel.create(cfg.model_settings(), device=load_device)
    seqs, truncated = tokenize_prompts(model.tokenizer, record_prompts(model, records), cfg.max_length)
    if truncated:
        accelerator.print(f"note: {truncated} prompt(s) longer than max_length={cfg.max_length} keep their last tokens")
    pad_id = model.tokenizer.pad_token_id

    def data_of(stage: str) -> StageData:
        plan = plans[stage]
        return StageData(seqs, [t if t is not None else float("nan") for t in plan.targets],
                         plan.train, plan.val, pad_id)

    def save_best(wrapped, path: Path, info: dict[str, Any]) -> None:
        state_dict = accelerator.get_state_dict(wrapped) if fsdp else None
        if accelerator.is_main_process:
            accelerator.unwrap_model(wrapped).save(path, {"train": run_info, "selection": info}, state_dict)
        accelerator.wait_for_everyone()

    summaries = []
    n_labels = len(plans["cal"].train) + len(plans["cal"].val) if "cal" in plans else 0
    if cfg.mode == "head-only":
        stage = cfg.head_only_target
        data = data_of(stage)
        features = cached_features(model, data, cfg, out / "cache", accelerator, show_progress)
        epochs = cfg.stage2_epochs(n_labels) if stage == "cal" else cfg.epochs_stage1
        summaries.append(train_head(model, data, cfg, features, epochs, out / "head-only", save_best))
        last = out / "head-only"
    else:
        if cfg.mode in ("eli-only", "elical"):
            stage1 = Stage("stage1-eli", cfg.epochs_stage1, cfg.lr)
            summaries.append(run_stage(model, data_of("eli"), stage1, cfg, accelerator, out / stage1.name,
                                       save_best, show_progress))
            last = out / stage1.name
        if cfg.mode == "elical":
            # Stage 2 starts from the selected stage-1 model, LoRA and head trainable (reference.md 7.2).
            accelerator.free_memory()
            del model
            model = ConfidenceModel.load(last / "best", device=load_device, base_model=cfg.model, trainable=True)
        if cfg.mode in ("cal-only", "elical"):
            name = "stage2-cal" if cfg.mode == "elical" else "cal-only"
            stage2 = Stage(name, cfg.stage2_epochs(n_labels), cfg.lr_stage2 or cfg.lr)
            summaries.append(run_stage(model, data_of("cal"), stage2, cfg, accelerator, out / name,
                                       save_best, show_progress))
            last = out / name
    result = {**run_info, "stages": summaries, "model": str(out / "model"),
              "is_main_process": accelerator.is_main_process}
    if accelerator.is_main_process:
        if (out / "model").exists():
            shutil.rmtree(out / "model")
        shutil.copytree(last / "best", out / "model")
        (out / "train_summary.json").write_text(json.dumps(result, indent=1, default=str))
    accelerator.wait_for_everyone()
    return result
