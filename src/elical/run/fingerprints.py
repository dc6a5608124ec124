"""What decides each step of `elical run`, and the check a run makes before it starts or resumes.

Each step records its settings in ``<run>/settings/<step>.json`` (elical.fingerprint); a later step's
settings hold the digest of the step it reads (``input.<step>``), so a change invalidates exactly that
step and the steps after it:

* ``annotate`` -> records/, annotate/: the subject and its questions (settings and a digest of the
  questions drawn), the model and its weights, annotate's output settings (not batch size, device, ...).
* ``train-<model>`` -> models/<model>/, scores/<model>.parquet: method, budget, seed, the trainer's
  settings (train.settings over TrainConfig's defaults) except its SPEED_SETTINGS (packing, micro
  batches, compile, checkpoint interval, ...), the stage-2 epoch rule; input: annotate. (The trainer
  also checks its own stages in models/<model>/; this check covers the scores and refuses before the
  run starts.)
* ``honesty`` -> honesty/: the honesty plan except device and generation batch size, the gate's model;
  inputs: annotate and that model.
* ``retrieval`` -> retrieval/: how questions are answered with passages (k, decoding, wording, the corpus
  file's contents) except batch size, the groups asked, the gate's model; inputs: annotate and that model.

Evaluation and the report are recomputed from records and scores on every run, so a changed
``evaluate:`` setting simply takes effect. A run whose settings differ is refused before anything is
written, naming each step and setting; ``overwrite`` deletes the changed steps' outputs (only those) and
redoes them, keeping the steps whose settings still match, as those would come out the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elical.fingerprint import (
    Difference,
    SettingsMismatch,
    clear_outputs,
    compare_settings,
    describe,
    digest,
    record_settings,
)
from elical.model_key import ModelKey
from elical.run.config import RunConfig
from elical.run.subjects import Subject

# TrainConfig fields the run sets per model (from the method, budget, seed, subject and prompts)
SET_BY_RUN = {"output_dir", "model", "mode", "seed", "budget", "qa_template", "system_prompt"}


@dataclass
class Step:
    """One resumable step of a run: its name, what decides its outputs, and those outputs."""

    name: str
    settings: dict[str, Any]
    outputs: list[Path]


def annotate_settings(cfg: RunConfig, subject: Subject) -> dict[str, Any]:
    """What decides the run's records (see the module docstring)."""
    from elical.annotate.pipeline import annotation_fingerprint
    from elical.loading import model_version
    from elical.run.pipeline import annotate_config

    asked = subject.records if subject.records is not None else subject.items
    questions = [(it.id, list(it.answers), it.dataset, it.split) for it in asked]
    annotate = annotation_fingerprint(annotate_config(cfg, subject), {"model": model_version(subject.model)})
    return {"subject": cfg.subject, "world": cfg.world_overrides() if cfg.subject == "world" else None,
            "geo": cfg.geo.model_dump(mode="json") if cfg.subject == "geo" else None,
            "qa": cfg.qa.model_dump(mode="json") if cfg.subject == "qa" else None,
            "questions": cfg.questions.model_dump(mode="json"),
            "annotate": {k: v for k, v in annotate.items() if k != "input"},
            "input": {**annotate["input"], "questions": digest({"questions": questions})}}


def train_settings(cfg: RunConfig, key: ModelKey, annotate: str) -> dict[str, Any]:
    """What decides one trained model and its scores; ``annotate`` is the annotate step's digest (which
    covers the model and prompt wording the trainer is given)."""
    from elical.train.config import ELICAL_STAGE2, SPEED_SETTINGS, TrainConfig, stage2_settings

    plan = cfg.train
    given = plan.settings
    trainer = TrainConfig(**given.model_dump()).model_dump(mode="json", exclude=set(SPEED_SETTINGS | SET_BY_RUN | ELICAL_STAGE2))
    trainer.update(stage2_settings(key.method, given.stage2, given.stage2_mix))
    return {"method": key.method, "budget": key.budget, "seed": key.seed,
            "train": {"settings": trainer, "stage2_passes": plan.stage2_passes, "min_epochs": plan.min_epochs,
                      "max_epochs": plan.max_epochs},
            "input": {"annotate": annotate}}


def honesty_settings(cfg: RunConfig, annotate: str, gate_model: str) -> dict[str, Any]:
    """What decides the honesty comparison; ``gate_model`` is the digest of the gating model's step."""
    from elical.run.honesty import gate_choice, honesty_plan

    plan = honesty_plan(cfg).model_dump(mode="json")
    plan["settings"].pop("batch_size")
    plan["settings"]["tune"].pop("device")
    return {"honesty": plan, "gate": list(gate_choice(cfg)), "input": {"annotate": annotate, "gate": gate_model}}


def retrieval_settings(cfg: RunConfig, subject: Subject, annotate: str, gate_model: str) -> dict[str, Any]:
    """What decides the retrieval step; ``gate_model`` is the digest of the gating model's step."""
    from elical.run.retrieval import step_settings

    return {"retrieval": step_settings(cfg, subject), "input": {"annotate": annotate, "gate": gate_model}}


def run_steps(cfg: RunConfig, subject: Subject, out: Path) -> list[Step]:
    """The resumable steps of this run, in order, with their settings and outputs."""
    from elical.run.honesty import gate_choice
    from elical.run.pipeline import planned_models

    annotate = annotate_settings(cfg, subject)
    steps = [Step("annotate", annotate, [out / "records", out / "annotate"])]
    trained: dict[ModelKey, str] = {}
    for key in planned_models(cfg):
        settings = train_settings(cfg, key, digest(annotate))
        trained[key] = digest(settings)
        steps.append(Step(f"train-{key.name}", settings, [out / "models" / key.name,
                                                          out / "scores" / f"{key.name}.parquet"]))
    if cfg.honesty is not None:
        gate = ModelKey("elical", *gate_choice(cfg))
        steps.append(Step("honesty", honesty_settings(cfg, digest(annotate), trained[gate]), [out / "honesty"]))
    if cfg.retrieval is not None:
        from elical.run.retrieval import FOLDER, retrieval_gate

        gate = ModelKey("elical", *retrieval_gate(cfg))
        steps.append(Step("retrieval", retrieval_settings(cfg, subject, digest(annotate), trained[gate]),
                          [out / FOLDER]))
    return steps


def check_run_folder(cfg: RunConfig, subject: Subject, out: Path, overwrite: bool = False) -> list[str]:
    """Compare every step's settings with those recorded in ``out``; refuse with :class:`SettingsMismatch`
    (nothing written) when any differ, or with ``overwrite`` delete those steps' outputs. Records the
    settings of every step and returns the names of the steps that were cleared."""
    steps = run_steps(cfg, subject, out)
    changed = [(s, problem) for s in steps if (problem := compare_settings(out, s.name, s.settings, s.outputs)) != []]
    if changed and not overwrite:
        raise SettingsMismatch(out, _grouped(changed), "rerun with --overwrite to redo those steps (the others are "
                                                      "kept), or use a new run name or --out folder")
    for step, _ in changed:
        clear_outputs(out, step.name, step.outputs)
    for step in steps:
        record_settings(out, step.name, step.settings)
    return [step.name for step, _ in changed]


def _grouped(changed: Sequence[tuple[Step, list[Difference] | None]]) -> dict[str, list[Difference] | None]:
    """Steps that differ alike under one label ('train (12 models)'), so the message stays short."""
    groups: dict[tuple[str, str], list[tuple[Step, list[Difference] | None]]] = {}
    for step, problem in changed:
        groups.setdefault((step.name.split("-", 1)[0], describe(problem)), []).append((step, problem))
    return {(members[0][0].name if len(members) == 1 else f"{kind} ({len(members)} models)"): members[0][1]
            for (kind, _), members in groups.items()}
