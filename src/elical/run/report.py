"""The run's report folder: results.csv (per seed), summary.csv, differences.csv, table2.md, figures, report.md
and report.html.

Computing and showing are kept apart: :func:`write_run_report` computes every table (elical.run.results,
elical.run.method_differences) and figure into a :class:`RunNumbers`, :func:`run_document` turns those into a
:class:`~elical.report.document.Document`, and one writer renders it as report.md and as report.html
(figures embedded, so the page is one file someone can mail); both always hold the same sections.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from elical.audit.audit_report import NO_AUDIT, label_quality_blocks
from elical.audit.audit_report import SECTION as LABEL_QUALITY_SECTION
from elical.evaluation.evaluate import Evaluation
from elical.honesty.scoring import SCORE_NOTE
from elical.metrics.base import higher_is_better, metric_label
from elical.model.key import METHOD_NAMES, ModelKey
from elical.records import Record, atomic_write
from elical.report import figures
from elical.report.document import Block, Bullets, Document, Figure, Heading, Paragraph, Table, write_document
from elical.report.tables import metric_blocks, render_markdown
from elical.report.writer import write_csv
from elical.run.config import RunConfig
from elical.run.folder import RunFolder
from elical.run.label_strategies import StrategyComparison, strategy_blocks
from elical.run.method_differences import readings, run_differences, summary_table
from elical.run.paper_targets import paper_targets
from elical.run.results import (
    Finding,
    consistency_by_exposure,
    findings,
    mean_metrics_table,
    results_table,
    seed_summary,
    transfer_matrix,
)
from elical.run.stage2_selection import Selection, selection_blocks
from elical.run.steps.honesty_step import HonestyOutcome, display_tables, honesty_results
from elical.run.steps.retrieval_step import RetrievalReport, RetrievalRun, retrieval_report
from elical.run.subjects.by_name import Subject

HONESTY_SECTION = "Honesty (Alignment for Honesty vs EliCal gate)"
RETRIEVAL_SECTIONS = ("Adaptive retrieval", "Abstention")  # with a retrieval: section, before the honesty one
SECTIONS = ("Findings", "Targets from the paper", "Setup", "Table 2", "Differences (paired bootstrap)",
            "Where it transfers", "Confidence vs labels", "Self-consistency and exposure", "Reliability diagrams", LABEL_QUALITY_SECTION,
            "Notes")


@dataclass(kw_only=True)
class RunNumbers:
    """Everything the report shows, computed before any of it is rendered (built by keyword only)."""

    cfg: RunConfig
    subject: Subject
    records: Sequence[Record]
    evaluation: Evaluation
    pool_size: int
    results: pd.DataFrame
    summary: pd.DataFrame
    differences: pd.DataFrame
    mean_table: pd.DataFrame
    exposure: pd.DataFrame
    found: list[Finding]
    reliability: list[tuple[str, str]]  # (figure path relative to the run folder, model label)
    timings: dict[str, float]
    cpu_seconds: dict[str, float]
    honesty: HonestyOutcome | None = None
    retrieval: RetrievalReport | None = None
    label_quality: list[Block] | None = None  # the label audit's section (audit/audit_report.py); None: no audit shown
    stage2_selection: Selection | None = None  # train.select_on ood-holdout: the stage-2 recipe chosen (its section)
    strategies: StrategyComparison | None = None  # several train.label_selection strategies: their lines and table

    @property
    def seeds(self) -> int:
        """How many training seeds the trained models' numbers rest on."""
        return int(self.results[self.results.method.isin(list(METHOD_NAMES.values()))].seed.nunique())


def _reliability(evaluation: Evaluation, method: str, groups: dict[str, str], title: str, path: Path) -> bool:
    """Draw the in-domain reliability diagram of ``method``; False when it has no confidences in [0, 1]."""
    parts = [s for d, s in evaluation.scores.get(method, {}).items() if groups.get(d, "other") == "in-domain"]
    if not parts:
        return False
    conf = np.concatenate([s.confidence for s in parts])
    correct = np.concatenate([s.correct for s in parts])
    if conf.size == 0 or conf.min() < 0 or conf.max() > 1:
        return False
    figures.reliability_diagram(conf, correct, title, path)
    return True


def reliability_figures(cfg: RunConfig, subject: Subject, evaluation: Evaluation, pool_size: int,
                        folder: Path) -> list[tuple[str, str]]:
    """In-domain reliability diagrams of Consis-Sem and the first seed's models at the reliability budget."""
    seed = cfg.train.seeds[0] if cfg.train.seeds else 0
    budget = cfg.reliability_budget or (cfg.train.budgets[0] if cfg.train.budgets else None)
    keys = [ModelKey("eli-only", None, seed)]
    elical = {(k.budget, k.seed): k for k in evaluation.models.values() if k.method == "elical"}  # the chosen recipe's
    if budget is not None:
        keys += [cfg.train.reported_key("cal-only", budget, seed),
                 elical.get((budget, seed), ModelKey("elical", budget, seed)),
                 elical.get(("all", seed), ModelKey("elical", "all", seed))]
    candidates = [("Consis-Sem", "Consis-Sem")] + [(k.name, k.display(pool_size)) for k in dict.fromkeys(keys)]
    drawn = []
    for method, label in candidates:
        path = folder / f"reliability_{method}.png"
        if _reliability(evaluation, method, subject.groups, f"{label}, in-domain, seed {seed}", path):
            drawn.append((f"{folder.name}/{path.name}", label))
    return drawn


def _label_figures(numbers: RunNumbers, folder: Path) -> None:
    splits = [s for s in ("in-domain", "ood", "mc") if s in set(numbers.results.split)]
    training_free = numbers.evaluation.baselines
    lines = numbers.strategies.summary if numbers.strategies is not None else None  # one line per strategy
    figures.metric_vs_labels(numbers.summary, "auroc", splits, folder / "auroc_vs_labels.png", "AUROC",
                             training_free, lines)
    figures.metric_vs_labels(numbers.summary, "alignment", splits, folder / "alignment_vs_labels.png",
                             "alignment (accuracy)", training_free, lines)
    if not numbers.exposure.empty:
        figures.consistency_exposure_plot(numbers.exposure, folder / "consistency_by_exposure.png",
                                          "population quartile of the subject" if numbers.cfg.subject == "geo"
                                          else "times the fact is stated in the pretraining corpus")


def write_run_report(cfg: RunConfig, subject: Subject, records: Sequence[Record], evaluation: Evaluation,
                     out: RunFolder, timings: dict[str, float], cpu_seconds: dict[str, float] | None = None,
                     honesty: HonestyOutcome | None = None, retrieval: RetrievalRun | None = None, *,
                     stage2_selection: Selection | None = None, strategies: StrategyComparison | None = None) -> Path:
    """Write every table, figure and the two report pages; returns report.md's path. With ``honesty``
    its rows join results.csv and its table gets a section before the notes; with ``retrieval`` (the
    retrieval step's outputs) the adaptive retrieval and abstention sections come before those; with
    ``stage2_selection`` (train.select_on) its section follows the setup; with ``strategies`` (several
    train.label_selection strategies) the label curves get one line per strategy, a table follows them and
    label_strategies.csv holds its rows."""
    fig_dir = out.figures
    fig_dir.mkdir(parents=True, exist_ok=True)
    pool_size = sum(1 for r in records if r.split == "train" and not r.failed)
    table = evaluation.table
    write_csv(table, out.metrics_csv)
    results = results_table(table, pool_size, evaluation.models)
    write_csv(pd.concat([results, honesty_results(honesty)], ignore_index=True) if honesty is not None
              else results, out.results_csv)
    summary = seed_summary(results)
    write_csv(summary, out.summary_csv)
    differences = run_differences(evaluation, results, pool_size)
    write_csv(differences, out.differences_csv)
    mean_table = mean_metrics_table(table, pool_size, evaluation.models)
    with atomic_write(out.table2) as tmp:
        tmp.write_text(f"# Table 2 ({cfg.name}): mean over seeds {cfg.train.seeds}\n\n"
                       + render_markdown(mean_table, ["auroc", evaluation.config.ece_name, "alignment"]))
    exposure = consistency_by_exposure([r for r in records if r.split != "train"])
    if not exposure.empty:
        exposure.to_csv(out.exposure_csv, index=False, float_format="%.4g")
    numbers = RunNumbers(cfg=cfg, subject=subject, records=records, evaluation=evaluation, pool_size=pool_size,
                         results=results, summary=summary, differences=differences, mean_table=mean_table,
                         exposure=exposure, found=findings(results, records, pool_size, differences=differences),
                         reliability=reliability_figures(cfg, subject, evaluation, pool_size, fig_dir),
                         timings=timings, cpu_seconds=cpu_seconds or {}, honesty=honesty,
                         stage2_selection=stage2_selection, strategies=strategies)
    if strategies is not None:
        write_csv(strategies.table, out.label_strategies_csv)
    if retrieval is not None and cfg.retrieval is not None:
        numbers.retrieval = retrieval_report(retrieval, cfg.retrieval, evaluation, out)
    numbers.label_quality = label_quality_blocks(out.root, records)
    _label_figures(numbers, fig_dir)
    md_path, _ = write_document(run_document(numbers), out.root, out.report_md.stem)
    with atomic_write(out.findings) as tmp:
        tmp.write_text(json.dumps([f.__dict__ for f in numbers.found], indent=1, default=float))
    return md_path


def honesty_blocks(honesty: HonestyOutcome) -> list[Block]:
    """The honesty section: how the gate and the fine-tuned models were set up, and their table."""
    info = honesty.info
    tau = info.get("tau")
    return [
        Heading(HONESTY_SECTION),
        Paragraph("Alignment for Honesty (Yang et al.) fine-tunes the answering model (LoRA) to refuse what it "
                  "does not know; the EliCal gate keeps the unaligned model and answers only when this run's "
                  f"EliCal confidence >= tau. Gate: {info['elical_model']} (budget {info['budget']}, seed "
                  f"{info['seed']}), tau {tau if tau is None else f'{tau:.3f}'} maximising {info['gate_objective']} "
                  f"on {info['validation']} validation questions ({info['validation_from']}). Fine-tuning methods "
                  f"learn from {info['tuning_records']} calibration-pool questions; refusal sentence "
                  f"'{info['refusal']}'. Evaluated: {info['evaluated']} questions of {', '.join(info['groups'])}; "
                  f"step time {info['seconds']} s."),
        Paragraph(f"{SCORE_NOTE} Files: `honesty/honesty_comparison.{{csv,md,html,json}}`, "
                  "`honesty/answers.parquet`."),
        *display_tables(honesty),
    ]


def retrieval_blocks(retrieval: RetrievalReport) -> list[Block]:
    """The adaptive retrieval section (accuracy against retrieval rate, the target's reading) and the
    abstention section (risk-coverage curves, AURC table)."""
    info = retrieval.info
    shown = retrieval.aurc.assign(aurc=retrieval.aurc.aurc.map(lambda v: f"{v:.4f}"))
    best = info["best_training_free"]
    return [
        Heading(RETRIEVAL_SECTIONS[0]),
        Paragraph(f"The {info['questions']} evaluated questions of {', '.join(info['groups'])} answered again with "
                  f"the top {_count(info['k'], 'passage')} (BM25) of {info['corpus']} ({info['passages']} passages), by the "
                  "same model, wording and judge. Gated retrieval retrieves when the confidence of "
                  f"{info['elical_model']} (budget {info['budget']}, seed {info['seed']}) is below a threshold, "
                  f"over every threshold; step time {info['seconds']} s. Files: `retrieval/answers.csv`, "
                  "`retrieval/curves.csv`, `retrieval/summary.json`, `retrieval/target.json`."),
        Paragraph(retrieval.reading),
        Figure("figures/retrieval.png", "Accuracy against the share of questions retrieved for: never, always, and "
               "gated by EliCal confidence"),
        *([Bullets(tuple(info["notes"]))] if info["notes"] else []),
        Heading(RETRIEVAL_SECTIONS[1]),
        Paragraph("Answering only the most confident questions (without retrieval): the risk (error rate among "
                  "the answered) at each coverage (share answered), and its area AURC (lower is better). "
                  "Answering in random order scores the error rate; a perfect ranking, the optimal AURC. The best "
                  f"training-free method is the one of best AUROC on this run's evaluation ({best or 'none stored'})."),
        Figure("figures/risk_coverage.png", "Risk against coverage (abstention)"),
        Table(shown, "AURC of abstention (files: retrieval/abstention.csv, retrieval/risk_coverage.csv)"),
    ]


def difference_blocks(differences: pd.DataFrame, evaluation: Evaluation, pool_size: int) -> list[Block]:
    """The differences section: how the intervals are made, one sentence per AUROC comparison, a summary table."""
    level = round(100 * evaluation.config.level)
    blocks: list[Block] = [Heading("Differences (paired bootstrap)")]
    if differences.empty:
        return blocks + [Paragraph("No EliCal model to compare (differences.csv is empty).")]
    blocks.append(Paragraph(
        f"A - B with {level} % paired bootstrap intervals ({evaluation.config.n_resamples} resamples): both "
        "methods are scored on the same resampled questions, and group averages weight datasets by size. "
        "Each seed's models are compared with each other; the seed-averaged difference averages the per-seed "
        "differences replicate by replicate, so its interval is over questions, and 'better in k of n seeds' "
        "(from the per-seed values in results.csv) shows how the seeds agree. 'Best training-free' is the "
        "training-free method with the best value on that split and metric. Every row, per dataset and per "
        "seed, is in differences.csv."))
    blocks.append(Bullets(tuple(readings(differences, pool_size, "auroc"))))
    shown = summary_table(differences, ["auroc", evaluation.config.ece_name, "alignment"], pool_size)
    if not shown.empty:
        shown.columns = [_split_metric_label(c) for c in shown.columns]
        blocks.append(Table(shown, "Seed-averaged differences A - B, group averages (* interval excludes 0). "
                                   "AUROC and alignment: positive means A is better; ECE and Brier: positive "
                                   "means A is worse"))
    return blocks


HURTS = 0.05  # AUROC below Eli-Only's on a dataset by more than this: the labels hurt there


def transfer_blocks(numbers: RunNumbers) -> list[Block]:
    """Where it transfers: each trained model's AUROC on each evaluated dataset next to Eli-Only's (its
    difference in brackets; bold where it is more than HURTS below) and the best training-free method's."""
    blocks: list[Block] = [Heading("Where it transfers")]
    trained, best = transfer_matrix(numbers.summary, numbers.evaluation.baselines)
    eli = [key for key in trained.index if key[0] == METHOD_NAMES["eli-only"]]
    if trained.empty or not eli:
        return blocks + [Paragraph("No Eli-Only model to compare with (train eli-only to see this table).")]
    order = {"in-domain": 0, "ood": 1, "mc": 2}
    trained = trained[sorted(trained.columns, key=lambda c: (order.get(c.split("/")[0], 3), c))]
    reference = trained.loc[eli[0]]
    columns = pd.MultiIndex.from_tuples([("", "model"), *(tuple(c.split("/", 1)) for c in trained.columns)])
    rows, bold = {}, {}
    summary = numbers.summary  # training-free rows only: one per (method, split), so a lookup is one number
    free = summary[(summary.metric == "auroc") & summary.method.isin(set(best))].set_index(["method", "split"])["mean"]
    rows["best training-free"] = ["best training-free", *(f"{free[(best[c], c)]:.3f} {best[c]}" if c in best else "-"
                                                         for c in trained.columns)]
    bold["best training-free"] = [False] * len(columns)
    selection = numbers.stage2_selection  # several stage-2 recipes trained: a row per candidate
    candidates = selection.transfer(numbers.pool_size) if selection is not None else None
    for (method, budget), values in trained.iterrows():
        label = method if (method, budget) == eli[0] else f"{method} ({int(budget)})"
        recipes = [(label, values, False)]
        if selection is not None and candidates is not None and method == METHOD_NAMES["elical"]:
            winner = selection.winner  # its numbers: those of every other table; the others' from the choice
            recipes = [(f"{label} {r} (chosen)", values, False) if r == winner else
                       (f"{label} {r}", candidates.reindex(index=[(r, int(budget))], columns=trained.columns).iloc[0],
                        True) for r in selection.candidates]
        for label, values, other in recipes:
            delta = values - reference
            rows[label] = [label, *(f"{v:.3f}" if label == method else "-" if other and pd.isna(v) else
                                    f"{v:.3f} ({d:+.3f})" for v, d in zip(values, delta))]
            bold[label] = [False, *(bool(d < -HURTS) for d in delta)]
    shown = pd.DataFrame.from_dict(rows, orient="index", columns=columns).reset_index(drop=True)
    recipe_rows = ("" if selection is None else
                   f" EliCal was trained once per stage-2 recipe ({', '.join(selection.candidates)}): a row per "
                   f"recipe at each budget, the chosen one ({selection.winner}, the EliCal of every other table) "
                   "marked; the others are the same models the choice compared.")
    return blocks + [
        Paragraph("AUROC per evaluated dataset, mean over seeds: each trained model against Eli-Only (no labels; its "
                  "difference in brackets, **bold** where it is more than "
                  f"{HURTS} below), so a reader sees on which sets the labels help and on which they hurt."
                  + recipe_rows),
        Table(shown, "Where calibration transfers (AUROC; best training-free method named per dataset)",
              pd.DataFrame.from_dict(bold, orient="index", columns=columns).reset_index(drop=True))]


def _split_metric_label(column: str) -> str:
    """'in-domain: ece@10-uniform' -> 'in-domain: ECE (+ worse)': what a positive difference A - B means."""
    split, sep, metric = column.partition(": ")
    sign = "+ better" if higher_is_better(metric) else "+ worse"
    return f"{split}: {metric_label(metric, short=True)} ({sign})" if sep else column


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def finding_line(finding: Finding) -> str:
    """One finding as a bullet: the question, the answer and what it rests on, then the evidence.

    A claim about trained models rests on its ``seeds`` (and a comparison on its paired interval); with
    one seed it is 'n/a', since one seed cannot tell the method from the luck of its initialisation and
    label draw. A comparison whose interval includes 0 is 'not shown'."""
    decided = finding.holds is not None or finding.interval is not None
    answer = ("YES" if finding.holds else "NO") if finding.holds is not None else (
        "not shown (interval includes 0)" if finding.interval is not None else "not measurable")
    interval = " and its paired bootstrap interval" if finding.interval is not None else ""
    if not decided:
        basis = ""
    elif finding.seeds is None:
        basis = " (training-free: no training seeds involved)"
    elif finding.seeds < 2:
        basis = f" (this seed says {answer if finding.holds is None else answer.lower()}; one seed cannot support a YES/NO)"
        answer = f"n/a ({finding.seeds} seed)"
    else:
        basis = f" (rests on {finding.seeds} seeds{interval})"
    return f"{finding.question} **{answer}**{basis}: {finding.evidence}"


def _target_blocks(numbers: RunNumbers) -> list[Block]:
    """The paper's shape as targets (run/paper_targets.py): met, missed and by how much, or not measurable."""
    verdict = {True: "met", False: "MISSED", None: "not measurable"}
    targets = paper_targets(numbers.results, numbers.differences, numbers.pool_size)
    return [Heading("Targets from the paper"),
            Paragraph("What the paper's results lead one to expect of EliCal with few labels, checked on this run "
                      "(AUROC; intervals are the seed-averaged paired bootstrap intervals of differences.csv)."),
            Bullets(tuple(f"{t.claim}: **{verdict[t.met]}**: {t.evidence}" for t in targets))]


def _setup_blocks(numbers: RunNumbers) -> list[Block]:
    cfg, info, pool_size = numbers.cfg, numbers.subject.info, numbers.pool_size
    groups = numbers.subject.groups
    evaluated = [r for r in numbers.records if r.split != "train" and not r.failed]
    by_group: dict[str, list[Record]] = {}
    for r in evaluated:
        by_group.setdefault(groups.get(r.dataset, "other"), []).append(r)
    accuracy = {g: np.mean([r.greedy_correct for r in rs]) for g, rs in by_group.items()}
    timings, cpu = numbers.timings, numbers.cpu_seconds
    return [Heading("Setup"), Bullets((
        f"subject: {cfg.subject}; answering model: {numbers.subject.model}"
        + (f" ({info['lm_params'] / 1e6:.2f}M params, world {info['world_fingerprint']})" if info.get("lm_params") else ""),
        f"questions: {pool_size} in the calibration pool (train), "
        + ", ".join(f"{len(rs)} {g} evaluated (greedy accuracy {accuracy[g]:.2f})" for g, rs in by_group.items()),
        (f"annotation: greedy + k={cfg.annotate.k} samples (temperature {cfg.annotate.temperature}, top_p "
         f"{cfg.annotate.top_p}, top_k {cfg.annotate.top_k}); judges: correctness {cfg.annotate.judges.correctness}, "
         f"consistency {cfg.annotate.judges.consistency}"),
        (f"trained: {', '.join(cfg.train.methods)} x budgets {cfg.train.budgets} (all = {pool_size}) x seeds "
         f"{cfg.train.seeds}{_selection_words(cfg.train.label_selection)}; trainer settings "
         f"`{cfg.train.settings.model_dump(exclude_unset=True)}`"
         + (f"; EliCal once per stage-2 recipe of {cfg.train.stage2_candidates}, one chosen on "
            f"{cfg.train.select_datasets} (left out of every other table)" if cfg.train.select_on != "none" else "")),
        (f"evaluation: {cfg.evaluate.n_resamples} bootstrap resamples, alignment over "
         f"{cfg.evaluate.alignment_repeats} seeded 20/80 splits"),
        "wall time per step (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items())
        + f"; total before the report {sum(timings.values()):.1f} s",
        "CPU time per step (s, all threads; the cost on an otherwise idle machine): "
        + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items()) + f"; total {sum(cpu.values()):.1f} s",
    ))]


def _selection_words(strategy: str | Sequence[str]) -> str:
    """How the labelled questions were chosen (train.label_selection), as a clause to append; nothing for random,
    the seeded draw every run made before strategies existed."""
    if not isinstance(strategy, str):  # a list: one strategy keeps its words; several are compared
        if len(strategy) > 1:
            return (f"; Cal-Only and EliCal once per label selection strategy of {list(strategy)} (train.label_selection; "
                    f"the other tables show the first, {strategy[0]}; models/<model>/selection.json lists the labels)")
        strategy = strategy[0]
    if strategy == "random":
        return ""
    return (f"; labels: the first of the `{strategy}` order of the pool, computed with the Eli-Only model of each "
            "seed (train.label_selection; models/<model>/selection.json lists them)")


def _labels_blocks(numbers: RunNumbers) -> list[Block]:
    note = (f"{figures.band_note(numbers.summary)}; dashed purple: Eli-Only (no labels); dotted black: the best "
            f"training-free baseline on that split"
            + ("; Cal-Only and EliCal: one line per label selection strategy (line style; the table below)"
               if numbers.strategies is not None else _selection_words(numbers.cfg.train.label_selection)))
    compared = (strategy_blocks(numbers.strategies, numbers.evaluation.config.level,
                                numbers.evaluation.config.n_resamples) if numbers.strategies is not None else [])
    return [Heading("Confidence vs labels"),
            Figure("figures/auroc_vs_labels.png", f"AUROC against labelled questions (paper Figure 5); {note}"),
            Figure("figures/alignment_vs_labels.png",
                   f"Alignment against labelled questions (paper Figure 6); {note}"),
            *compared]


def _exposure_blocks(numbers: RunNumbers) -> list[Block]:
    blocks: list[Block] = [Heading("Self-consistency and exposure")]
    if numbers.exposure.empty:
        return blocks + [Paragraph("The subject records no exposure information.")]
    shown = numbers.exposure.copy()
    for col in ("accuracy", "consistency", "overconfidence"):
        shown[col] = shown[col].map(lambda v: f"{v:.3f}")
    what = ("the population quartile of the question's subject (a proxy for how often it is written about)"
            if numbers.cfg.subject == "geo" else "how often the fact is stated in the pretraining corpus "
            "('contested': a wrong value is stated more often than the right one)")
    return blocks + [Paragraph(f"Evaluated questions grouped by {what}."),
                     Table(shown, "Greedy accuracy and mean self-consistency by exposure"),
                     Figure("figures/consistency_by_exposure.png", "Accuracy and self-consistency by exposure")]


def _reliability_blocks(numbers: RunNumbers) -> list[Block]:
    blocks: list[Block] = [Heading("Reliability diagrams")]
    if not numbers.reliability:
        return blocks + [Paragraph("No method produced confidences in [0, 1] on the in-domain split.")]
    return blocks + [Figure(path, f"Reliability: {label}") for path, label in numbers.reliability]


def run_document(numbers: RunNumbers) -> Document:
    """The report's sections, in order (see SECTIONS; the honesty section, if any, before the notes)."""
    evaluation, seeds = numbers.evaluation, numbers.seeds
    blocks: list[Block] = [
        Heading("Findings"),
        Paragraph("Each answer below is computed from this run's measurements (see results.csv); nothing is "
                  f"assumed. Answers about trained models rest on the run's {_count(seeds, 'training seed')}; "
                  "with one seed they are n/a, since one seed cannot tell a method from the luck of its "
                  "initialisation and label draw. A comparison of methods is YES or NO only when its paired "
                  "bootstrap interval (differences.csv) excludes 0, else 'not shown'. Discrimination (AUROC) "
                  "and alignment: higher is better; calibration error (ECE) and Brier score: lower is better, "
                  "so there a positive difference EliCal - B means EliCal is worse."),
        Bullets(tuple(finding_line(f) for f in numbers.found)),
        *_target_blocks(numbers),
        *_setup_blocks(numbers),
        *(selection_blocks(numbers.stage2_selection) if numbers.stage2_selection is not None else []),
        Heading("Table 2"),
        Paragraph(f"Values x100, mean over {_count(seeds, 'seed')}, best per column in bold; trained methods carry their "
                  "label budget in brackets. Per-seed values are in results.csv, bootstrap intervals in metrics.csv."),
        *metric_blocks(numbers.mean_table, [m for m in ("auroc", evaluation.config.ece_name, "alignment")
                                            if m in set(numbers.mean_table.metric)]),
        *difference_blocks(numbers.differences, evaluation, numbers.pool_size),
        *transfer_blocks(numbers),
        *_labels_blocks(numbers),
        *_exposure_blocks(numbers),
        *_reliability_blocks(numbers),
        *(numbers.label_quality or [Heading(LABEL_QUALITY_SECTION), Paragraph(NO_AUDIT)]),
        *(retrieval_blocks(numbers.retrieval) if numbers.retrieval is not None else []),
        *(honesty_blocks(numbers.honesty) if numbers.honesty is not None else []),
        Heading("Notes"),
        Bullets(tuple(numbers.evaluation.notes or ["none"])),
    ]
    return Document(f"elical run: {numbers.cfg.name}", blocks)
