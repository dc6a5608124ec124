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
    <out>/settings/<step>.json   what decided each step's outputs (run/fingerprints.py)

Every step skips work whose output exists, so a killed run continues where it stopped; a rerun with
settings that change a step's outputs is refused before anything is written (``--overwrite`` redoes
the changed steps), and a second process on the folder fails at once (elical.folder_lock).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elical.annotate.config import AnnotateConfig
from elical.records import Record, atomic_write, read_parquet, write_parquet
from elical.run.config import RunConfig
from elical.run.subjects import Subject, build_subject


@dataclass
class RunOutput:
    """What a finished run produced (paths) and how long each step took (seconds)."""

    out_dir: Path
    timings: dict[str, float] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # process CPU time per step (all threads)
    report: Path | None = None


def model_name(method: str, budget: int | str | None, seed: int) -> str:
    """Folder/method name of one trained model, e.g. ``elical-100-s0`` (budget 0 for Eli-Only)."""
    return f"{method}-{budget if budget is not None else 0}-s{seed}"


def parse_model_name(name: str) -> tuple[str, str, int]:
    """(method, budget, seed) back from :func:`model_name`."""
    head, _, seed = name.rpartition("-s")
    method, _, budget = head.rpartition("-")
    return method, budget, int(seed)


def annotate_config(cfg: RunConfig, subject: Subject) -> AnnotateConfig:
    """The run's annotate settings for its subject: the subject's model and prompt wording."""
    prompts = cfg.annotate.prompts.model_copy(update=subject.prompts)
    return cfg.annotate.model_copy(update={"model": subject.model, "prompts": prompts})


def planned_models(cfg: RunConfig) -> list[tuple[str, int | str | None, int]]:
    """(method, budget, seed) of every model the plan trains, in order: per seed Eli-Only first (also when
    only EliCal is planned: EliCal reuses its stage 1), then each method x budget."""
    plan = cfg.train
    models: list[tuple[str, int | str | None, int]] = []
    for seed in plan.seeds:
        if "eli-only" in plan.methods or "elical" in plan.methods:
            models.append(("eli-only", None, seed))
        models += [(method, budget, seed) for method in plan.methods if method != "eli-only" for budget in plan.budgets]
    return models


def annotate_step(cfg: RunConfig, subject: Subject, out: Path, log: Callable[[str], None],
                  chunk_done: Callable[[], None] = lambda: None) -> list[Record]:
    """Greedy answer + k samples per question, judged; records split into records/<dataset>_<split>.parquet.
    ``chunk_done`` is called after each shard is written, so a run stopped midway still records its time."""
    from elical.annotate.models import model_version
    from elical.annotate.pipeline import annotate
    from elical.annotate.run import build_backend

    records_dir = out / "records"
    pool_file = records_dir / "train.parquet"
    if pool_file.exists() and (records_dir / "eval.parquet").exists():
        log("annotate: records exist, skipped")
        return read_parquet(pool_file) + read_parquet(records_dir / "eval.parquet")
    ann = annotate_config(cfg, subject)
    backend = build_backend(ann)
    records = annotate(subject.items, backend, None, ann, out / "annotate", progress=True,
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


def _train_one(cfg: RunConfig, subject: Subject, out: Path, method: str, budget: int | str | None, seed: int,
               eval_file: Path, pool_size: int, log: Callable[[str], None]) -> Path:
    """Train one confidence model (skipped when its scores exist) and write its predictions."""
    from elical.train.config import TrainConfig
    from elical.train.predict import predict_files
    from elical.train.trainer import train

    name = model_name(method, budget, seed)
    scores = out / "scores" / f"{name}.parquet"
    if scores.exists():
        return scores
    model_dir = out / "models" / name
    if method == "elical":
        # Stage 1 of EliCal is Eli-Only's run with the same seed: reuse it (the trainer skips a done stage).
        eli = out / "models" / model_name("eli-only", None, seed) / "stage1-eli"
        if (eli / "done.json").exists() and not (model_dir / "stage1-eli").exists():
            model_dir.mkdir(parents=True, exist_ok=True)
            shutil.copytree(eli, model_dir / "stage1-eli", ignore=shutil.ignore_patterns("checkpoint"))
            done = json.loads((eli / "done.json").read_text())
            done["best"] = str(model_dir / "stage1-eli" / "best")
            (model_dir / "stage1-eli" / "done.json").write_text(json.dumps(done, indent=1))
    settings = {**cfg.train.settings}
    # the same wording the questions were answered with (records carry their rendered prompt too)
    prompts = cfg.annotate.prompts.model_copy(update=subject.prompts)
    if method in ("cal-only", "elical", "head-only"):
        labels = pool_size if budget in (None, "all") else int(budget)
        epochs = cfg.train.stage2_epochs(labels)
        if epochs is not None:
            settings["epochs_stage2"] = epochs
    tcfg = TrainConfig(
        **{**settings, "model": subject.model, "mode": method, "seed": seed, "output_dir": str(model_dir),
           "budget": None if budget in (None, "all") else int(budget),
           "system_prompt": prompts.system or None, "qa_template": prompts.qa}
    )
    start = time.perf_counter()
    train(tcfg, [str(out / "records" / "train.parquet")], show_progress=False)
    predict_files(model_dir / "model", [str(eval_file)], scores, method=name, device=cfg.annotate.device
                  if cfg.annotate.device != "auto" else "auto")
    log(f"train: {name} in {time.perf_counter() - start:.1f}s")
    return scores


def train_step(cfg: RunConfig, subject: Subject, out: Path, log: Callable[[str], None],
               model_done: Callable[[], None] = lambda: None) -> list[Path]:
    """Every method x budget x seed of the plan; Eli-Only first so EliCal reuses its stage 1.
    ``model_done`` is called after each model, so a run stopped midway still records the time it spent."""
    eval_file = out / "records" / "eval.parquet"
    pool_size = len(read_parquet(out / "records" / "train.parquet"))
    too_big = [b for b in cfg.train.budgets if b != "all" and int(b) > pool_size]
    if too_big:
        raise ValueError(f"budget(s) {too_big} exceed the {pool_size} annotated training questions; "
                         "lower train.budgets or raise questions.max_train")
    made: list[Path] = []
    for method, budget, seed in planned_models(cfg):
        made.append(_train_one(cfg, subject, out, method, budget, seed, eval_file, pool_size, log))
        model_done()
    if "eli-only" not in cfg.train.methods:
        made = [p for p in made if not p.stem.startswith("eli-only-")]
    return made


def run_pipeline(cfg: RunConfig, out_dir: str | Path, log: Callable[[str], None] = print,
                 overwrite: bool = False) -> RunOutput:
    """The whole job: resumable, every step timed; returns the report path and the timings.

    One process at a time per run folder (elical.folder_lock). Before anything is written, each step's
    settings are compared with those its outputs in the folder were made with (run/fingerprints.py):
    a difference is refused, naming the steps and settings, unless ``overwrite``, which redoes the
    changed steps and those after them."""
    from elical.folder_lock import folder_lock

    with folder_lock(out_dir):
        return _run_locked(cfg, Path(out_dir), log, overwrite)


def _run_locked(cfg: RunConfig, out: Path, log: Callable[[str], None], overwrite: bool) -> RunOutput:
    """:func:`run_pipeline` once it holds the folder's lock."""
    from elical.evaluate import EvalConfig, evaluate
    from elical.predictions import read_predictions
    from elical.provenance import provenance
    from elical.run.fingerprints import check_run_folder
    from elical.run.report import write_run_report

    clock, cpu_clock = time.perf_counter(), time.process_time()
    subject = build_subject(cfg)
    redone = check_run_folder(cfg, subject, out, overwrite)
    if redone:
        log(f"overwrite: redoing {', '.join(redone)}")
    if cfg.torch_threads:
        import torch

        torch.set_num_threads(cfg.torch_threads)
    cfg.to_yaml(out / "config.yaml")
    result = RunOutput(out)
    timing_file = out / "timings.json"
    earlier = json.loads(timing_file.read_text()) if timing_file.exists() else {}
    # time spent on a step by earlier invocations that stopped before it finished (their work is kept,
    # unless overwrite discarded it)
    carried: dict[str, dict[str, float]] = {step: took for step, took in earlier.get("partial", {}).items()
                                            if not any(name.split("-", 1)[0] == step for name in redone)}
    partial: dict[str, dict[str, float]] = dict(carried)

    def spent(step: str) -> dict[str, float]:
        """Wall and CPU seconds of ``step`` so far, earlier stopped invocations included."""
        before = carried.get(step, {})
        return {"wall": round(before.get("wall", 0.0) + time.perf_counter() - clock, 2),
                "cpu": round(before.get("cpu", 0.0) + time.process_time() - cpu_clock, 2)}

    def lap(step: str, skipped: bool = False) -> None:
        """Wall and CPU time of a step; a step skipped on resume keeps the times it took when it ran,
        a resumed step adds the time earlier invocations spent on it.

        CPU time (all threads of this process) is what the step costs on a machine nobody else uses;
        wall time on a shared CPU grows with the load."""
        nonlocal clock, cpu_clock
        keep = skipped and step in earlier.get("timings", {})
        took = spent(step)
        result.timings[step] = earlier["timings"][step] if keep else took["wall"]
        result.cpu_seconds[step] = earlier.get("cpu_seconds", {}).get(step, 0.0) if keep else took["cpu"]
        partial.pop(step, None)
        clock, cpu_clock = time.perf_counter(), time.process_time()
        write_timings()

    def progress(step: str) -> None:
        """Record the time spent on an unfinished step, for a later resumed invocation to add."""
        partial[step] = spent(step)
        write_timings()

    def write_timings() -> None:
        """timings.json after every step, so a crashed or resumed run still knows what each step cost."""
        meta = {"timings": result.timings, "total_seconds": round(sum(result.timings.values()), 1), "partial": partial,
                "cpu_seconds": result.cpu_seconds, "total_cpu_seconds": round(sum(result.cpu_seconds.values()), 1),
                "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
                "subject": subject_info, "cpu_count": os.cpu_count(), **provenance()}
        with atomic_write(timing_file) as tmp:
            tmp.write_text(json.dumps(meta, indent=2))

    subject_info: dict[str, Any] = dict(subject.info)
    lap("questions")
    log(f"subject {cfg.subject}: {len(subject.items)} questions, model {subject.model}")
    annotated = (out / "records" / "eval.parquet").exists()
    records = annotate_step(cfg, subject, out, log, lambda: progress("annotate"))
    lap("annotate", skipped=annotated)
    trained_before = len(list((out / "scores").glob("*.parquet"))) if (out / "scores").exists() else 0
    score_files = train_step(cfg, subject, out, log, lambda: progress("train"))
    lap("train", skipped=trained_before == len(score_files))
    eval_records = [r for r in records if r.split != "train" and not r.failed]
    predictions = [read_predictions(p) for p in score_files]
    ecfg = EvalConfig(methods=cfg.evaluate.baselines, n_resamples=cfg.evaluate.n_resamples,
                      alignment_repeats=cfg.evaluate.alignment_repeats, seed=cfg.evaluate.seed,
                      groups=subject.groups)
    evaluation = evaluate(eval_records, predictions, ecfg)
    lap("evaluate")
    honesty = None
    if cfg.honesty is not None:
        from elical.run.honesty import honesty_step

        done = (out / "honesty" / "run_honesty.json").exists()
        honesty = honesty_step(cfg, subject, out, log)
        lap("honesty", skipped=done)
    result.report = write_run_report(cfg, subject, records, evaluation, out, result.timings, result.cpu_seconds,
                                     honesty)
    lap("report")
    return result
