"""`elical run`'s training work: one planned model's trainer settings, its training and its predictions,
and the plan's models trained ``train.workers`` at a time (the train step of run/steps/sequence.py drives it)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from elical.core.inputs import InputError
from elical.model.key import ModelKey
from elical.run.config import RunConfig, planned_models
from elical.run.folder import RunFolder
from elical.run.subjects.subject import Subject

if TYPE_CHECKING:
    from elical.train.config import TrainConfig
    from elical.train.label_selection import LabelOrder


def train_config(cfg: RunConfig, subject: Subject, folder: RunFolder, key: ModelKey, pool_size: int) -> TrainConfig:
    """The trainer's settings for one planned model: the plan's (its stage-2 recipe for EliCal only: the
    key's for a recipe candidate), with the model's method, budget and seed, the subject's model and prompt
    wording, and the plan's calibration epochs for its labels."""
    from elical.train.config import ELICAL_STAGE2, TrainConfig

    settings = cfg.train.settings.model_dump(exclude=set() if key.method == "elical" else ELICAL_STAGE2)
    if key.stage2 is not None:
        settings["stage2"] = key.stage2
    # the same wording the questions were answered with (records carry their rendered prompt too)
    prompts = cfg.annotate.prompts.model_copy(update=subject.prompts)
    if key.method in ("cal-only", "elical", "head-only"):
        epochs = cfg.train.stage2_epochs(key.labels(pool_size))
        if epochs is not None:
            settings["epochs_stage2"] = epochs
    return TrainConfig(
        **{**settings, "model": subject.model, "mode": key.method, "seed": key.seed,
           "output_dir": str(folder.model(key)),
           "budget": None if key.budget is None or key.budget == "all" else int(key.budget),
           "system_prompt": prompts.system or None, "qa_template": prompts.qa}
    )


def stage1_source(folder: RunFolder, key: ModelKey) -> Path | None:
    """Where EliCal's stage 1 comes from: Eli-Only's training of the same seed, for every recipe candidate
    alike (the trainer checks its settings are EliCal's stage-1 settings). None for other methods, and for an
    EliCal folder of an earlier elical version that holds its own copy of that stage."""
    if key.method != "elical" or (folder.model(key) / "stage1-eli" / "done.json").exists():
        return None
    return folder.model(ModelKey("eli-only", None, key.seed))


def label_order(cfg: RunConfig, folder: RunFolder, key: ModelKey) -> LabelOrder | None:
    """The order ``key``'s labels are the first of: its strategy (:meth:`TrainPlan.strategy_of`) applied to the pool with the Eli-Only model
    of its seed (computed once per seed and kept in that model's folder as ``selection-<strategy>.json``); None
    where the labels are today's random draw (see :meth:`TrainPlan.selects_labels`)."""
    if not cfg.train.selects_labels(key):
        return None
    from elical.records import read_records
    from elical.train.label_selection import cached_label_order

    strategy = cfg.train.strategy_of(key)
    eli = ModelKey("eli-only", None, key.seed)
    return cached_label_order(read_records([str(folder.pool)]), folder.weights(eli), strategy=strategy, seed=key.seed,
                              cache=folder.model(eli) / f"selection-{strategy}.json", device=cfg.annotate.device)


def check_budgets(cfg: RunConfig, pool_size: int, what: str) -> None:
    """Refuse label budgets larger than the training pool (``pool_size`` questions, described by ``what``)."""
    too_big = [b for b in cfg.train.budgets if b != "all" and b > pool_size]
    if too_big:
        raise InputError(f"train.budgets: {too_big} exceed the {pool_size} {what}; lower train.budgets or raise "
                         "questions.max_train (or give more pool questions)")


def train_model(cfg: RunConfig, subject: Subject, folder: RunFolder, key: ModelKey, pool_size: int,
                log: Callable[[str], None]) -> Path:
    """Train one confidence model and write its predictions on the evaluation records, key included
    (skipped when they exist); returns the prediction file."""
    from elical.train.predict import predict_files
    from elical.train.trainer import train

    scores = folder.score_file(key)
    if scores.exists():
        return scores
    tcfg = train_config(cfg, subject, folder, key, pool_size)
    start = time.perf_counter()
    trained = train(tcfg, [str(folder.pool)], show_progress=False, init_from=stage1_source(folder, key),
                    label_order=label_order(cfg, folder, key))
    predict_files(trained.model, [str(folder.evaluation_records)], scores, method=key.name,
                  device=cfg.annotate.device, key=key)
    log(f"train: {key.name} in {time.perf_counter() - start:.1f}s")
    return scores


def train_parallel(cfg: RunConfig, subject: Subject, folder: RunFolder, pool_size: int,
                   log: Callable[[str], None], model_done: Callable[[], None]) -> dict[ModelKey, Path]:
    """The plan's models, ``cfg.train.workers`` at a time in spawned processes; an EliCal model starts once
    the Eli-Only model of its seed (its stage 1) is done, and so does a Cal-Only one whose labels it selects. A failed model stops the step with its error."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    waiting = planned_models(cfg)
    made: dict[ModelKey, Path] = {}
    running: dict[Future[tuple[Path, float]], ModelKey] = {}
    threads = cfg.torch_threads or max(1, (os.cpu_count() or 1) // cfg.train.workers)
    context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    with ProcessPoolExecutor(cfg.train.workers, mp_context=context, initializer=_worker_threads,
                             initargs=(threads,)) as pool:
        while waiting or running:
            for key in [k for k in waiting if _stage1_done(cfg, k, made)]:
                waiting.remove(key)
                running[pool.submit(_timed_train_model, cfg, subject, folder, key, pool_size)] = key
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                key = running.pop(future)
                made[key], seconds = future.result()
                log(f"train: {key.name} in {seconds:.1f}s ({len(made)} done, {len(running)} queued or running)")
                model_done()
    return made


def _worker_threads(threads: int) -> None:
    """A training process's torch threads: its share of the cores, so workers do not oversubscribe them."""
    import torch

    torch.set_num_threads(threads)


def _timed_train_model(cfg: RunConfig, subject: Subject, folder: RunFolder, key: ModelKey,
                       pool_size: int) -> tuple[Path, float]:
    """:func:`train_model` in a training process: its prediction file and its own seconds (the run's process
    reports each model when it is done)."""
    start = time.perf_counter()
    return train_model(cfg, subject, folder, key, pool_size, lambda _: None), time.perf_counter() - start


def _stage1_done(cfg: RunConfig, key: ModelKey, made: Mapping[ModelKey, Path]) -> bool:
    """Whether ``key`` can start: EliCal, and Cal-Only whose labels a strategy selects, wait for the Eli-Only model
    of its seed."""
    waits = key.method == "elical" or cfg.train.selects_labels(key)
    return not waits or ModelKey("eli-only", None, key.seed) in made
