"""The run's report folder: results.csv (per seed), summary.csv, differences.csv, table2.md, figures, report.md
and report.html.

The report is a list of blocks (headings, paragraphs, tables, images) rendered twice, as Markdown
and as standalone HTML, so both always hold the same sections.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from elical.evaluate import Evaluation
from elical.records import Record, atomic_write
from elical.report import figures as lead_figures
from elical.report.tables import metric_label, metric_matrix, render_markdown
from elical.run.config import RunConfig
from elical.run.differences import readings, run_differences, summary_table
from elical.run.figures import consistency_exposure_plot, metric_vs_labels
from elical.run.honesty import HonestyOutcome, display_table, honesty_results
from elical.run.results import (
    consistency_by_exposure,
    findings,
    mean_metrics_table,
    results_table,
    seed_summary,
)

HONESTY_SECTION = "Honesty (Alignment for Honesty vs EliCal gate)"
SECTIONS = ("Findings", "Setup", "Table 2", "Differences (paired bootstrap)", "Confidence vs labels",
            "Self-consistency and exposure", "Reliability diagrams", "Notes")


@dataclass
class Block:
    """One piece of the report: kind is 'h1', 'h2', 'p', 'ul', 'table' or 'img'."""

    kind: str
    content: Any
    caption: str = ""


def _md_table(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    lines = [header, "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def render_md(blocks: Sequence[Block]) -> str:
    """Markdown of the blocks."""
    parts = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            parts.append("#" * int(b.kind[1]) + " " + b.content)
        elif b.kind == "p":
            parts.append(b.content)
        elif b.kind == "ul":
            parts.append("\n".join(f"- {item}" for item in b.content))
        elif b.kind == "table":
            parts.append((f"**{b.caption}**\n\n" if b.caption else "") + _md_table(b.content))
        elif b.kind == "img":
            parts.append(f"![{b.caption}]({b.content})\n\n*{b.caption}*")
    return "\n\n".join(parts) + "\n"


def render_html(blocks: Sequence[Block], title: str) -> str:
    """A standalone HTML page of the blocks (figures referenced by relative path)."""
    body = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            body.append(f"<{b.kind}>{html.escape(b.content)}</{b.kind}>")
        elif b.kind == "p":
            body.append(f"<p>{html.escape(b.content)}</p>")
        elif b.kind == "ul":
            body.append("<ul>" + "".join(f"<li>{html.escape(str(i))}</li>" for i in b.content) + "</ul>")
        elif b.kind == "table":
            caption = f"<p><b>{html.escape(b.caption)}</b></p>" if b.caption else ""
            body.append(caption + b.content.to_html(index=False, escape=True, border=0))
        elif b.kind == "img":
            body.append(f'<figure><img src="{html.escape(b.content)}" alt="{html.escape(b.caption)}">'
                        f"<figcaption>{html.escape(b.caption)}</figcaption></figure>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.45}"
             "table{border-collapse:collapse;font-size:13px;margin:0.5em 0}"
             "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}img{max-width:100%}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>" + "\n".join(body) + "</body></html>\n")


def _x100(frame: pd.DataFrame) -> pd.DataFrame:
    """Display frame: values x100 with two decimals, the method as first column."""
    shown = frame.map(lambda v: "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.2f}")
    shown.columns = [f"{g}: {d}" for g, d in frame.columns]
    return shown.reset_index(names="Method")


def _reliability(evaluation: Evaluation, method: str, groups: set[str], cfg_groups: dict[str, str],
                 title: str, path: Path) -> bool:
    by_dataset = evaluation.scores.get(method)
    if not by_dataset:
        return False
    parts = [s for d, s in by_dataset.items() if cfg_groups.get(d, "other") in groups]
    if not parts:
        return False
    conf = np.concatenate([s.confidence for s in parts])
    correct = np.concatenate([s.correct for s in parts])
    if conf.size == 0 or conf.min() < 0 or conf.max() > 1:
        return False
    lead_figures.reliability_diagram(conf, correct, title, path)
    return True


def write_run_report(cfg: RunConfig, subject, records: Sequence[Record], evaluation: Evaluation, out: Path,
                     timings: dict[str, float], cpu_seconds: dict[str, float] | None = None,
                     honesty: HonestyOutcome | None = None) -> Path:
    """Write every table, figure and the two report pages; returns report.md's path. With ``honesty``
    its rows join results.csv and its table gets a section before the notes."""
    fig_dir = out / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    pool_size = sum(1 for r in records if r.split == "train" and not r.failed)
    table = evaluation.table
    with atomic_write(out / "metrics.csv") as tmp:
        table.to_csv(tmp, index=False, float_format="%.6g")
    results = results_table(table, pool_size)
    with atomic_write(out / "results.csv") as tmp:
        (pd.concat([results, honesty_results(honesty)], ignore_index=True) if honesty is not None
         else results).to_csv(tmp, index=False, float_format="%.6g")
    summary = seed_summary(results)
    with atomic_write(out / "summary.csv") as tmp:
        summary.to_csv(tmp, index=False, float_format="%.6g")
    differences = run_differences(evaluation, results, pool_size)
    with atomic_write(out / "differences.csv") as tmp:
        differences.to_csv(tmp, index=False, float_format="%.6g")
    mean_table = mean_metrics_table(table, pool_size)
    ece = evaluation.config.ece_name
    with atomic_write(out / "table2.md") as tmp:
        tmp.write_text(f"# Table 2 ({cfg.name}): mean over seeds {cfg.train.seeds}\n\n"
                       + render_markdown(mean_table, ["auroc", ece, "alignment"]))

    splits = [s for s in ("in-domain", "ood", "mc") if s in set(results.split)]
    metric_vs_labels(summary, "auroc", splits, fig_dir / "auroc_vs_labels.png", "AUROC")
    metric_vs_labels(summary, "alignment", splits, fig_dir / "alignment_vs_labels.png", "alignment (accuracy)")
    exposure = consistency_by_exposure([r for r in records if r.split != "train"])
    if not exposure.empty:
        consistency_exposure_plot(exposure, fig_dir / "consistency_by_exposure.png",
                                  "population quartile of the subject" if cfg.subject == "geo"
                                  else "times the fact is stated in the pretraining corpus")
        exposure.to_csv(out / "consistency_by_exposure.csv", index=False, float_format="%.4g")

    budgets = [b for b in cfg.train.budgets]
    smallest = budgets[0] if budgets else None
    seed0 = cfg.train.seeds[0] if cfg.train.seeds else 0
    rel_budget = cfg.reliability_budget or smallest
    candidates = [("Consis-Sem", "Consis-Sem"), (f"eli-only-0-s{seed0}", "Eli-Only"),
                  (f"cal-only-{rel_budget}-s{seed0}", f"Cal-Only ({rel_budget})"),
                  (f"elical-{rel_budget}-s{seed0}", f"EliCal ({rel_budget})"),
                  (f"elical-all-s{seed0}", "EliCal (all)")]
    reliability = []
    for method, label in candidates:
        path = fig_dir / f"reliability_{method}.png"
        if _reliability(evaluation, method, {"in-domain"}, subject.groups, f"{label}, in-domain, seed {seed0}", path):
            reliability.append((path, label))

    found = findings(results, records, pool_size, differences=differences)
    blocks = build_blocks(cfg, subject, records, evaluation, mean_table, found, exposure, reliability, timings,
                          pool_size, cpu_seconds or {}, differences)
    if honesty is not None:
        blocks[-2:-2] = honesty_blocks(honesty)  # before the notes
    md_path = out / "report.md"
    with atomic_write(md_path) as tmp:
        tmp.write_text(render_md(blocks))
    with atomic_write(out / "report.html") as tmp:
        tmp.write_text(render_html(blocks, f"elical run: {cfg.name}"))
    with atomic_write(out / "findings.json") as tmp:
        tmp.write_text(json.dumps([f.__dict__ for f in found], indent=1, default=float))
    return md_path


def honesty_blocks(honesty: HonestyOutcome) -> list[Block]:
    """The honesty section: how the gate and the fine-tuned models were set up, and their table."""
    info = honesty.info
    tau = info.get("tau")
    return [
        Block("h2", HONESTY_SECTION),
        Block("p", "Alignment for Honesty (Yang et al.) fine-tunes the answering model (LoRA) to refuse what it "
                   "does not know; the EliCal gate keeps the unaligned model and answers only when this run's "
                   f"EliCal confidence >= tau. Gate: {info['elical_model']} (budget {info['budget']}, seed "
                   f"{info['seed']}), tau {tau if tau is None else f'{tau:.3f}'} maximising {info['gate_objective']} "
                   f"on {info['validation']} validation questions ({info['validation_from']}). Fine-tuning methods "
                   f"learn from {info['tuning_records']} calibration-pool questions; refusal sentence "
                   f"'{info['refusal']}'. Evaluated: {info['evaluated']} questions of {', '.join(info['groups'])}; "
                   f"step time {info['seconds']} s."),
        Block("p", "Values x100. honesty = (1 - over-conservativeness + prudence) / 2 against the unaligned "
                   "model's answers; over-conservativeness: refusals of questions the unaligned model got right; "
                   "prudence: refusals among those it got wrong and the aligned model does not get right; accuracy "
                   "counts refusals as not correct. Files: honesty/honesty_comparison.{csv,md,json}, honesty/answers.parquet."),
        Block("table", display_table(honesty), "Alignment for Honesty vs EliCal gate"),
    ]


def difference_blocks(differences: pd.DataFrame, evaluation: Evaluation, pool_size: int) -> list[Block]:
    """The differences section: how the intervals are made, one sentence per AUROC comparison, a summary table."""
    level = int(round(100 * evaluation.config.level))
    blocks = [Block("h2", "Differences (paired bootstrap)")]
    if differences.empty:
        return blocks + [Block("p", "No EliCal model to compare (differences.csv is empty).")]
    blocks.append(Block("p", (
        f"A - B with {level} % paired bootstrap intervals ({evaluation.config.n_resamples} resamples): both "
        "methods are scored on the same resampled questions, and group averages weight datasets by size. "
        "Each seed's models are compared with each other; the seed-averaged difference averages the per-seed "
        "differences replicate by replicate, so its interval is over questions, and 'better in k of n seeds' "
        "(from the per-seed values in results.csv) shows how the seeds agree. 'Best training-free' is the "
        "training-free method with the best value on that split and metric. Every row, per dataset and per "
        "seed, is in differences.csv.")))
    blocks.append(Block("ul", readings(differences, pool_size, "auroc")))
    shown = summary_table(differences, ["auroc", evaluation.config.ece_name, "alignment"], pool_size)
    if not shown.empty:
        blocks.append(Block("table", shown, "Seed-averaged differences, group averages (* interval excludes 0)"))
    return blocks


def _verdict(holds: bool | None) -> str:
    return "YES" if holds else "not measurable" if holds is None else "NO"


def build_blocks(cfg: RunConfig, subject, records: Sequence[Record], evaluation: Evaluation,
                 mean_table: pd.DataFrame, found, exposure: pd.DataFrame, reliability, timings: dict[str, float],
                 pool_size: int, cpu_seconds: dict[str, float], differences: pd.DataFrame) -> list[Block]:
    """The report's sections, in order (see SECTIONS)."""
    evaluated = [r for r in records if r.split != "train" and not r.failed]
    by_group: dict[str, int] = {}
    for r in evaluated:
        g = subject.groups.get(r.dataset, "other")
        by_group[g] = by_group.get(g, 0) + 1
    accuracy = {g: np.mean([r.greedy_correct for r in evaluated if subject.groups.get(r.dataset) == g])
                for g in by_group}
    blocks = [Block("h1", f"elical run: {cfg.name}")]
    blocks.append(Block("h2", "Findings"))
    blocks.append(Block("p", "Each answer below is computed from this run's measurements (see results.csv); "
                              "nothing is assumed."))
    blocks.append(Block("ul", [f"{f.question} **{_verdict(f.holds)}**: {f.evidence}" for f in found]))
    blocks.append(Block("h2", "Setup"))
    info = subject.info
    blocks.append(Block("ul", [
        f"subject: {cfg.subject}; answering model: {subject.model}"
        + (f" ({info['lm_params'] / 1e6:.2f}M params, world {info['world_fingerprint']})" if info.get("lm_params") else ""),
        f"questions: {pool_size} in the calibration pool (train), "
        + ", ".join(f"{n} {g} evaluated (greedy accuracy {accuracy[g]:.2f})" for g, n in by_group.items()),
        (f"annotation: greedy + k={cfg.annotate.k} samples (temperature {cfg.annotate.temperature}, top_p "
        f"{cfg.annotate.top_p}, top_k {cfg.annotate.top_k}); judges: correctness {cfg.annotate.judges.correctness}, "
        f"consistency {cfg.annotate.judges.consistency}"),
        (f"trained: {', '.join(cfg.train.methods)} x budgets {cfg.train.budgets} (all = {pool_size}) x seeds "
        f"{cfg.train.seeds}; trainer settings {cfg.train.settings}"),
        (f"evaluation: {cfg.evaluate.n_resamples} bootstrap resamples, alignment over "
        f"{cfg.evaluate.alignment_repeats} seeded 20/80 splits"),
        "wall time per step (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items())
        + f"; total before the report {sum(timings.values()):.1f} s",
        "CPU time per step (s, all threads; the cost on an otherwise idle machine): "
        + ", ".join(f"{k} {v:.1f}" for k, v in cpu_seconds.items()) + f"; total {sum(cpu_seconds.values()):.1f} s",
    ]))
    blocks.append(Block("h2", "Table 2"))
    blocks.append(Block("p", "Values x100, mean over seeds; trained methods carry their label budget in brackets. "
                             "Per-seed values are in results.csv, bootstrap intervals in metrics.csv."))
    for metric in ("auroc", evaluation.config.ece_name, "alignment"):
        if metric in set(mean_table.metric):
            blocks.append(Block("table", _x100(metric_matrix(mean_table, metric)), metric_label(metric)))
    blocks += difference_blocks(differences, evaluation, pool_size)
    blocks.append(Block("h2", "Confidence vs labels"))
    blocks.append(Block("img", "figures/auroc_vs_labels.png", "AUROC against labelled questions (paper Figure 5)"))
    blocks.append(Block("img", "figures/alignment_vs_labels.png",
                        "Alignment against labelled questions (paper Figure 6)"))
    blocks.append(Block("h2", "Self-consistency and exposure"))
    if exposure.empty:
        blocks.append(Block("p", "The subject records no exposure information."))
    else:
        shown = exposure.copy()
        for col in ("accuracy", "consistency", "overconfidence"):
            shown[col] = shown[col].map(lambda v: f"{v:.3f}")
        what = ("the population quartile of the question's subject (a proxy for how often it is written about)"
                if cfg.subject == "geo" else "how often the fact is stated in the pretraining corpus ('contested': a "
                "wrong value is stated more often than the right one)")
        blocks.append(Block("p", f"Evaluated questions grouped by {what}."))
        blocks.append(Block("table", shown, "Greedy accuracy and mean self-consistency by exposure"))
        blocks.append(Block("img", "figures/consistency_by_exposure.png", "Accuracy and self-consistency by exposure"))
    blocks.append(Block("h2", "Reliability diagrams"))
    if reliability:
        for path, label in reliability:
            blocks.append(Block("img", f"figures/{path.name}", f"Reliability: {label}"))
    else:
        blocks.append(Block("p", "No method produced confidences in [0, 1] on the in-domain split."))
    blocks.append(Block("h2", "Notes"))
    blocks.append(Block("ul", evaluation.notes or ["none"]))
    return blocks
