"""What decides each step of `elical run`, and the check a run makes before it starts or resumes.

Each step records its settings in ``<run>/settings/<step>.json`` (elical.core.fingerprint); a later step's
settings hold the digest of the step it reads (``input.<step>``), so a change invalidates exactly that
step and the steps after it:

* ``annotate`` -> records/, annotate/: the subject and its questions (settings and a digest of the
  questions drawn), the model and its weights, annotate's output settings (not batch size, device, ...).
* ``train-<model>`` -> models/<model>/, scores/<model>.parquet: method, budget, seed, the trainer's
  settings (train.settings) except those marked Output.NEVER (packing, micro batches, compile,
  checkpoint interval, ...), the stage-2 epoch rule, the model's label selection strategy (unless random); input:
  annotate. (The trainer also checks its own stages in models/<model>/, the selected labels' order included;
  this check covers the scores and refuses before the run starts.)
* ``select-stage2`` -> stage2_selection.json (remade on every run, nothing to clear): ``train.select_on`` and,
  with ood-holdout, the selection datasets, the candidate recipes and the rule; input: every candidate's
  train step (run/stage2_selection.py). Recorded with select_on none too, so switching it is refused.
* ``label-strategies`` (``train.label_selection`` lists several strategies; nothing to clear, the comparison is
  remade on every run): the list, so a run resumed with another list is refused as one with other
  ``train.stage2_candidates`` is; ``--overwrite`` then trains the added strategies' models only.
* ``honesty`` -> honesty/: the honesty plan except device and generation batch size, the gate's model (with
  a selection: the select-stage2 step, which decides it); inputs: annotate and that model.
* ``retrieval`` -> retrieval/: how questions are answered with passages (k, decoding, wording, the corpus
  file's contents) except batch size, the groups asked, the gate's model; inputs: annotate and that model.

Evaluation and the report are recomputed from records and scores on every run, so a changed
``evaluate:`` setting simply takes effect. A run whose settings differ is refused before anything is
written, naming each step and setting; ``overwrite`` deletes the changed steps' outputs (only those) and
redoes them, keeping the steps whose settings still match, as those would come out the same.

The steps themselves, with their outputs, are run/steps/sequence.py's (its ``check_run_folder`` checks a run's
steps with :func:`check_steps`); this module says what decides each one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elical.core.fingerprint import (
    Difference,
    SettingsMismatch,
    clear_outputs,
    compare_settings,
    describe,
    digest,
    record_settings,
)
from elical.model.key import ModelKey
from elical.run.config import RunConfig
from elical.run.subjects.subject import Subject, annotate_config

if TYPE_CHECKING:
    from elical.run.steps.sequence import Step


def annotate_settings(cfg: RunConfig, subject: Subject) -> dict[str, Any]:
    """What decides the run's records (see the module docstring)."""
    from elical.annotate.pipeline import annotation_fingerprint
    from elical.model.loading import model_version

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
    from elical.core.settings_contract import output_settings
    from elical.train.config import stage2_settings

    plan = cfg.train
    given = plan.settings  # the trainer's settings but those the run sets per model (model, seed, budget, ...)
    recipe = key.stage2 or given.stage2  # a recipe candidate's own (train.select_on), else the plan's one
    trainer = {**output_settings(given), **stage2_settings(key.method, recipe, given.stage2_mix, given.stage2_l2sp,
                                                           given.stage2_refit, given.stage2_wise)}
    # the strategy that chose the labels (random, the default, adds nothing: runs made before selection still resume)
    selection = {"label_selection": plan.strategy_of(key)} if plan.selects_labels(key) else {}
    return {"method": key.method, "budget": key.budget, "seed": key.seed,
            "train": {"settings": trainer, "stage2_passes": plan.stage2_passes, "min_epochs": plan.min_epochs,
                      "max_epochs": plan.max_epochs, **selection},
            "input": {"annotate": annotate}}


def honesty_settings(cfg: RunConfig, annotate: str, gate_model: str) -> dict[str, Any]:
    """What decides the honesty comparison; ``gate_model`` is the digest of the gating model's step."""
    from elical.core.settings_contract import output_settings
    from elical.run.steps.honesty_step import gate_choice, honesty_plan

    plan = output_settings(honesty_plan(cfg))  # not the generation batch size or the tuning device
    return {"honesty": plan, "gate": list(gate_choice(cfg)), "input": {"annotate": annotate, "gate": gate_model}}


def retrieval_settings(cfg: RunConfig, subject: Subject, annotate: str, gate_model: str) -> dict[str, Any]:
    """What decides the retrieval step; ``gate_model`` is the digest of the gating model's step."""
    from elical.run.steps.retrieval_step import step_settings

    return {"retrieval": step_settings(cfg, subject), "input": {"annotate": annotate, "gate": gate_model}}


def check_steps(steps: Sequence[Step], out: Path, overwrite: bool = False) -> list[str]:
    """Compare every step's settings with those recorded in ``out``; refuse with :class:`SettingsMismatch`
    (nothing written) when any differ, or with ``overwrite`` delete those steps' outputs. Records the
    settings of every step and returns the names of the steps that were cleared."""
    recorded = [(step, _settings(step)) for step in steps]
    changed = [(s, problem) for s, settings in recorded
               if (problem := compare_settings(out, s.name, settings, s.outputs())) != []]
    if changed and not overwrite:
        raise SettingsMismatch(out, _grouped(changed), "rerun with --overwrite to redo those steps (the others are "
                                                      "kept), or use a new run name or --out folder")
    for step, _ in changed:
        clear_outputs(out, step.name, step.outputs())
    for step, settings in recorded:
        record_settings(out, step.name, settings)
    return [step.name for step, _ in changed]


def _settings(step: Step) -> dict[str, Any]:
    settings = step.settings()
    if settings is None:
        raise ValueError(f"{step.name}: a step without settings has nothing to check")
    return settings


def _grouped(changed: Sequence[tuple[Step, list[Difference] | None]]) -> dict[str, list[Difference] | None]:
    """Steps that differ alike under one label ('train (12 models)'), so the message stays short."""
    groups: dict[tuple[str, str], list[tuple[Step, list[Difference] | None]]] = {}
    for step, problem in changed:
        groups.setdefault((step.name.split("-", 1)[0], describe(problem)), []).append((step, problem))
    return {(members[0][0].name if len(members) == 1 else f"{kind} ({len(members)} models)"): members[0][1]
            for (kind, _), members in groups.items()}
