"""Head-only ablation: frozen backbone, final hidden states computed once and cached, then a linear or
MLP head trained on them (seconds, even for 7B backbones once the features exist)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import torch

from elical.train.config import TrainConfig
from elical.train.loop import Stage, StageData, TrainingError, epoch_batches, per_question_loss, refit_head
from elical.train.predict import last_token_outputs
from elical.train.selection import Selector, validation_metrics


def cached_features(model, data: StageData, cfg: TrainConfig, cache_dir: Path, accelerator,
                    show_progress: bool = True) -> torch.Tensor:
    """Features of all train+val questions, read from the cache (safetensors) when the same prompts were seen."""
    from safetensors.torch import load_file, save_file

    indices = sorted(set(data.train) | set(data.val))
    # lens adds columns (lens_top more of them): its features are cached apart
    reads = [cfg.model, *(["lens"] if cfg.lens else []), *(["lens_top"] if cfg.lens_top else [])]
    key = hashlib.sha1(json.dumps([*reads, [data.seqs[i] for i in indices]]).encode()).hexdigest()[:16]
    path = cache_dir / f"features-{key}.safetensors"
    if path.exists():
        return load_file(str(path))["features"]
    from rich.progress import Progress

    with Progress(disable=not (show_progress and accelerator.is_main_process), transient=True) as bar:
        task = bar.add_task("hidden states (computed once, cached)", total=len(indices))
        feats = last_token_outputs(model, data.seqs, indices, data.pad_id, 2 * cfg.tokens_per_batch, cfg.row_length,
                                   head=False, accelerator=accelerator, progress=lambda n: bar.advance(task, n))
    hidden = next(iter(feats.values())).shape[-1]
    table = torch.full((len(data.seqs), hidden), float("nan"))
    for i, value in feats.items():
        table[i] = value
    if accelerator.is_main_process:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        save_file({"features": table}, str(tmp))
        tmp.rename(path)
    return table


def train_head(model, data: StageData, cfg: TrainConfig, features: torch.Tensor, stage: Stage,
               stage_dir: Path, save_best) -> dict[str, Any]:
    """Train only the head on cached features with AdamW + warmup/decay; the model kept, early stopping
    and the recorded history (epoch 0 included) follow the same rule as LoRA stages (selection.Selector)."""
    from transformers import get_linear_schedule_with_warmup

    head = model.head
    device = next(head.parameters()).device
    refit = None
    if stage.refit:  # stage2 head with stage2_refit: stage 1's logit mapped to the labels first
        with torch.no_grad():
            logits = head(features[data.train].to(device)).squeeze(-1).float().cpu().tolist()
        refit = refit_head(head, logits, [data.targets[i] for i in data.train])
    torch.manual_seed(cfg.seed)
    params = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=stage.lr, weight_decay=cfg.weight_decay)
    total = math.ceil(len(data.train) / cfg.batch_size) * stage.epochs
    warmup = math.ceil(cfg.warmup_ratio * total)
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total)
    selector = Selector(cfg.selection, warmup, cfg.patience, cfg.selection_z)
    targets = torch.tensor(data.targets, dtype=torch.float32)
    val_x = features[data.val].to(device)
    val_targets = [data.targets[i] for i in data.val]
    history: list[dict[str, Any]] = []

    def validate(epoch: int, step: int, train_loss: float | None) -> list[float]:
        head.eval()
        with torch.no_grad():
            conf = torch.sigmoid(head(val_x).squeeze(-1)).tolist()
        history.append({"epoch": epoch, "step": step, "lr": scheduler.get_last_lr()[0], "train_loss": train_loss,
                        **validation_metrics(conf, val_targets, data.val_labels())})
        return conf

    last = validate(0, 0, None)
    best, best_epoch, best_conf, bad, step = math.inf, -1, last, 0, 0
    for epoch in range(stage.epochs):
        losses = _head_epoch(head, features, targets, data, cfg, optimizer, scheduler, epoch, stage, stage_dir)
        step += len(losses)
        last = validate(epoch + 1, step, sum(losses) / len(losses))
        val = history[-1]["val_mse"]
        if not selector.eligible(step):
            continue
        improved = val < best
        if improved:
            best, best_epoch, best_conf = val, epoch + 1, last
            save_best(model, stage_dir / "best", {"stage": stage.name, "epoch": epoch + 1, "val_mse": val})
        bad = selector.bad_epochs(bad, improved, best_conf, last, val_targets)
        if bad >= cfg.patience:
            break
    epochs_run = len(history) - 1
    chosen, reason = selector.final(best_epoch, epochs_run, best_conf, last, val_targets)
    chosen_val = history[chosen]["val_mse"]  # history[e] is epoch e
    if chosen != best_epoch:
        save_best(model, stage_dir / "best", {"stage": stage.name, "epoch": chosen, "val_mse": chosen_val,
                                              "reason": reason})
    return {"stage": stage.name, "best_val_mse": chosen_val, "best_epoch": chosen, "selection": reason,
            "selection_rule": cfg.selection, "lowest_val_epoch": best_epoch, "warmup_steps": warmup,
            "epochs_run": epochs_run, "steps": step, "history": history, "train_size": len(data.train),
            "val_size": len(data.val), "best": str(stage_dir / "best"), **({"refit": refit} if refit else {})}


def _head_epoch(head: torch.nn.Module, features: torch.Tensor, targets: torch.Tensor, data: StageData,
                cfg: TrainConfig, optimizer: torch.optim.Optimizer, scheduler: Any, epoch: int, stage: Stage,
                stage_dir: Path) -> list[float]:
    """One epoch of the head on cached features (seeded batches, as LoRA stages); the loss of each
    optimizer step. A non-finite loss stops training."""
    device = next(head.parameters()).device
    head.train()
    losses = []
    for batch in epoch_batches(data.train, cfg.batch_size, cfg.seed, epoch):
        x, y = features[batch].to(device), targets[batch].to(device)
        loss = per_question_loss(head(x).squeeze(-1), y, cfg.loss).mean()
        if not torch.isfinite(loss):
            raise TrainingError(f"head-only: loss became {loss.item()} at epoch {epoch + 1}; stopped. "
                                f"Best model so far: {stage_dir / 'best'}. Lower lr_head_only ({stage.lr}).")
        loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses
