"""`elical run`: annotate -> baselines -> train (methods x budgets x seeds) -> evaluate -> report.

The run is a loop over steps (run/steps/sequence.py): annotate, train (one step per planned model), evaluate, the
config's honesty and retrieval sections, report. Each hands the next its value (records, trained models
with their predictions, the evaluation, the honesty outcome with its fitted gate, the retrieval run);
every path comes from :class:`~elical.run.folder.RunFolder`.

Run folder (architecture.md)::

    <out>/config.yaml            the resolved RunConfig
    <out>/annotate/              annotation shards, judge cache, records.parquet
    <out>/records/*.parquet      records per dataset and split; train.parquet is the calibration pool
    <out>/models/<method>-<budget>-s<seed>/   trained confidence models (train_summary.json, model/)
    <out>/scores/*.parquet       one prediction file per trained model, on the evaluation records
    <out>/metrics.csv            the evaluation table (per method, dataset, group, with CIs)
    <out>/results.csv            method, budget, seed, split, metric, value (one row per seed)
    <out>/differences.csv        EliCal - Cal-Only / - best training-free, per seed and seed-averaged, paired CIs
    <out>/stage2_selection.json  with train.select_on ood-holdout: the stage-2 recipe chosen on held-out datasets
    <out>/report.md, report.html, table2.md, figures/*.png, timings.json
    <out>/honesty/               with a ``honesty:`` section: fine-tuning methods vs the EliCal gate
                                 (honesty_comparison.{csv,md,json}, answers.parquet, gate.json, adapters)
    <out>/retrieval/             with a ``retrieval:`` section: answers with passages, gated curve, index/
    <out>/settings/<step>.json   what decided each step's outputs (run/fingerprints.py)
    <out>/audit/                 written by `elical label-audit <out>`: the labelling sheet and page, and the
                                 judges' quality on the labels (quality.{md,json}), shown in the report

Every step whose outputs exist reads them back instead of redoing them (its ``done``), so a killed run
continues where it stopped; a rerun with
settings that change a step's outputs is refused before anything is written (``--overwrite`` redoes
the changed steps), and a second process on the folder fails at once (elical.core.folder_lock).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from elical.core.inputs import InputError
from elical.run.config import RunConfig, planned_models  # noqa: F401 - planned_models: importable here too
from elical.run.folder import RunFolder
from elical.run.steps.training_step import check_budgets
from elical.run.subjects.by_name import build_subject
from elical.run.subjects.subject import Subject
from elical.run.timings import StepClock


@dataclass
class RunOutput:
    """What a finished run produced (paths) and how long each step took (seconds)."""

    out_dir: Path
    timings: dict[str, float] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # process CPU time per step (all threads)
    report: Path | None = None


def check_plan(cfg: RunConfig, subject: Subject) -> None:
    """Refuse, before anything is written, a plan the subject cannot carry out: a model that is not a local
    model (the confidence models are trained on it), budgets larger than its training questions (known
    before annotation: the pool after questions.max_train), a honesty or retrieval section whose gating
    EliCal model the plan does not train, and selection datasets (train.select_on) that are not held out."""
    from elical.model.loading import resolve_model

    try:
        resolve_model(subject.model)
    except FileNotFoundError as err:
        raise InputError(f"model: {err}") from None
    if subject.records is not None:
        pool = sum(r.split == "train" and not r.failed for r in subject.records)
    else:
        pool = sum(it.split == "train" for it in subject.items)
    check_budgets(cfg, pool, "training questions of the subject")
    if cfg.train.select_on != "none":
        from elical.run.stage2_selection import check_selection_datasets

        asked = subject.records if subject.records is not None else subject.items
        check_selection_datasets(cfg, [q.dataset for q in asked if q.split == "train"],
                                 [q.dataset for q in asked if q.split != "train"])
    if cfg.honesty is not None:
        from elical.run.steps.honesty_step import gate_choice

        gate_choice(cfg)
    if cfg.retrieval is not None:
        from elical.run.steps.retrieval_step import retrieval_gate

        retrieval_gate(cfg)


def run_pipeline(cfg: RunConfig, out_dir: str | Path, log: Callable[[str], None] = print,
                 overwrite: bool = False) -> RunOutput:
    """The whole job: resumable, every step timed; returns the report path and the timings.

    The questions are gathered and the plan checked against them (:func:`check_plan`) before anything is
    written. One process at a time per run folder (elical.core.folder_lock). Before anything is written, each
    step's settings are compared with those its outputs in the folder were made with (run/fingerprints.py):
    a difference is refused, naming the steps and settings, unless ``overwrite``, which redoes the changed
    steps and those after them."""
    from elical.core.folder_lock import folder_lock

    started = time.perf_counter(), time.process_time()
    subject = build_subject(cfg)
    check_plan(cfg, subject)
    with folder_lock(out_dir):
        return _run_locked(cfg, subject, Path(out_dir), log, overwrite, started)


def _run_locked(cfg: RunConfig, subject: Subject, out: Path, log: Callable[[str], None], overwrite: bool,
                started: tuple[float, float]) -> RunOutput:
    """:func:`run_pipeline` once it holds the folder's lock: the settings check, then each step in turn,
    timed (run/timings.py); a step whose outputs are there reads them back and keeps its recorded times."""
    from elical.run.fingerprints import check_steps
    from elical.run.steps.sequence import RunContext, run_steps

    folder = RunFolder(out)
    ctx = RunContext(cfg, subject, folder, log)
    steps = run_steps(ctx)
    redone = check_steps(steps.recorded(), out, overwrite)
    if redone:
        log(f"overwrite: redoing {', '.join(redone)}")
    if cfg.torch_threads:
        import torch

        torch.set_num_threads(cfg.torch_threads)
    cfg.to_yaml(folder.config)
    ctx.clock = clock = StepClock(folder.timings, redone, dict(subject.info), started)
    clock.lap("questions")
    log(f"subject {cfg.subject}: {len(subject.items)} questions, model {subject.model}")
    for step in steps.loop():
        skipped = step.done()
        step.run()
        clock.lap(step.name, skipped=skipped)
    return RunOutput(out, clock.timings, clock.cpu_seconds, steps.report.value)
