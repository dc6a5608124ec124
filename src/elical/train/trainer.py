"""`elical train`: plan the data of each mode, then run its stages.

Modes: ``eli-only`` (stage 1: self-consistency targets on the whole pool), ``cal-only`` (correctness
targets on the labelled budget, from scratch), ``elical`` (stage 1, then stage 2 from the selected
stage-1 model: by default LoRA AND head trainable; ``stage2`` chooses another recipe), ``head-only``
(frozen backbone, cached features).
Everything a mode needs is checked before any model is loaded.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from elical.core.folder_lock import launch_lock
from elical.records import Record, read_records
from elical.train.budgets import budget_subset, split_validation
from elical.train.config import TrainConfig, stage2_settings
from elical.train.label_selection import LabelOrder, save_selection
from elical.train.targets import has_target, require_targets, target_kind, target_value


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train` made: the final model's folder, each stage's summary (its kept epoch, history,
    sizes), and how the training ran (config, seed, inputs, init_from, processes, provenance: run.json)."""

    model: Path
    stages: list[dict[str, Any]]
    run: dict[str, Any]
    is_main_process: bool = True

    def summary(self) -> dict[str, Any]:
        """train_summary.json's content: the run, the stages, the model and the process."""
        return {**self.run, "stages": self.stages, "model": str(self.model), "is_main_process": self.is_main_process}


@dataclass
class StagePlan:
    """Targets and 0/1 correctness labels (per record; None where unused) and train/val indices of one
    stage; the labels only score the validation AUROC."""

    targets: list[float | None]
    labels: list[float | None]
    train: list[int]
    val: list[int]


def plan_stages(records: Sequence[Record], cfg: TrainConfig, label_order: LabelOrder | None = None) -> dict[str, StagePlan]:
    """The data of each stage of ``cfg.mode``: 'eli' and/or 'cal' (errors name what is missing). The labelled
    budget is the seeded random draw, or the first labelled questions of ``label_order`` (a selection strategy's
    order of the pool, elical.train.label_selection)."""
    stages: dict[str, list[Literal["eli", "cal"]]] = {"eli-only": ["eli"], "cal-only": ["cal"], "elical": ["eli", "cal"],
                                                      "head-only": [cfg.head_only_target]}
    needs = stages[cfg.mode]
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
            if label_order is None:
                chosen = budget_subset([records[i] for i in labelled], cfg.budget, cfg.seed)
                pool = [labelled[i] for i in chosen]
            else:
                pool = _ordered_subset(records, labelled, label_order, cfg.budget)
        targets = [target_value(r, kind) if has_target(r, kind) else None for r in records]
        # correctness of the greedy answer where the stage's labels are correctness (calibration)
        labels = [float(r.greedy_correct) if stage == "cal" and r.greedy_correct is not None else None
                  for r in records]
        train, val = split_validation(pool, records, cfg.val_fraction, cfg.seed)
        if stage == "cal" and cfg.mode == "elical" and cfg.stage2 == "mixed":
            train = train + _mix_in(records, cfg, set(pool), round(cfg.stage2_mix * len(train)), targets)
        plans[stage] = StagePlan(targets, labels, train, val)
    return plans


def _ordered_subset(records: Sequence[Record], labelled: Sequence[int], order: LabelOrder,
                    budget: int | None) -> list[int]:
    """Indices of the first ``budget`` labelled records in ``order`` (all labelled ones when None); a selection
    file's order (not complete) is taken as it is, every one of its questions labelled."""
    position = {r.id: i for i, r in enumerate(records)}
    missing = [rid for rid in order.ids if rid not in position]
    if missing or (order.complete and len(order.ids) != len(records)):
        raise ValueError(f"label selection ({order.strategy}): its order covers {len(order.ids)} questions, the pool "
                         f"has {len(records)}" + (f"; not in the pool: {missing[0]!r}" if missing else ""))
    has_label = set(labelled)
    if not order.complete:
        unlabelled = [rid for rid in order.ids[:budget] if position[rid] not in has_label]
        if unlabelled:
            raise ValueError(f"{order.source}: {len(unlabelled)} chosen question(s) have no calibration label (first: "
                             f"{unlabelled[0]!r}); label every chosen question, or lower --budget")
    ordered = [position[rid] for rid in order.ids if position[rid] in has_label]
    if budget is None:
        return ordered
    if budget > len(ordered):
        raise ValueError(f"--budget {budget} exceeds the {len(ordered)} records available with labels")
    return ordered[:budget]


def _mix_in(records: Sequence[Record], cfg: TrainConfig, labelled: set[int], n: int,
            targets: list[float | None]) -> list[int]:
    """stage2 mixed: ``n`` pool questions outside the labelled budget (a seeded draw), their targets set
    to stage 1's (self-consistency) in ``targets``; the indices to train on beside the labelled ones."""
    import random

    kind = target_kind("eli", cfg.cal_target)
    free = [i for i, r in enumerate(records) if i not in labelled and has_target(r, kind)]
    chosen = sorted(random.Random(f"{cfg.seed}/stage2-mix").sample(free, min(n, len(free))))
    for i in chosen:
        targets[i] = target_value(records[i], kind)
    return chosen


STAGE_NAMES = {"eli": "stage1-eli", "cal": "stage2-cal"}  # elical; cal-only and head-only name their one stage
SETTINGS_STEP = "train"  # the whole run's record: mode and the digest of each stage
RUN_OUTPUTS = ("model", "train_summary.json", "training_log.csv")


@dataclass
class StageSpec:
    """One stage of the run: its folder name, data key ('eli'/'cal'), epochs, learning rate and the
    settings that decide its output (see :func:`stage_settings`)."""

    name: str
    data: str
    epochs: int
    lr: float
    settings: dict[str, Any]


def _precision(cfg: TrainConfig) -> dict[str, str]:
    """Weight dtype and mixed precision as they resolve on this machine (both change the numbers)."""
    import torch

    from elical.model.loading import resolve_dtype

    device = "cuda" if torch.cuda.is_available() else "cpu"
    mixed = cfg.mixed_precision
    if mixed == "auto":
        mixed = "bf16" if device == "cuda" and torch.cuda.is_bf16_supported() else "no"
    return {"dtype": str(resolve_dtype(cfg.dtype, device)).removeprefix("torch."), "mixed_precision": mixed}


def _data_version(records: Sequence[Record], plan: StagePlan) -> str:
    """A short hash of a stage's questions (id and prompt), targets and train/val split."""
    import hashlib

    h = hashlib.sha256()
    for part, indices in (("train", plan.train), ("val", plan.val)):
        for i in indices:
            rec = records[i]
            h.update(json.dumps([part, rec.id, rec.prompt or rec.question, plan.targets[i]]).encode())
    return h.hexdigest()[:16]


def stage_settings(cfg: TrainConfig, key: str, plan: StagePlan, records: Sequence[Record], epochs: int, lr: float,
                   start: str | None, label_order: LabelOrder | None = None) -> dict[str, Any]:
    """What decides a stage's output: the config's output settings (:func:`elical.core.settings_contract.output_settings`:
    model, prompts, head, optimisation, selection; LoRA's unless head-only, the budget and calibration target
    for stage 2), the stage's epochs and learning rate, the precision as it resolves here, stage 2's recipe,
    and under ``input`` versions of the model files, the stage's data (``key``: 'eli' or 'cal') and, for
    stage 2, the stage it starts from (``start``: that stage's settings digest).

    Left out: fields marked Output.NEVER (speed and bookkeeping), the mode (a stage is the same in eli-only
    and elical; the run's record holds it) and the other Output.PER_STAGE fields in the form given here."""
    from elical.core.settings_contract import Output, output_settings
    from elical.model.loading import model_version

    leave_out = {Output.PER_STAGE, *([Output.LORA] if cfg.mode == "head-only" else []),
                 *([Output.CALIBRATION] if key != "cal" else [])}
    settings: dict[str, Any] = {**output_settings(cfg, leave_out), "epochs": epochs, "lr": lr, **_precision(cfg)}
    if key == "cal":
        settings.update(stage2_settings(cfg.mode, cfg.stage2, cfg.stage2_mix, cfg.stage2_l2sp, cfg.stage2_refit,
                                       cfg.stage2_wise))
        if label_order is not None:  # the random draw adds nothing (folders made before selection still resume)
            settings["label_selection"] = label_order.settings()
    settings["input"] = {"model": model_version(cfg.model), "data": _data_version(records, plan), "start": start}
    return settings


def plan_run(cfg: TrainConfig, plans: dict[str, StagePlan], records: Sequence[Record],
             label_order: LabelOrder | None = None) -> list[StageSpec]:
    """The stages of ``cfg.mode`` in order, each with its settings (``label_order``: see :func:`plan_stages`)."""
    from elical.core.fingerprint import digest

    n_labels = len(plans["cal"].train) + len(plans["cal"].val) if "cal" in plans else 0
    if cfg.mode == "head-only":
        key = cfg.head_only_target
        epochs = cfg.stage2_epochs(n_labels) if key == "cal" else cfg.epochs_stage1
        return [StageSpec("head-only", key, epochs, cfg.lr_head_only,
                          stage_settings(cfg, key, plans[key], records, epochs, cfg.lr_head_only, None))]
    specs: list[StageSpec] = []
    if cfg.mode in ("eli-only", "elical"):
        specs.append(StageSpec(STAGE_NAMES["eli"], "eli", cfg.epochs_stage1, cfg.lr,
                               stage_settings(cfg, "eli", plans["eli"], records, cfg.epochs_stage1, cfg.lr, None)))
    if cfg.mode in ("cal-only", "elical"):
        name = STAGE_NAMES["cal"] if cfg.mode == "elical" else "cal-only"
        epochs, lr = cfg.stage2_epochs(n_labels), cfg.lr_stage2 or cfg.lr
        if cfg.mode == "elical" and cfg.stage2 == "head":
            lr = cfg.lr_head_only
        start = digest(specs[0].settings) if specs else None
        specs.append(StageSpec(name, "cal", epochs, lr, stage_settings(cfg, "cal", plans["cal"], records, epochs, lr,
                                                                       start, label_order)))
    return specs


@dataclass
class InitStage:
    """A finished stage 1 of another training that this one starts from (``init_from``): its folder, its
    summary (``done.json``) and the version of its selected weights (recorded, so a rewritten stage 1 is
    noticed by a resume)."""

    folder: Path
    summary: dict[str, Any]
    weights: str | None


def initial_stage(init_from: str | Path, cfg: TrainConfig, specs: Sequence[StageSpec]) -> InitStage:
    """The finished stage 1 in ``init_from`` (a training folder, or its ``stage1-eli`` folder), checked to be
    the stage 1 this training would train: same recorded settings (model, data, seed, optimisation, ...).

    Raises :class:`elical.core.inputs.InputError` when the mode has no stage 1 to skip or the folder holds no
    finished stage 1, and :class:`elical.core.fingerprint.SettingsMismatch` naming the settings that differ."""
    from elical.core.fingerprint import SettingsMismatch, differences, path_version, recorded_settings
    from elical.core.inputs import InputError

    name = STAGE_NAMES["eli"]
    if cfg.mode != "elical":
        raise InputError(f"init_from: only mode elical starts from a finished stage 1, not mode {cfg.mode}")
    root = Path(init_from)
    folder = root / name if (root / name).is_dir() else root
    if folder.resolve() == (Path(cfg.output_dir) / name).resolve():
        raise InputError(f"init_from {root} is this training's own stage 1: leave init_from out (a rerun resumes)")
    if not (folder / "done.json").is_file() or not (folder / "best").is_dir():
        raise InputError(f"init_from {root}: no finished stage 1 there (expected {root / name} with done.json "
                         "and best/); train it to the end first")
    recorded = recorded_settings(folder, name)
    spec = next(s for s in specs if s.name == name)
    problem = None if recorded is None else differences(recorded, spec.settings)
    if problem != []:
        raise SettingsMismatch(folder, {name: problem}, "start from a stage 1 trained with this training's "
                                                        "settings, or leave out init_from to train stage 1 here")
    return InitStage(folder, json.loads((folder / "done.json").read_text()), path_version(folder / "best"))


def _own_specs(specs: Sequence[StageSpec], start: InitStage | None) -> list[StageSpec]:
    """The stages this training trains in its own folder (all but stage 1 when it starts from ``start``)."""
    return [spec for spec in specs if start is None or spec.name != STAGE_NAMES["eli"]]


def check_folder(out: Path, cfg: TrainConfig, specs: Sequence[StageSpec], overwrite: bool,
                 clear: bool = True, start: InitStage | None = None) -> list[str]:
    """Compare each stage's settings (and the run's: mode, stages and the stage 1 it starts from) with those
    recorded in ``out``.

    A difference raises :class:`elical.core.fingerprint.SettingsMismatch` naming every differing setting
    (old → new) before anything is written. With ``overwrite`` the differing stages' folders and the
    final model are deleted instead (by the process with ``clear``), while stages whose settings
    match are kept, as they would come out the same. Returns what is retrained. Records nothing (see
    :func:`record_folder`)."""
    from elical.core.fingerprint import (
        INPUT,
        SettingsMismatch,
        clear_outputs,
        compare_settings,
        recorded_settings,
    )

    own = _own_specs(specs, start)
    problems: dict[str, Any] = {}
    for spec in own:
        stage_dir = out / spec.name
        made = [p for p in stage_dir.iterdir() if p.name != "settings"] if stage_dir.is_dir() else []
        if (problem := compare_settings(stage_dir, spec.name, spec.settings, made)) != []:
            problems[spec.name] = (problem, made)
    run_outputs = [out / name for name in RUN_OUTPUTS]
    run_problem = compare_settings(out, SETTINGS_STEP, _run_settings(cfg, specs, start), run_outputs)
    if not problems and run_problem == []:
        return []
    if not overwrite:
        shown = {step: problem for step, (problem, _) in problems.items()}
        if run_problem is None or any(not d.key.startswith(INPUT) for d in run_problem or []) or not shown:
            shown[SETTINGS_STEP] = run_problem  # the mode, or a folder without records; stage digests go unsaid
        raise SettingsMismatch(out, shown, "rerun with --overwrite to retrain what changed (stages whose settings "
                                           "match are kept), or train into a new folder (-o)")
    if clear:
        old_stages = (recorded_settings(out, SETTINGS_STEP) or {}).get("input", {})
        for name in old_stages.keys() - {spec.name for spec in own}:  # stages of the run this one replaces
            clear_outputs(out / name, name, [out / name])
        for step, (_, outputs) in problems.items():
            clear_outputs(out / step, step, outputs)
        clear_outputs(out, SETTINGS_STEP, run_outputs)
    return sorted(problems) or [SETTINGS_STEP]


def _run_settings(cfg: TrainConfig, specs: Sequence[StageSpec], start: InitStage | None = None) -> dict[str, Any]:
    """The run's record: its mode, each stage's settings digest (under ``input``) and, when stage 1 comes
    from another training, the version of that stage's weights (``init_from``)."""
    from elical.core.fingerprint import digest

    settings: dict[str, Any] = {"mode": cfg.mode, "input": {spec.name: digest(spec.settings) for spec in specs}}
    if start is not None:
        settings["init_from"] = start.weights
    return settings


def record_folder(out: Path, cfg: TrainConfig, specs: Sequence[StageSpec], start: InitStage | None = None) -> None:
    """Record the run's and each of its own stages' settings in ``out`` (after :func:`check_folder` passed)."""
    from elical.core.fingerprint import record_settings

    for spec in _own_specs(specs, start):
        record_settings(out / spec.name, spec.name, spec.settings)
    record_settings(out, SETTINGS_STEP, _run_settings(cfg, specs, start))


def train(cfg: TrainConfig, inputs: Sequence[str], show_progress: bool = True, overwrite: bool = False,
          init_from: str | Path | None = None, label_order: LabelOrder | None = None) -> TrainResult:
    """Run the training of ``cfg.mode`` on the records in ``inputs``; the model lands in output_dir/model
    (the result's ``model``).

    The records and the plan (budget, targets, ``init_from``) are checked first, then the output folder's lock
    is taken (one launch at a time per folder, elical.core.folder_lock). A folder holding a run with other output-deciding
    settings is refused before anything is written (see :func:`check_folder`); ``overwrite`` retrains what
    changed. A rerun with the same settings resumes where the last one stopped. ``init_from`` (mode elical):
    a training folder whose finished stage 1 has this training's stage-1 settings (see
    :func:`initial_stage`); stage 2 starts from its selected model instead of training stage 1 again.
    ``label_order`` (modes with a calibration stage): label the first ``budget`` questions of a selection
    strategy's order (elical.train.label_selection) instead of the random draw; it is recorded in the
    calibration stage's settings and in ``selection.json``."""
    if not cfg.model:
        raise ValueError("no model given: set `model` (a Hugging Face causal LM folder or name)")
    records = read_records(list(inputs))
    if label_order is not None and cfg.mode not in ("cal-only", "elical"):
        raise ValueError(f"a label selection applies to modes with labels (cal-only, elical), not {cfg.mode}")
    plans = plan_stages(records, cfg, label_order)  # all input errors surface here, before any model is loaded or lock taken
    specs = plan_run(cfg, plans, records, label_order)
    start = initial_stage(init_from, cfg, specs) if init_from is not None else None
    with launch_lock(cfg.output_dir):
        return _train_locked(cfg, records, plans, specs, start, inputs, show_progress, overwrite, label_order)


def _train_locked(cfg: TrainConfig, records: Sequence[Record], plans: dict[str, StagePlan], specs: list[StageSpec],
                  start: InitStage | None, inputs: Sequence[str], show_progress: bool,
                  overwrite: bool, label_order: LabelOrder | None = None) -> TrainResult:
    """:func:`train` once it holds the output folder's lock."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    from elical.core.provenance import provenance

    out = Path(cfg.output_dir)
    accelerator = Accelerator(mixed_precision=specs[0].settings["mixed_precision"])
    _prepare_folder(out, cfg, specs, start, overwrite, accelerator)
    set_seed(cfg.seed)
    run_info = {"config": cfg.model_dump(), "seed": cfg.seed, "inputs": [str(p) for p in inputs],
                "init_from": str(start.folder) if start else None,
                "num_processes": accelerator.num_processes, "provenance": provenance()}
    if accelerator.is_main_process:
        (out / "run.json").write_text(json.dumps(run_info, indent=1, default=str))
        if label_order is not None:  # the first budget of its order among the labelled questions, as plan_stages
            kind = target_kind("cal", cfg.cal_target)
            save_selection(out, label_order, cfg.budget, {r.id for r in records if has_target(r, kind)})
    summaries = _train_stages(cfg, records, plans, specs, start, accelerator, run_info, show_progress)
    return _finish(out, specs, summaries, run_info, accelerator)


def _prepare_folder(out: Path, cfg: TrainConfig, specs: Sequence[StageSpec], start: InitStage | None,
                    overwrite: bool, accelerator) -> None:
    """Check ``out`` against this training's settings (every process), then record them (the main one)."""
    retrained = check_folder(out, cfg, specs, overwrite, clear=accelerator.is_main_process, start=start)
    accelerator.wait_for_everyone()  # every process compared before the main one cleared anything
    if accelerator.is_main_process:
        if retrained:
            accelerator.print(f"overwrite: retraining {', '.join(retrained)} in {out}")
        record_folder(out, cfg, specs, start)
        cfg.to_yaml(out / "train_config.yaml")
    accelerator.wait_for_everyone()


def _train_stages(cfg: TrainConfig, records: Sequence[Record], plans: dict[str, StagePlan],
                  specs: Sequence[StageSpec], start: InitStage | None, accelerator, run_info: dict[str, Any],
                  show_progress: bool) -> list[dict[str, Any]]:
    """Train the stages in order (stage 1 taken from ``start`` when given); their summaries."""
    from accelerate.utils import DistributedType

    from elical.core.fingerprint import digest
    from elical.train.batching import tokenize_prompts
    from elical.train.head_only import cached_features, train_head
    from elical.train.loop import Stage, StageData, run_stage
    from elical.train.predict import record_prompts
    from elical.train.recalibrate import platt_stage

    out = Path(cfg.output_dir)
    fsdp = accelerator.distributed_type == DistributedType.FSDP
    load_device = "cpu" if fsdp else accelerator.device
    model = _first_model(cfg, start, load_device)
    seqs, truncated = tokenize_prompts(model.tokenizer, record_prompts(model, records), cfg.max_length)
    if truncated:
        accelerator.print(f"note: {truncated} prompt(s) longer than max_length={cfg.max_length} keep their last tokens")
    pad_id = model.tokenizer.pad_token_id

    def data_of(key: str) -> StageData:
        plan = plans[key]
        nan = float("nan")
        return StageData(seqs, [nan if t is None else t for t in plan.targets], plan.train, plan.val, pad_id,
                         [nan if y is None else y for y in plan.labels])

    def save_best(wrapped, path: Path, info: dict[str, Any]) -> None:
        state_dict = accelerator.get_state_dict(wrapped) if fsdp else None
        if accelerator.is_main_process:
            accelerator.unwrap_model(wrapped).save(path, {"train": run_info, "selection": info}, state_dict)
        accelerator.wait_for_everyone()

    summaries = []
    for spec in specs:
        stage_dir = out / spec.name
        l2sp = cfg.stage2_l2sp if cfg.mode == "elical" and cfg.stage2 == "l2sp" else 0.0
        l2sp = l2sp if spec.name == STAGE_NAMES["cal"] else 0.0  # stage 2, pulled toward stage 1's weights
        calibrating = cfg.mode == "elical" and spec.name == STAGE_NAMES["cal"]  # cal-only: no stage 1 to refit
        wise = calibrating and cfg.stage2 == "wise"
        refit = calibrating and (cfg.stage2_refit or wise)  # wise interpolates from the refit: platt's model
        stage = Stage(spec.name, spec.epochs, spec.lr, digest(spec.settings), l2sp, refit)
        on_features = cfg.mode == "head-only" or (spec.name == STAGE_NAMES["cal"] and cfg.stage2 in ("head", "platt"))
        if start is not None and spec.name == STAGE_NAMES["eli"]:
            summaries.append(start.summary)  # the model in memory is its selected one
            continue
        if spec.name == STAGE_NAMES["cal"] and start is None:
            accelerator.free_memory()
            del model
            model = _stage1_model(cfg, out / STAGE_NAMES["eli"], load_device)
        if on_features:  # the head alone changes: last-token features computed once (with stage 1's LoRA)
            data = data_of(spec.data)
            cache = out / "cache" if cfg.mode == "head-only" else stage_dir / "cache"
            features = cached_features(model, data, cfg, cache, accelerator, show_progress)
            if cfg.mode == "elical" and cfg.stage2 == "platt":
                summaries.append(platt_stage(model, data, features, stage, stage_dir, save_best))
            else:
                summaries.append(train_head(model, data, cfg, features, stage, stage_dir, save_best))
            if accelerator.is_main_process:
                (stage_dir / "history.json").write_text(json.dumps(summaries[-1]["history"], indent=1))
        else:
            summaries.append(run_stage(model, data_of(spec.data), stage, cfg, accelerator, stage_dir, save_best,
                                       show_progress))
            if wise:
                stage1_dir = start.folder if start is not None else out / STAGE_NAMES["eli"]
                summaries[-1] = _wise_stage(cfg, summaries[-1], stage1_dir, stage_dir, data_of(spec.data), accelerator)
    return summaries


def _wise_stage(cfg: TrainConfig, summary: dict[str, Any], stage1_dir: Path, stage_dir: Path, data,
                accelerator) -> dict[str, Any]:
    """``stage2: wise`` after stage 2 trained (elical.train.wise), on the main process; every process returns
    the same summary."""
    from elical.train.loop import validation_confidences
    from elical.train.selection import validation_metrics
    from elical.train.wise import wise_stage

    def validate(model) -> dict[str, Any]:  # this process alone: every validation question, as a stage's epoch does
        return validation_metrics(validation_confidences(model, data, cfg, None), [data.targets[i] for i in data.val],
                                  data.val_labels())

    if accelerator.is_main_process:
        wise_stage(summary, stage1_dir, stage_dir, cfg.stage2_wise, accelerator.device, cfg.model, validate)
    accelerator.wait_for_everyone()
    return json.loads((stage_dir / "wise.json").read_text())


def _first_model(cfg: TrainConfig, start: InitStage | None, device):
    """The model the first trained stage starts from: a fresh one, or the selected stage-1 model of ``start``."""
    from elical.model.network import ConfidenceModel

    if start is None:
        return ConfidenceModel.create(cfg.model_settings(), device=device)
    return _stage1_model(cfg, start.folder, device)


def _stage1_model(cfg: TrainConfig, stage_dir: Path, device):
    """Stage 2 starts from the selected stage-1 model, LoRA and head trainable (reference.md 7.2)."""
    from elical.model.network import ConfidenceModel

    return ConfidenceModel.load(stage_dir / "best", device=device, base_model=cfg.model, trainable=True)


def _finish(out: Path, specs: Sequence[StageSpec], summaries: list[dict[str, Any]], run_info: dict[str, Any],
            accelerator) -> TrainResult:
    """The last stage's selected model becomes ``out/model``; the training log and summary are written."""
    last = out / specs[-1].name
    result = TrainResult(out / "model", summaries, run_info, accelerator.is_main_process)
    if accelerator.is_main_process:
        if (out / "model").exists():
            shutil.rmtree(out / "model")
        shutil.copytree(summaries[-1].get("best") or last / "best", out / "model")  # wise: its interpolated model
        write_training_log(out / "training_log.csv", summaries)
        (out / "train_summary.json").write_text(json.dumps(result.summary(), indent=1, default=str))
    accelerator.wait_for_everyone()
    return result


def write_training_log(path: Path, summaries: Sequence[dict[str, Any]]) -> None:
    """One row per stage and epoch (epoch 0: before training): lr, train loss, validation MSE and AUROC."""
    import csv

    columns = ["stage", "epoch", "step", "lr", "train_loss", "val_mse", "val_auroc", "val_auroc_against", "kept"]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, columns, extrasaction="ignore")
        writer.writeheader()
        for summary in summaries:
            for row in summary["history"]:
                writer.writerow({**row, "stage": summary["stage"], "kept": int(row["epoch"] == summary["best_epoch"])})
