"""One training stage with accelerate: packed micro-batches, AdamW + linear warmup/decay, validation
each epoch (MSE and AUROC, recorded) for model selection and early stopping (elical.train.selection),
NaN guard, resumable checkpoints.

Runs unchanged on one CPU/GPU, under ``accelerate launch`` with DDP on several GPUs or machines, and
with FSDP (see ``elical/train/accelerate_fsdp.yaml``): the Accelerator does all process management.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from elical.train.batching import make_batches, pad_batch, static_rows
from elical.train.checkpoint import StageState, load_checkpoint, save_checkpoint
from elical.train.config import TrainConfig
from elical.train.predict import predict_logits, sigmoid
from elical.train.selection import Selector, one_class_note, validation_metrics
from elical.train.speed import StepSpeed, compiling, step_speed


class TrainingError(RuntimeError):
    """Training stopped (non-finite loss); the message says where the last good checkpoint is."""


@dataclass
class StageData:
    """Tokenized prompts of all records, targets, and this stage's train/validation indices.

    ``labels``: 0/1 correctness per record (NaN where unknown), for the validation AUROC only."""

    seqs: list[list[int]]
    targets: list[float]
    train: list[int]
    val: list[int]
    pad_id: int
    labels: list[float] | None = None

    def val_labels(self) -> list[float] | None:
        """Correctness of the validation questions, or None."""
        return None if self.labels is None else [self.labels[i] for i in self.val]


@dataclass
class Stage:
    """Name (also the folder), epochs and learning rate of a stage; ``fingerprint`` is the digest of
    its settings, which a checkpoint must carry to be resumed. ``l2sp``: alpha of an L2-SP penalty
    (alpha / 2) * sum ||w - w_start||^2 on every trainable weight, w_start its value when the stage starts
    (EliCal's stage 2 l2sp: stage 1's); 0, none. The recorded train loss includes it. ``refit``: the stage
    starts from the model's logit Platt-refitted to its targets (EliCal's stage 2 with ``stage2_refit``)."""

    name: str
    epochs: int
    lr: float
    fingerprint: str = ""
    l2sp: float = 0.0
    refit: bool = False


def per_question_loss(logits: torch.Tensor, target: torch.Tensor, kind: str) -> torch.Tensor:
    """MSE between sigmoid(logit) and the target (default), or BCE on soft targets."""
    if kind == "mse":
        return (torch.sigmoid(logits) - target) ** 2
    return F.binary_cross_entropy_with_logits(logits, target, reduction="none")


Anchor = list[tuple[torch.nn.Parameter, torch.Tensor]]  # (trainable weight, its value where the stage started)


def l2sp_anchor(model: torch.nn.Module) -> Anchor:
    """Each trainable weight of ``model`` with a copy of its value now (the L2-SP penalty's centre)."""
    return [(p, p.detach().clone()) for p in model.parameters() if p.requires_grad]


def l2sp_penalty(anchor: Anchor, alpha: float) -> torch.Tensor:
    """(alpha / 2) * sum over weights of ||w - w_anchor||^2 (float32)."""
    with torch.no_grad():
        terms = [(p.float() - a.float()).pow(2).sum() for p, a in anchor]
    return 0.5 * alpha * (torch.stack(terms).sum() if terms else torch.zeros(()))


def add_l2sp_grad(anchor: Anchor, alpha: float) -> torch.Tensor:
    """Add the L2-SP penalty's gradient, alpha * (w - w_anchor), to each weight's gradient (as if the penalty
    were in the loss: the loss's gradient is already reduced over processes, and the penalty's is the same on
    each, or each one's shard of it under FSDP); returns this process's part of the penalty."""
    with torch.no_grad():
        for p, a in anchor:
            step = (p - a.to(p.dtype)) * alpha
            if p.grad is None:
                p.grad = step
            else:
                p.grad.add_(step.to(p.grad.dtype))
    return l2sp_penalty(anchor, alpha)


def refit_head(head: torch.nn.Module, logits: Sequence[float], targets: Sequence[float]) -> dict[str, float] | None:
    """``stage2_refit``: fold the Platt fit of ``targets`` (soft labels) on ``logits`` into the head's last
    linear layer, so it outputs a * logit + b (elical.train.platt, the fit of ``stage2: platt``). Returns
    {"a", "b"}, or None (head unchanged) where the fit is undefined (every target alike) or would flatten
    the ranking (a == 0)."""
    import numpy as np

    from elical.core.inputs import InputError
    from elical.train.platt import fit_platt, fold_into_head

    try:
        a, b = fit_platt(np.asarray(logits, dtype=float), np.asarray(targets, dtype=float))
    except InputError:
        return None
    if a <= 0:
        return None
    fold_into_head(head, a, b)
    return {"a": a, "b": b}


def epoch_batches(train: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """The seeded shuffle of an epoch cut into optimizer batches (reproducible, so resume can skip)."""
    order = list(train)
    random.Random(seed * 100_003 + epoch).shuffle(order)
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def _optimizer(model: torch.nn.Module, lr: float, weight_decay: float, fused: bool = False) -> torch.optim.Optimizer:
    """AdamW, weight decay on matrices only; ``fused``: its one-kernel implementation (a resumed stage
    keeps the one its checkpoint was saved with)."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for _, param in model.named_parameters():
        if param.requires_grad:
            (decay if param.ndim >= 2 else no_decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, fused=fused or None)


def validation_confidences(wrapped, data: StageData, cfg: TrainConfig, accelerator) -> list[float]:
    """Confidence of each validation question, in ``data.val`` order."""
    logits = predict_logits(wrapped, data.seqs, data.val, data.pad_id, 2 * cfg.tokens_per_batch,
                            cfg.row_length, accelerator)
    return [sigmoid(logits[i]) for i in data.val]


SaveBest = Callable[[Any, Path, dict[str, Any]], None]  # (prepared model, folder, info)


def run_stage(model, data: StageData, stage: Stage, cfg: TrainConfig, accelerator, stage_dir: Path,
              save_best: SaveBest, show_progress: bool = True) -> dict[str, Any]:
    """Train one stage; ``save_best(wrapped, path, info)`` writes the selected model. Returns a summary.

    Every epoch (and once before the first, as epoch 0) the validation MSE and AUROC are recorded in
    ``history.json``; the model kept is chosen by :class:`elical.train.selection.Selector`. A finished
    stage (``done.json``) returns its summary: the trainer has checked that its settings match."""
    done_file = stage_dir / "done.json"
    if done_file.exists():
        return json.loads(done_file.read_text())
    if not data.train or not data.val:
        raise ValueError(f"{stage.name}: empty training or validation split")
    refit = _refit_start(model, data, stage, cfg, accelerator) if stage.refit else None
    run = _prepare(model, data, stage, cfg, accelerator, stage_dir, save_best)
    note = one_class_note(run.val_targets, data.val_labels())
    if note:  # said once, not as 'val AUROC nan' every epoch
        accelerator.print(f"{stage.name}: {note}")
    if not run.state.history:  # epoch 0: where the stage starts from
        run.state.last_confidences = _validate(run, 0, None)
    _train_epochs(run, show_progress)
    summary = _select(run)
    if refit is not None:
        summary["refit"] = refit
    _write_history(stage_dir, run.state.history, accelerator)
    if accelerator.is_main_process:
        done_file.write_text(json.dumps(summary, indent=1))
    accelerator.wait_for_everyone()
    return summary


def _refit_start(model, data: StageData, stage: Stage, cfg: TrainConfig, accelerator) -> dict[str, float] | None:
    """``stage2_refit``: the unprepared model's logits on the training questions (each process computes all of
    them, so every process folds the same map), refitted to their targets in the head (:func:`refit_head`).
    A resumed stage redoes it; its checkpoint's weights then replace the model's."""
    logits = predict_logits(model, data.seqs, data.train, data.pad_id, 2 * cfg.tokens_per_batch, cfg.row_length)
    refit = refit_head(model.head, [logits[i] for i in data.train], [data.targets[i] for i in data.train])
    if refit is None:
        accelerator.print(f"{stage.name}: stage2_refit skipped (its training targets give no increasing map)")
    else:
        accelerator.print(f"{stage.name}: starts from stage 1's logit refitted to the labels: "
                          f"{refit['a']:.3f} x logit {refit['b']:+.3f}")
    return refit


@dataclass
class _StageRun:
    """What the steps of one stage share: its inputs, the prepared model, optimizer and schedule, the
    resumable state and the selection rule."""

    data: StageData
    stage: Stage
    cfg: TrainConfig
    accelerator: Any
    stage_dir: Path
    save_best: SaveBest
    wrapped: Any
    optimizer: Any
    scheduler: Any
    state: StageState
    selector: Selector
    warmup: int
    total: int
    speed: StepSpeed
    anchor: Anchor | None = None  # stage.l2sp: the weights where the stage started

    @property
    def ckpt(self) -> Path:
        return self.stage_dir / "checkpoint"

    @property
    def val_targets(self) -> list[float]:
        return [self.data.targets[i] for i in self.data.val]


def _prepare(model, data: StageData, stage: Stage, cfg: TrainConfig, accelerator, stage_dir: Path,
             save_best: SaveBest) -> _StageRun:
    """Optimizer, warm-up schedule and selector of the stage, the model prepared by accelerate (compiled
    on CUDA), and the state of its checkpoint when there is one (which must be of these settings)."""
    from transformers import get_linear_schedule_with_warmup

    steps_per_epoch = math.ceil(len(data.train) / cfg.batch_size)
    total = steps_per_epoch * stage.epochs
    warmup = math.ceil(cfg.warmup_ratio * total)
    selector = Selector(cfg.selection, warmup, cfg.patience, cfg.selection_z)
    optimizer = _optimizer(model, stage.lr, cfg.weight_decay, cfg.fused_optimizer)
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total)
    if compiling(cfg, accelerator.device) and cfg.compile_mode == "layers":
        model.compile_layers()  # 1.3x on a 7B model (benchmarks/bench_train.py); a minute to compile
    wrapped, optimizer = accelerator.prepare(model, optimizer)
    speed = step_speed(wrapped, cfg, accelerator)
    anchor = l2sp_anchor(wrapped) if stage.l2sp else None  # before a checkpoint moves the weights on
    ckpt = stage_dir / "checkpoint"
    state = load_checkpoint(ckpt, accelerator, wrapped, optimizer, scheduler) or StageState(fingerprint=stage.fingerprint)
    if state.fingerprint != stage.fingerprint:
        raise ValueError(f"{ckpt} holds a checkpoint of a different run (other data, model or settings); "
                         f"use another output folder or rerun with --overwrite")
    if state.global_step:
        accelerator.print(f"{stage.name}: resuming from {ckpt} (epoch {state.epoch + 1}, "
                          f"step {state.step_in_epoch}/{steps_per_epoch})")
    return _StageRun(data, stage, cfg, accelerator, stage_dir, save_best, wrapped, optimizer, scheduler, state,
                     selector, warmup, total, speed, anchor)


def _validate(run: _StageRun, epoch: int, train_loss: float | None) -> list[float]:
    """Validation confidences now; their MSE and AUROC go into the stage's history as ``epoch``."""
    state = run.state
    conf = validation_confidences(run.wrapped, run.data, run.cfg, run.accelerator)
    state.history.append({"epoch": epoch, "step": state.global_step, "lr": run.scheduler.get_last_lr()[0],
                          "train_loss": train_loss,
                          **validation_metrics(conf, run.val_targets, run.data.val_labels())})
    return conf


def _train_epochs(run: _StageRun, show_progress: bool) -> None:
    """The stage's remaining epochs (from a checkpoint's step on), each ended by :func:`_end_epoch`."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    state, accelerator = run.state, run.accelerator
    targets = torch.tensor(run.data.targets, dtype=torch.float32)
    run.wrapped.train()
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
               TextColumn("{task.fields[info]}")]
    with Progress(*columns, disable=not (show_progress and accelerator.is_main_process)) as bar:
        task = bar.add_task(run.stage.name, total=run.total, completed=state.global_step, info="")
        for epoch in range(state.epoch, state.epoch if state.stopped else run.stage.epochs):
            batches = epoch_batches(run.data.train, run.cfg.batch_size, run.cfg.seed, epoch)
            for step in range(state.step_in_epoch, len(batches)):
                _optimizer_step(run, batches[step], targets, epoch, step)
                bar.update(task, advance=1, info=f"epoch {epoch + 1} loss {state.loss_sum / state.loss_steps:.4f}")
                if run.cfg.save_steps and state.global_step % run.cfg.save_steps == 0 and step + 1 < len(batches):
                    _check_finite(run.wrapped, run.stage, epoch, step, run.ckpt, run.stage_dir)
                    save_checkpoint(run.ckpt, accelerator, run.wrapped, run.optimizer, run.scheduler, state)
            _end_epoch(run, epoch, len(batches))


def _optimizer_step(run: _StageRun, batch: list[int], targets: torch.Tensor, epoch: int, step: int) -> None:
    """One optimizer step on ``batch`` (stops on a non-finite loss), counted in the stage's state."""
    accelerator, state = run.accelerator, run.state
    loss = _train_step(run.wrapped, batch, accelerator.process_index, accelerator.num_processes, run.data, targets,
                       run.cfg, accelerator, run.speed)
    if run.anchor is not None:
        loss += _l2sp_step(run)
    if not math.isfinite(loss):
        run.optimizer.zero_grad(set_to_none=not run.speed.static)
        raise _stopped(f"loss became {loss}", run.stage, epoch, step, run.ckpt, run.stage_dir)
    if run.cfg.max_grad_norm:
        accelerator.clip_grad_norm_(run.wrapped.parameters(), run.cfg.max_grad_norm)
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=not run.speed.static)  # CUDA graphs: see elical.train.speed
    state.loss_sum += loss
    state.loss_steps += 1
    state.global_step += 1
    state.step_in_epoch = step + 1


def _l2sp_step(run: _StageRun) -> float:
    """The L2-SP penalty's gradient added (:func:`add_l2sp_grad`); its value, summed over FSDP's shards."""
    from accelerate.utils import DistributedType

    assert run.anchor is not None
    penalty = add_l2sp_grad(run.anchor, run.stage.l2sp).to(run.accelerator.device)
    if run.accelerator.distributed_type == DistributedType.FSDP:
        penalty = run.accelerator.reduce(penalty, reduction="sum")
    return float(penalty)


def _end_epoch(run: _StageRun, epoch: int, n_batches: int) -> None:
    """Validate, keep the model when it is the lowest after warm-up, count epochs towards early stopping,
    checkpoint and record the history."""
    state, stage, accelerator = run.state, run.stage, run.accelerator
    _check_finite(run.wrapped, stage, epoch, n_batches - 1, run.ckpt, run.stage_dir)
    train_loss = state.loss_sum / state.loss_steps if state.loss_steps else float("nan")
    conf = _validate(run, epoch + 1, train_loss)
    val = state.history[-1]["val_mse"]
    eligible = run.selector.eligible(state.global_step)
    improved = eligible and val < state.best_val
    if improved:
        state.best_val, state.best_epoch, state.best_confidences = val, epoch + 1, conf
        run.save_best(run.wrapped, run.stage_dir / "best", {"stage": stage.name, "epoch": epoch + 1,
                                                            **_validation_of(state.history[-1])})
    if eligible:
        state.bad_epochs = run.selector.bad_epochs(state.bad_epochs, improved, state.best_confidences, conf,
                                                   run.val_targets)
    state.last_confidences = conf
    state.epoch, state.step_in_epoch, state.loss_sum, state.loss_steps = epoch + 1, 0, 0.0, 0
    state.stopped = state.bad_epochs >= run.cfg.patience
    save_checkpoint(run.ckpt, accelerator, run.wrapped, run.optimizer, run.scheduler, state)
    _write_history(run.stage_dir, state.history, accelerator)
    auroc = state.history[-1]["val_auroc"]
    shown = f", val AUROC {auroc:.3f}" if math.isfinite(auroc) else ""
    accelerator.print(f"{stage.name} epoch {epoch + 1}: train loss {train_loss:.4f}, val MSE {val:.4f}"
                      f"{shown}{' (lowest after warm-up)' if improved else ''}")
    if state.stopped:
        accelerator.print(f"{stage.name}: early stop after {run.cfg.patience} epochs {run.selector.stop_reason()}")


def _validation_of(row: dict[str, Any]) -> dict[str, Any]:
    """An epoch's validation numbers, as a saved model records them (and its model card shows); an undefined
    AUROC (one class) is None, which JSON can hold."""
    auroc = row["val_auroc"]
    return {"val_mse": row["val_mse"], "val_auroc": auroc if math.isfinite(auroc) else None,
            "val_auroc_against": row["val_auroc_against"]}


def _select(run: _StageRun) -> dict[str, Any]:
    """The epoch the selector keeps (saved as ``best`` when it is not the lowest one, already saved) and
    the stage's summary."""
    state, stage, cfg, data = run.state, run.stage, run.cfg, run.data
    chosen, reason = run.selector.final(state.best_epoch, state.epoch, state.best_confidences, state.last_confidences,
                                        run.val_targets)
    row = next(h for h in state.history if h["epoch"] == chosen)
    chosen_val = row["val_mse"]
    if chosen != state.best_epoch:  # the model in memory is the last epoch's
        run.save_best(run.wrapped, run.stage_dir / "best", {"stage": stage.name, "epoch": chosen,
                                                            **_validation_of(row), "reason": reason})
    run.accelerator.print(f"{stage.name}: keeps epoch {chosen} ({reason})")
    return {"stage": stage.name, "best_val_mse": chosen_val, "best_epoch": chosen, "selection": reason,
            "selection_rule": cfg.selection, "lowest_val_epoch": state.best_epoch, "warmup_steps": run.warmup,
            "epochs_run": state.epoch, "steps": state.global_step, "history": state.history,
            "train_size": len(data.train), "val_size": len(data.val), "best": str(run.stage_dir / "best")}


def _write_history(stage_dir: Path, history: list[dict[str, Any]], accelerator) -> None:
    """The stage's per-epoch record, readable while it trains."""
    if accelerator.is_main_process:
        (stage_dir / "history.json").write_text(json.dumps(history, indent=1))


def _stopped(what: str, stage: Stage, epoch: int, step: int, ckpt: Path, stage_dir: Path) -> TrainingError:
    kept = f"the last good checkpoint is {ckpt}" if ckpt.exists() else "no checkpoint was written yet"
    return TrainingError(
        f"{stage.name}: {what} at epoch {epoch + 1}, step {step + 1}; training stopped and nothing non-finite "
        f"was saved; {kept} (best model so far: {stage_dir / 'best'}). Check the targets; to try a lower "
        f"learning rate than lr={stage.lr}, rerun with it and --overwrite (or into a new folder)."
    )


def _check_finite(wrapped, stage: Stage, epoch: int, step: int, ckpt: Path, stage_dir: Path) -> None:
    """Refuse to checkpoint weights that overflowed (a finite loss can precede non-finite weights)."""
    with torch.no_grad():
        bad = [n for n, p in wrapped.named_parameters() if p.requires_grad and not torch.isfinite(p).all()]
    if bad:
        raise _stopped(f"weights became non-finite ({bad[0]})", stage, epoch, step, ckpt, stage_dir)


def _train_step(wrapped, batch: list[int], rank: int, world: int, data: StageData, targets: torch.Tensor,
                cfg: TrainConfig, accelerator, speed: StepSpeed | None = None) -> float:
    """Forward/backward over this process's share of an optimizer batch; returns the global mean loss.

    ``speed`` (default: the plain forward of ``wrapped``) may compile it, pad its micro-batches to static
    shapes and give it bf16 LoRA copies (:mod:`elical.train.speed`); the loss and gradients are the same."""
    speed = speed or StepSpeed(wrapped)
    shard = batch[rank::world]
    weight = 1.0
    if not shard:  # a short last batch: take part in the gradient sync with zero weight
        shard, weight = batch[:1], 0.0
    micro = make_batches(data.seqs, shard, data.pad_id, packing=cfg.packing,
                         tokens_per_batch=cfg.tokens_per_batch, row_length=cfg.row_length,
                         batch_size=cfg.micro_batch_size, trim_tail=not speed.static)
    if speed.static:  # every question count of a step fits one shape: this process's share of a full batch
        most = math.ceil(cfg.batch_size / world)
        micro = [pad_batch(mb, static_rows(len(mb.input_ids), max(1, cfg.tokens_per_batch // mb.input_ids.shape[1])),
                           most, data.pad_id) for mb in micro]
    total = torch.zeros((), device=accelerator.device)
    with speed.step():
        for j, mb in enumerate(micro):
            sync = accelerator.no_sync(wrapped) if j < len(micro) - 1 else nullcontext()
            with sync:
                logits = speed.forward(**mb.to(accelerator.device).model_inputs())[:len(mb.order)]
                target = targets[mb.order].to(logits.device)
                loss = per_question_loss(logits, target, cfg.loss).sum() * (weight / len(shard))
                accelerator.backward(loss)
                speed.after_backward(first=j == 0)
            total += loss.detach()
    return float(accelerator.reduce(total, reduction="mean"))
