"""The steps of `elical run`, as values: annotate -> train (one step per planned model) -> select-stage2 (with
``train.select_on: ood-holdout``) -> evaluate -> label-strategies (with several ``train.label_selection``
strategies) -> honesty -> retrieval -> report.

A :class:`Step` says what decides its outputs (``settings``, recorded in ``settings/<name>.json`` by
run/fingerprints.py; None for the steps recomputed on every run), which earlier steps it reads
(``inputs``), where its outputs go (``outputs``, paths of the :class:`RunFolder`), whether they are there
(``done``, decided in one place per step) and how to get its value (``run``: made, or read back when done).
A step hands the next one its value (:class:`Annotated` records, a :class:`Trained` model with its
predictions, the Evaluation, the honesty outcome with its gate, the retrieval run), never a file to
re-read; only a step that is done reads its own outputs back.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from elical.core.fingerprint import digest
from elical.model.key import ModelKey
from elical.records import Record, read_parquet, write_parquet
from elical.run.config import RunConfig, planned_models
from elical.run.fingerprints import (
    annotate_settings,
    check_steps,
    honesty_settings,
    retrieval_settings,
    train_settings,
)
from elical.run.folder import RunFolder
from elical.run.subjects.subject import Subject, annotate_config

if TYPE_CHECKING:
    from elical.evaluation.config import EvalConfig
    from elical.evaluation.evaluate import Evaluation
    from elical.model.predictions import Predictions
    from elical.run.label_strategies import StrategyComparison
    from elical.run.stage2_selection import Selection
    from elical.run.steps.honesty_step import HonestyOutcome
    from elical.run.steps.retrieval_step import RetrievalRun
    from elical.run.timings import StepClock

T = TypeVar("T")


class Step(Protocol):
    """One step of a run, as the run loop and the settings check see it."""

    @property
    def name(self) -> str:
        """timings.json's key; for a step with settings, also settings/<name>.json's."""

    @property
    def inputs(self) -> Sequence[Step]:
        """The earlier steps whose values this one reads."""

    def settings(self) -> dict[str, Any] | None:
        """What decides its outputs (None: recomputed on every run, nothing recorded)."""

    def outputs(self) -> list[Path]:
        """Its outputs in the run folder (what ``--overwrite`` deletes when its settings changed)."""

    def done(self) -> bool:
        """Whether its outputs are there (a resumed run reads them back instead of redoing the work)."""

    def run(self) -> object:
        """Its value: made, or read back when done."""


@dataclass
class RunContext:
    """What every step of one run is given: the config, the questions, the folder, the log, and the clock
    (set once the run holds the folder: a long step records the time it spent on it as it goes)."""

    cfg: RunConfig
    subject: Subject
    folder: RunFolder
    log: Callable[[str], None] = print
    clock: StepClock | None = None

    def progress(self, step: str) -> None:
        """Record the time spent so far on ``step`` (timings.json), so a stopped run keeps it."""
        if self.clock is not None:
            self.clock.progress(step)


class RunStep(ABC, Generic[T]):
    """A step that keeps its value for the steps after it: ``run`` reads its outputs back when ``done``
    (:meth:`load`), else makes them (:meth:`make`)."""

    name: str
    inputs: Sequence[Step] = ()

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self._value: T | None = None

    def settings(self) -> dict[str, Any] | None:
        return None

    def outputs(self) -> list[Path]:
        return []

    def done(self) -> bool:
        return False

    def run(self) -> T:
        self._value = self.load() if self.done() else self.make()
        return self._value

    @property
    def value(self) -> T:
        """The value of the step's run, for the steps after it."""
        if self._value is None:
            raise RuntimeError(f"{self.name}: its value is read before the step ran")
        return self._value

    def load(self) -> T:
        """The value from the outputs of a finished step."""
        raise NotImplementedError(f"{self.name} is made on every run")

    @abstractmethod
    def make(self) -> T:
        """Do the step's work, writing its outputs."""


# ----------------------------------------------------------------------------------------------- annotate


@dataclass(frozen=True)
class Annotated:
    """The annotate step's value: the run's records (records/)."""

    records: list[Record]

    @property
    def pool(self) -> list[Record]:
        """The calibration pool (records/train.parquet): training questions that did not fail."""
        return [r for r in self.records if r.split == "train" and not r.failed]

    @property
    def evaluation(self) -> list[Record]:
        """The evaluation records (records/eval.parquet), failed ones included."""
        return [r for r in self.records if r.split != "train"]


class Annotate(RunStep[Annotated]):
    """Greedy answer + k samples per question, judged; records split into records/<dataset>_<split>.parquet."""

    name = "annotate"

    @cached_property
    def _settings(self) -> dict[str, Any]:
        return annotate_settings(self.ctx.cfg, self.ctx.subject)

    def settings(self) -> dict[str, Any]:
        return self._settings

    def outputs(self) -> list[Path]:
        return [self.ctx.folder.records, self.ctx.folder.annotate]

    def done(self) -> bool:
        return self.ctx.folder.pool.exists() and self.ctx.folder.evaluation_records.exists()

    def load(self) -> Annotated:
        self.ctx.log("annotate: records exist, skipped")
        return Annotated(read_parquet(self.ctx.folder.pool) + read_parquet(self.ctx.folder.evaluation_records))

    def make(self) -> Annotated:
        from elical.annotate.pipeline import annotate
        from elical.annotate.run import build_backend
        from elical.model.loading import model_version

        cfg, subject, folder, log = self.ctx.cfg, self.ctx.subject, self.ctx.folder, self.ctx.log
        if subject.records is not None:
            log(f"annotate: {len(subject.records)} records given (qa.records), nothing generated")
            records = subject.records
        else:
            ann = annotate_config(cfg, subject)
            records = annotate(subject.items, build_backend(ann), None, ann, folder.annotate, progress=True,
                               on_chunk=lambda _: self.ctx.progress(self.name),
                               versions={"model": model_version(subject.model)})
        failed = [r for r in records if r.failed]
        if failed:
            log(f"annotate: {len(failed)} question(s) failed and are left out (first: {failed[0].failure})")
        by_file: dict[tuple[str, str], list[Record]] = {}
        for rec in records:
            by_file.setdefault((rec.dataset, rec.split), []).append(rec)
        for (dataset, split), recs in by_file.items():
            write_parquet(recs, folder.dataset_records(dataset, split))
        annotated = Annotated(records)
        write_parquet(annotated.evaluation, folder.evaluation_records)
        write_parquet(annotated.pool, folder.pool)
        return annotated


# ----------------------------------------------------------------------------------------------- train


@dataclass(frozen=True)
class Trained:
    """A train-<model> step's value: the model's key, its weights (model/) and its predictions on the
    evaluation records (with its key)."""

    key: ModelKey
    weights: Path
    predictions: Predictions


class TrainModel(RunStep[Trained]):
    """One planned model (method x budget x seed): trained, then its predictions written to scores/."""

    def __init__(self, ctx: RunContext, key: ModelKey, annotate: Annotate) -> None:
        super().__init__(ctx)
        self.key = key
        self.annotate = annotate
        self.name = f"train-{key.name}"
        self.inputs = (annotate,)

    @cached_property
    def _settings(self) -> dict[str, Any]:
        return train_settings(self.ctx.cfg, self.key, digest(self.annotate.settings()))

    def settings(self) -> dict[str, Any]:
        return self._settings

    def outputs(self) -> list[Path]:
        return [self.ctx.folder.model(self.key), self.ctx.folder.score_file(self.key)]

    def done(self) -> bool:
        return self.ctx.folder.score_file(self.key).exists()

    def load(self) -> Trained:
        """The model's predictions (files written before keys were stored in them get the run plan's)."""
        from elical.model.predictions import read_predictions

        predictions = read_predictions(self.ctx.folder.score_file(self.key))
        if predictions.key is None:
            predictions = replace(predictions, key=self.key)
        return Trained(self.key, self.ctx.folder.weights(self.key), predictions)

    def make(self) -> Trained:
        from elical.run.steps.training_step import train_model

        ctx = self.ctx
        train_model(ctx.cfg, ctx.subject, ctx.folder, self.key, len(self.annotate.value.pool), ctx.log)
        return self.load()


class Train(RunStep[dict[ModelKey, Trained]]):
    """Every method x budget x seed of the plan (Eli-Only first: EliCal starts from its stage 1), each a
    :class:`TrainModel` step; its value: the trained models of the plan's methods."""

    name = "train"

    def __init__(self, ctx: RunContext, annotate: Annotate) -> None:
        super().__init__(ctx)
        self.inputs = (annotate,)
        self.annotate = annotate
        self.models = {key: TrainModel(ctx, key, annotate) for key in planned_models(ctx.cfg)}

    def outputs(self) -> list[Path]:
        return [path for model in self.models.values() for path in model.outputs()]

    def done(self) -> bool:
        return all(model.done() for model in self.models.values())

    def make(self) -> dict[ModelKey, Trained]:
        from elical.run.steps.training_step import check_budgets, train_parallel

        ctx = self.ctx
        pool_size = len(self.annotate.value.pool)
        check_budgets(ctx.cfg, pool_size, "annotated training questions (failed ones left out)")
        trained: set[ModelKey] = set()
        if ctx.cfg.train.workers > 1:
            trained = set(train_parallel(ctx.cfg, ctx.subject, ctx.folder, pool_size, ctx.log,
                                         lambda: ctx.progress(self.name)))
        for key, model in self.models.items():
            model.run()
            if key not in trained:
                ctx.progress(self.name)
        return {key: model.value for key, model in self.models.items() if key.method in ctx.cfg.train.methods}

    def load(self) -> dict[ModelKey, Trained]:
        return self.make()  # every model reads its predictions back


# ----------------------------------------------------------------------------------------------- select


class Select(RunStep["Selection"]):
    """``train.select_on: ood-holdout``: EliCal's stage-2 recipe chosen on the held-out selection datasets
    (run/stage2_selection.py), written to stage2_selection.json on every run. Its settings (the datasets, the
    candidates, the rule and every candidate's training) are recorded, so a changed choice is refused on
    resume; with select_on none only that is recorded (switching select_on on a folder is refused) and the step
    is not run."""

    name = "select-stage2"

    def __init__(self, ctx: RunContext, annotate: Annotate, train: Train) -> None:
        super().__init__(ctx)
        self.annotate, self.train = annotate, train
        self.candidates = [m for k, m in train.models.items() if k.stage2 is not None]
        self.inputs = (annotate, *self.candidates)

    @cached_property
    def _settings(self) -> dict[str, Any]:
        from elical.run.stage2_selection import selection_settings

        return selection_settings(self.ctx.cfg, {m.name: digest(m.settings()) for m in self.candidates})

    def settings(self) -> dict[str, Any]:
        return self._settings

    # outputs: none to clear; stage2_selection.json is written on every run, like the evaluation (and a step without
    # outputs has its settings compared on every resume, also where it does not run)

    def make(self) -> Selection:
        from elical.run.stage2_selection import select_recipe, write_selection

        ctx = self.ctx
        held = set(ctx.cfg.train.select_datasets)
        records = [r for r in self.annotate.value.evaluation if not r.failed]
        groups = {**ctx.subject.groups, **ctx.cfg.evaluate.groups}
        models = {k: t.predictions for k, t in self.train.value.items() if k.stage2 is not None or k.method == "eli-only"}
        selection = select_recipe(ctx.cfg, records, models, groups)
        write_selection(ctx.folder.stage2_selection, selection, ctx.cfg)
        scores = ", ".join(f"{r} {v:.3f}" for r, v in selection.scores.items())
        ctx.log(f"select-stage2: {selection.winner} chosen on {', '.join(sorted(held))} (mean AUROC: {scores})")
        return selection


def reported_records(cfg: RunConfig, records: Sequence[Record]) -> list[Record]:
    """The records the report is about: with ``train.select_on`` ood-holdout, the selection datasets' evaluated
    questions are left out (they chose the recipe, so they are not reported)."""
    held = set(cfg.train.select_datasets) if cfg.train.select_on != "none" else set()
    return [r for r in records if r.split == "train" or r.dataset not in held]


# ----------------------------------------------------------------------------------------------- evaluate


def evaluation_inputs(ctx: RunContext, annotate: Annotate) -> tuple[list[Record], EvalConfig]:
    """What the run's models are scored on and with: the reported evaluation records that did not fail, and the
    evaluation settings with the subject's dataset groups (the run's own override them)."""
    cfg = ctx.cfg
    records = [r for r in reported_records(cfg, annotate.value.evaluation) if not r.failed]
    return records, cfg.evaluate.model_copy(update={"groups": {**ctx.subject.groups, **cfg.evaluate.groups}})


class Evaluate(RunStep["Evaluation"]):
    """Baselines from the records and the trained models' predictions, scored on the evaluation records
    (recomputed on every run, so a changed ``evaluate:`` setting simply takes effect). With a selection
    (``select-stage2``): the reported records only, and of the EliCal candidates the chosen recipe's models; with
    several label selection strategies, the first strategy's models (:meth:`TrainPlan.reported`)."""

    name = "evaluate"

    def __init__(self, ctx: RunContext, annotate: Annotate, train: Train, select: Select | None = None) -> None:
        super().__init__(ctx)
        self.annotate, self.train, self.select = annotate, train, select
        self.inputs = (annotate, train) if select is None else (annotate, train, select)

    def make(self) -> Evaluation:
        from elical.evaluation.evaluate import evaluate

        cfg = self.ctx.cfg
        eval_records, ecfg = evaluation_inputs(self.ctx, self.annotate)
        winner = self.select.value.winner if self.select is not None else None
        predictions = [t.predictions for k, t in self.train.value.items()
                       if k.stage2 in (None, winner) and cfg.train.reported(k)]
        return evaluate(eval_records, predictions, ecfg)


class CompareStrategies(RunStep["StrategyComparison"]):
    """Several ``train.label_selection`` strategies: every strategy's Cal-Only and EliCal models scored on the
    reported records, for the label curve's lines and the strategy table (run/label_strategies.py); recomputed on
    every run. Its settings (the list) are recorded, so a changed list is refused on resume as a changed
    ``train.stage2_candidates`` is; ``--overwrite`` then trains the new strategies' models only, keeping the
    others (their own settings did not change)."""

    name = "label-strategies"

    def __init__(self, ctx: RunContext, annotate: Annotate, train: Train) -> None:
        super().__init__(ctx)
        self.annotate, self.train = annotate, train
        self.inputs = (annotate, train)

    def settings(self) -> dict[str, Any]:
        return {"train": {"label_selection": self.ctx.cfg.train.strategies()}}

    def make(self) -> StrategyComparison:
        from elical.run.label_strategies import compare_strategies, strategy_evaluation

        eval_records, ecfg = evaluation_inputs(self.ctx, self.annotate)
        evaluation = strategy_evaluation(eval_records, {k: t.predictions for k, t in self.train.value.items()}, ecfg)
        return compare_strategies(evaluation, self.ctx.cfg.train, len(self.annotate.value.pool))


# ----------------------------------------------------------------------------------------------- honesty, retrieval


class Gate:
    """The EliCal model a honesty or retrieval section gates on, at its (budget, seed): the plan's one, or
    with a selection the chosen recipe's. Its step is that model's, or the select step (whose settings hold
    every candidate's), so the section's record names what decides the gate either way."""

    def __init__(self, train: Train, budget: int | Literal["all"], seed: int, select: Select | None) -> None:
        self.train, self.budget, self.seed, self.select = train, budget, seed, select
        self.step: Step = select if select is not None else train.models[self._key()]

    def _key(self) -> ModelKey:
        """The plan's EliCal model at the gate's budget and seed (of the first label selection strategy)."""
        return self.train.ctx.cfg.train.reported_key("elical", self.budget, self.seed)

    def settings(self) -> dict[str, Any]:
        """The settings of the step that decides the gate."""
        settings = self.step.settings()
        if settings is None:
            raise RuntimeError(f"{self.step.name} records no settings, so it cannot decide a gate")
        return settings

    @property
    def value(self) -> Trained:
        """The gating model (after the train and select steps ran)."""
        key = self._key() if self.select is None else self.select.value.key(self.budget, self.seed)
        return self.train.models[key].value


class Honesty(RunStep["HonestyOutcome"]):
    """The ``honesty:`` section: the fine-tuning methods against the EliCal gate (run/steps/honesty_step.py)."""

    name = "honesty"

    def __init__(self, ctx: RunContext, annotate: Annotate, train: Train, select: Select | None = None) -> None:
        from elical.run.steps.honesty_step import gate_choice

        super().__init__(ctx)
        self.annotate, self.gate = annotate, Gate(train, *gate_choice(ctx.cfg), select)
        self.inputs = (annotate, self.gate.step)

    def settings(self) -> dict[str, Any]:
        return honesty_settings(self.ctx.cfg, digest(self.annotate.settings()), digest(self.gate.settings()))

    def outputs(self) -> list[Path]:
        return [self.ctx.folder.honesty]

    def done(self) -> bool:
        return self.ctx.folder.honesty_info.exists() and self.ctx.folder.honesty_table.exists()

    def load(self) -> HonestyOutcome:
        from elical.run.steps.honesty_step import load_honesty

        self.ctx.log("honesty: table exists, skipped")
        return load_honesty(self.ctx.folder)

    def make(self) -> HonestyOutcome:
        from elical.run.steps.honesty_step import honesty_step

        ctx = self.ctx
        return honesty_step(ctx.cfg, ctx.subject, ctx.folder, self.annotate.value, self.gate.value, ctx.log)


class Retrieval(RunStep["RetrievalRun"]):
    """The ``retrieval:`` section: questions answered again with passages, gated by EliCal (run/steps/retrieval_step.py)."""

    name = "retrieval"

    def __init__(self, ctx: RunContext, annotate: Annotate, train: Train, select: Select | None = None) -> None:
        from elical.run.steps.retrieval_step import retrieval_gate

        super().__init__(ctx)
        self.annotate, self.gate = annotate, Gate(train, *retrieval_gate(ctx.cfg), select)
        self.inputs = (annotate, self.gate.step)

    def settings(self) -> dict[str, Any]:
        return retrieval_settings(self.ctx.cfg, self.ctx.subject, digest(self.annotate.settings()),
                                  digest(self.gate.settings()))

    def outputs(self) -> list[Path]:
        return [self.ctx.folder.retrieval]

    def done(self) -> bool:
        return self.ctx.folder.retrieval_summary.exists()

    def load(self) -> RetrievalRun:
        from elical.run.steps.retrieval_step import load_retrieval

        self.ctx.log("retrieval: answers exist, skipped")
        return load_retrieval(self.ctx.folder)

    def make(self) -> RetrievalRun:
        from elical.run.steps.retrieval_step import retrieval_step

        ctx = self.ctx
        return retrieval_step(ctx.cfg, ctx.subject, ctx.folder, self.annotate.value, self.gate.value, ctx.log)


# ----------------------------------------------------------------------------------------------- report


class Report(RunStep[Path]):
    """Every table, figure and the two report pages, from the values of the steps before (every run)."""

    name = "report"

    def __init__(self, ctx: RunContext, annotate: Annotate, evaluate: Evaluate, honesty: Honesty | None,
                 retrieval: Retrieval | None, select: Select | None = None,
                 strategies: CompareStrategies | None = None) -> None:
        super().__init__(ctx)
        self.annotate, self.evaluate, self.honesty, self.retrieval = annotate, evaluate, honesty, retrieval
        self.select, self.strategies = select, strategies
        self.inputs = tuple(s for s in (annotate, select, evaluate, strategies, honesty, retrieval) if s is not None)

    def make(self) -> Path:
        from elical.run.report import write_run_report

        ctx = self.ctx
        timings = ctx.clock.timings if ctx.clock else {}
        cpu = ctx.clock.cpu_seconds if ctx.clock else {}
        return write_run_report(ctx.cfg, ctx.subject, reported_records(ctx.cfg, self.annotate.value.records),
                                self.evaluate.value, ctx.folder, timings, cpu,
                                self.honesty.value if self.honesty else None,
                                self.retrieval.value if self.retrieval else None,
                                stage2_selection=self.select.value if self.select else None,
                                strategies=self.strategies.value if self.strategies else None)


# ----------------------------------------------------------------------------------------------- the plan


@dataclass
class RunSteps:
    """The steps of one run, wired to each other's values."""

    annotate: Annotate
    train: Train
    evaluate: Evaluate
    report: Report
    honesty: Honesty | None = None
    retrieval: Retrieval | None = None
    select: Select | None = None  # always recorded; run with train.select_on ood-holdout only
    strategies: CompareStrategies | None = None  # several train.label_selection strategies only

    def loop(self) -> list[Step]:
        """The steps in the order the run does them."""
        optional: list[Step] = [s for s in (self.strategies, self.honesty, self.retrieval) if s is not None]
        chosen: list[Step] = [self.select] if self.select is not None and self.evaluate.select is not None else []
        return [self.annotate, self.train, *chosen, self.evaluate, *optional, self.report]

    def recorded(self) -> list[Step]:
        """The resumable steps, whose settings the run folder records (annotate, train-<model>, ...)."""
        return [s for s in (self.annotate, *self.train.models.values(), self.select, self.strategies, self.honesty,
                            self.retrieval) if s is not None]


def run_steps(ctx: RunContext) -> RunSteps:
    """This run's steps: annotate, train per planned model, select-stage2 (run with train.select_on ood-holdout),
    evaluate, the config's honesty and retrieval sections, report."""
    annotate = Annotate(ctx)
    train = Train(ctx, annotate)
    select = Select(ctx, annotate, train)
    chosen = select if ctx.cfg.train.select_on != "none" else None
    evaluate = Evaluate(ctx, annotate, train, chosen)
    honesty = Honesty(ctx, annotate, train, chosen) if ctx.cfg.honesty is not None else None
    retrieval = Retrieval(ctx, annotate, train, chosen) if ctx.cfg.retrieval is not None else None
    strategies = CompareStrategies(ctx, annotate, train) if ctx.cfg.train.several_strategies() else None
    report = Report(ctx, annotate, evaluate, honesty, retrieval, chosen, strategies)
    return RunSteps(annotate, train, evaluate, report, honesty, retrieval, select, strategies)


def check_run_folder(cfg: RunConfig, subject: Subject, out: Path, overwrite: bool = False) -> list[str]:
    """:func:`elical.run.fingerprints.check_steps` on this run's steps: refuse other settings than the
    folder's outputs were made with, or with ``overwrite`` clear those steps; the names of the cleared steps."""
    return check_steps(run_steps(RunContext(cfg, subject, RunFolder(out))).recorded(), Path(out), overwrite)
