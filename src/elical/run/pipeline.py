"""`elical run`: annotate -> baselines -> train (methods x budgets x seeds) -> evaluate -> report.

Run folder (architecture.md)::

    <out>/config.yaml            the resolved RunConfig
    <out>/annotate/              annotation shards, judge cache, records.parquet
    <out>/records/*.parquet      records per dataset and split; train.parquet is the calibration pool
    <out>/models/<method>-<budget>-s<seed>/   trained confidence models (train_summary.json, model/)
    <out>/scores/*.parquet       one prediction file per trained model, on the evaluation records
    <out>/metrics.csv            the evaluation table (per method, dataset, group, with CIs)
    <out>/results.csv            method, budget, seed, split, metric, value (one row per seed)
    <out>/differences.csv        EliCal - Cal-Only / - best training-free, per seed and seed-averaged, paired CIs
    <out>/report.md, report.html, table2.md, figures/*.png, timings.json
    <out>/honesty/               with a ``honesty:`` section: fine-tuning methods vs the EliCal gate
                                 (honesty_comparison.{csv,md,json}, answers.parquet, gate.json, adapters)
    <out>/retrieval/             with a ``retrieval:`` section: answers with passages, gated curve, index/
    <out>/settings/<step>.json   what decided each step's outputs (run/fingerprints.py)
    <out>/audit/                 written by `elical label-audit <out>`: the labelling sheet and page, and the
                                 judges' quality on the labels (quality.{md,json}), shown in the report

Every step skips work whose output exists, so a killed run continues where it stopped; a rerun with
settings that change a step's outputs is refused before anything is written (``--overwrite`` redoes
the changed steps), and a second process on the folder fails at once (elical.folder_lock).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from elical.annotate.config import AnnotateConfig
from elical.inputs import InputError
from elical.model_key import ModelKey
from elical.records import Record, read_parquet, write_parquet
from elical.run.config import RunConfig
from elical.run.subjects import Subject, build_subject
from elical.run.timings import StepClock

if TYPE_CHECKING:
    from elical.evaluate import Evaluation
    from elical.predictions import Predictions
    from elical.run.honesty import HonestyOutcome
    from elical.run.retrieval import RetrievalRun
    from elical.train.config import TrainConfig


@dataclass
class RunOutput:
    """What a finished run produced (paths) and how long each step took (seconds)."""

    out_dir: Path
    timings: dict[str, float] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # process CPU time per step (all threads)
    report: Path | None = None


def annotate_config(cfg: RunConfig, subject: Subject) -> AnnotateConfig:
    """The run's annotate settings for its subject: the subject's model and prompt wording."""
    prompts = cfg.annotate.prompts.model_copy(update=subject.prompts)
    return cfg.annotate.model_copy(update={"model": subject.model, "prompts": prompts})


def planned_models(cfg: RunConfig) -> list[ModelKey]:
    """Every model the plan trains, in order: per seed Eli-Only first (also when only EliCal is planned:
    EliCal starts from its stage 1), then each method x budget."""
    plan = cfg.train
    models: list[ModelKey] = []
    for seed in plan.seeds:
        if "eli-only" in plan.methods or "elical" in plan.methods:
            models.append(ModelKey("eli-only", None, seed))
        models += [ModelKey(method, budget, seed) for method in plan.methods if method != "eli-only"
                   for budget in plan.budgets]
    return models


def annotate_step(cfg: RunConfig, subject: Subject, out: Path, log: Callable[[str], None],
                  chunk_done: Callable[[], None] = lambda: None) -> list[Record]:
    """Greedy answer + k samples per question, judged; records split into records/<dataset>_<split>.parquet.
    ``chunk_done`` is called after each shard is written, so a run stopped midway still records its time."""
    from elical.annotate.pipeline import annotate
    from elical.annotate.run import build_backend
    from elical.loading import model_version

    records_dir = out / "records"
    pool_file = records_dir / "train.parquet"
    if pool_file.exists() and (records_dir / "eval.parquet").exists():
        log("annotate: records exist, skipped")
        return read_parquet(pool_file) + read_parquet(records_dir / "eval.parquet")
    if subject.records is not None:
        log(f"annotate: {len(subject.records)} records given (qa.records), nothing generated")
        records = subject.records
    else:
        ann = annotate_config(cfg, subject)
        records = annotate(subject.items, build_backend(ann), None, ann, out / "annotate", progress=True,
                           on_chunk=lambda _: chunk_done(), versions={"model": model_version(subject.model)})
    failed = [r for r in records if r.failed]
    if failed:
        log(f"annotate: {len(failed)} question(s) failed and are left out (first: {failed[0].failure})")
    by_file: dict[str, list[Record]] = {}
    for rec in records:
        by_file.setdefault(f"{rec.dataset}_{rec.split}", []).append(rec)
    for name, recs in by_file.items():
        write_parquet(recs, records_dir / f"{name}.parquet")
    write_parquet([r for r in records if r.split != "train"], records_dir / "eval.parquet")
    write_parquet([r for r in records if r.split == "train" and not r.failed], pool_file)
    return records


def train_config(cfg: RunConfig, subject: Subject, out: Path, key: ModelKey, pool_size: int) -> TrainConfig:
    """The trainer's settings for one planned model: the plan's (its stage-2 recipe for EliCal only), with
    the model's method, budget and seed, the subject's model and prompt wording, and the plan's calibration
    epochs for its labels."""
    from elical.train.config import ELICAL_STAGE2, TrainConfig

    settings = cfg.train.settings.model_dump(exclude=set() if key.method == "elical" else ELICAL_STAGE2)
    # the same wording the questions were answered with (records carry their rendered prompt too)
    prompts = cfg.annotate.prompts.model_copy(update=subject.prompts)
    if key.method in ("cal-only", "elical", "head-only"):
        epochs = cfg.train.stage2_epochs(key.labels(pool_size))
        if epochs is not None:
            settings["epochs_stage2"] = epochs
    return TrainConfig(
        **{**settings, "model": subject.model, "mode": key.method, "seed": key.seed,
           "output_dir": str(out / "models" / key.name),
           "budget": None if key.budget is None or key.budget == "all" else int(key.budget),
           "system_prompt": prompts.system or None, "qa_template": prompts.qa}
    )


def stage1_source(out: Path, key: ModelKey) -> Path | None:
    """Where EliCal's stage 1 comes from: Eli-Only's training of the same seed (the trainer checks its
    settings are EliCal's stage-1 settings). None for other methods, and for an EliCal folder of an
    earlier elical version that holds its own copy of that stage."""
    if key.method != "elical" or (out / "models" / key.name / "stage1-eli" / "done.json").exists():
        return None
    return out / "models" / ModelKey("eli-only", None, key.seed).name


def _train_one(cfg: RunConfig, subject: Subject, out: Path, key: ModelKey, eval_file: Path, pool_size: int,
               log: Callable[[str], None]) -> Path:
    """Train one confidence model (skipped when its scores exist) and write its predictions, key included."""
    from elical.train.predict import predict_files
    from elical.train.trainer import train

    scores = out / "scores" / f"{key.name}.parquet"
    if scores.exists():
        return scores
    tcfg = train_config(cfg, subject, out, key, pool_size)
    start = time.perf_counter()
    train(tcfg, [str(out / "records" / "train.parquet")], show_progress=False, init_from=stage1_source(out, key))
    predict_files(Path(tcfg.output_dir) / "model", [str(eval_file)], scores, method=key.name,
                  device=cfg.annotate.device, key=key)
    log(f"train: {key.name} in {time.perf_counter() - start:.1f}s")
    return scores


def train_step(cfg: RunConfig, subject: Subject, out: Path, log: Callable[[str], None],
               model_done: Callable[[], None] = lambda: None) -> dict[ModelKey, Path]:
    """Every method x budget x seed of the plan (Eli-Only first: EliCal starts from its stage 1); returns the
    prediction file of each planned method's model. ``model_done`` is called after each model, so a run
    stopped midway still records the time it spent."""
    eval_file = out / "records" / "eval.parquet"
    pool_size = len(read_parquet(out / "records" / "train.parquet"))
    check_budgets(cfg, pool_size, "annotated training questions (failed ones left out)")
    made: dict[ModelKey, Path] = {}
    if cfg.train.workers > 1:
        made = _train_parallel(cfg, subject, out, eval_file, pool_size, log, model_done)
    for key in planned_models(cfg):
        if key not in made:
            made[key] = _train_one(cfg, subject, out, key, eval_file, pool_size, log)
            model_done()
    return {key: made[key] for key in planned_models(cfg) if key.method in cfg.train.methods}


def _train_parallel(cfg: RunConfig, subject: Subject, out: Path, eval_file: Path, pool_size: int,
                    log: Callable[[str], None], model_done: Callable[[], None]) -> dict[ModelKey, Path]:
    """The plan's models, ``cfg.train.workers`` at a time in spawned processes; an EliCal model starts once
    the Eli-Only model of its seed (its stage 1) is done. A failed model stops the step with its error."""
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
            for key in [k for k in waiting if _stage1_done(k, made)]:
                waiting.remove(key)
                running[pool.submit(_timed_train_one, cfg, subject, out, key, eval_file, pool_size)] = key
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


def _timed_train_one(cfg: RunConfig, subject: Subject, out: Path, key: ModelKey, eval_file: Path,
                     pool_size: int) -> tuple[Path, float]:
    """:func:`_train_one` in a training process: its prediction file and its own seconds (the run's process
    reports each model when it is done)."""
    start = time.perf_counter()
    return _train_one(cfg, subject, out, key, eval_file, pool_size, lambda _: None), time.perf_counter() - start


def _stage1_done(key: ModelKey, made: Mapping[ModelKey, Path]) -> bool:
    """Whether ``key`` can start: EliCal waits for the Eli-Only model of its seed."""
    return key.method != "elical" or ModelKey("eli-only", None, key.seed) in made


def model_predictions(scores: Mapping[ModelKey, Path]) -> list[Predictions]:
    """The trained models' predictions, each with its key (files written before keys were stored in them
    get the run plan's)."""
    from elical.predictions import read_predictions

    out = []
    for key, path in scores.items():
        predictions = read_predictions(path)
        out.append(predictions if predictions.key is not None else replace(predictions, key=key))
    return out


def check_budgets(cfg: RunConfig, pool_size: int, what: str) -> None:
    """Refuse label budgets larger than the training pool (``pool_size`` questions, described by ``what``)."""
    too_big = [b for b in cfg.train.budgets if b != "all" and b > pool_size]
    if too_big:
        raise InputError(f"train.budgets: {too_big} exceed the {pool_size} {what}; lower train.budgets or raise "
                         "questions.max_train (or give more pool questions)")


def check_plan(cfg: RunConfig, subject: Subject) -> None:
    """Refuse, before anything is written, a plan the subject cannot carry out: a model that is not a local
    model (the confidence models are trained on it), budgets larger than its training questions (known
    before annotation: the pool after questions.max_train), and a honesty or retrieval section whose gating
    EliCal model the plan does not train."""
    from elical.loading import resolve_model

    try:
        resolve_model(subject.model)
    except FileNotFoundError as err:
        raise InputError(f"model: {err}") from None
    if subject.records is not None:
        pool = sum(r.split == "train" and not r.failed for r in subject.records)
    else:
        pool = sum(it.split == "train" for it in subject.items)
    check_budgets(cfg, pool, "training questions of the subject")
    if cfg.honesty is not None:
        from elical.run.honesty import gate_choice

        gate_choice(cfg)
    if cfg.retrieval is not None:
        from elical.run.retrieval import retrieval_gate

        retrieval_gate(cfg)


def run_pipeline(cfg: RunConfig, out_dir: str | Path, log: Callable[[str], None] = print,
                 overwrite: bool = False) -> RunOutput:
    """The whole job: resumable, every step timed; returns the report path and the timings.

    The questions are gathered and the plan checked against them (:func:`check_plan`) before anything is
    written. One process at a time per run folder (elical.folder_lock). Before anything is written, each
    step's settings are compared with those its outputs in the folder were made with (run/fingerprints.py):
    a difference is refused, naming the steps and settings, unless ``overwrite``, which redoes the changed
    steps and those after them."""
    from elical.folder_lock import folder_lock

    started = time.perf_counter(), time.process_time()
    subject = build_subject(cfg)
    check_plan(cfg, subject)
    with folder_lock(out_dir):
        return _run_locked(cfg, subject, Path(out_dir), log, overwrite, started)


def _run_locked(cfg: RunConfig, subject: Subject, out: Path, log: Callable[[str], None], overwrite: bool,
                started: tuple[float, float]) -> RunOutput:
    """:func:`run_pipeline` once it holds the folder's lock: each step in turn, timed (run/timings.py)."""
    from elical.run.fingerprints import check_run_folder
    from elical.run.report import write_run_report

    redone = check_run_folder(cfg, subject, out, overwrite)
    if redone:
        log(f"overwrite: redoing {', '.join(redone)}")
    if cfg.torch_threads:
        import torch

        torch.set_num_threads(cfg.torch_threads)
    cfg.to_yaml(out / "config.yaml")
    clock = StepClock(out / "timings.json", redone, dict(subject.info), started)
    result = RunOutput(out, clock.timings, clock.cpu_seconds)
    clock.lap("questions")
    log(f"subject {cfg.subject}: {len(subject.items)} questions, model {subject.model}")
    annotated = (out / "records" / "eval.parquet").exists()
    records = annotate_step(cfg, subject, out, log, lambda: clock.progress("annotate"))
    clock.lap("annotate", skipped=annotated)
    trained_before = len(list((out / "scores").glob("*.parquet"))) if (out / "scores").exists() else 0
    scores = train_step(cfg, subject, out, log, lambda: clock.progress("train"))
    clock.lap("train", skipped=trained_before == len(scores))
    evaluation = evaluate_step(cfg, subject, records, scores)
    clock.lap("evaluate")
    honesty, retrieval = _optional_steps(cfg, subject, out, log, clock)
    result.report = write_run_report(cfg, subject, records, evaluation, out, result.timings, result.cpu_seconds,
                                     honesty, retrieval)
    clock.lap("report")
    return result


def _optional_steps(cfg: RunConfig, subject: Subject, out: Path, log: Callable[[str], None],
                    clock: StepClock) -> tuple[HonestyOutcome | None, RetrievalRun | None]:
    """The steps a config may add after evaluation (its ``honesty:`` and ``retrieval:`` sections), each timed."""
    honesty: HonestyOutcome | None = None
    retrieval: RetrievalRun | None = None
    if cfg.honesty is not None:
        from elical.run.honesty import honesty_step

        done = (out / "honesty" / "run_honesty.json").exists()
        honesty = honesty_step(cfg, subject, out, log)
        clock.lap("honesty", skipped=done)
    if cfg.retrieval is not None:
        from elical.run.retrieval import FOLDER, retrieval_step

        done = (out / FOLDER / "summary.json").exists()
        retrieval = retrieval_step(cfg, subject, out, log)
        clock.lap("retrieval", skipped=done)
    return honesty, retrieval


def evaluate_step(cfg: RunConfig, subject: Subject, records: list[Record],
                  scores: Mapping[ModelKey, Path]) -> Evaluation:
    """Baselines from the records and the trained models' predictions, scored on the evaluation records."""
    from elical.evaluate import evaluate

    eval_records = [r for r in records if r.split != "train" and not r.failed]
    ecfg = cfg.evaluate.model_copy(update={"groups": {**subject.groups, **cfg.evaluate.groups}})
    return evaluate(eval_records, model_predictions(scores), ecfg)
