"""Adaptive retrieval and abstention, evaluated from confidences.

* Retrieval: accuracy against retrieval rate for never, always and confidence-gated retrieval
  (retrieve when confidence < threshold, every threshold), and the fewest retrievals that reach
  ``target`` (95 %) of always-retrieve accuracy;
* Abstention: the risk-coverage curve of the answers without retrieval and its AURC
  (:mod:`elical.metrics.selective`).

:func:`retrieval_outcome` does it all for a run: answers with retrieval, curves, figures, summary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from elical.annotate.backends.base import Backend
from elical.annotate.judges import Judge
from elical.metrics.base import check_inputs, tie_groups
from elical.metrics.selective import optimal_aurc, risk_coverage
from elical.records import Record
from elical.retrieval.answer import answer_with_retrieval
from elical.retrieval.config import RetrievalSettings
from elical.retrieval.index import Retriever

CURVE_COLUMNS = ["policy", "threshold", "retrieval_rate", "accuracy"]


def gated_curve(confidence: Sequence[float] | np.ndarray, correct_without: Sequence[int] | np.ndarray,
                correct_with: Sequence[int] | np.ndarray) -> pd.DataFrame:
    """Accuracy and retrieval rate of never, always, and gated retrieval at every threshold t (retrieve when
    confidence < t): t runs over the distinct confidences (the least retrieves nothing), then +inf (all)."""
    conf, without = check_inputs(confidence, correct_without, unit_interval=False)
    _, with_ = check_inputs(confidence, correct_with, unit_interval=False)
    n = conf.size
    order, starts = tie_groups(conf)
    gain = np.add.reduceat((with_ - without)[order], starts)  # accuracy gained by retrieving each group
    retrieved = np.r_[0, np.cumsum(np.diff(np.r_[starts, n]))]  # questions below each threshold
    accuracy = without.mean() + np.r_[0.0, np.cumsum(gain)] / n
    thresholds = np.r_[conf[order][starts], np.inf]
    gated = pd.DataFrame({"policy": "gated", "threshold": thresholds, "retrieval_rate": retrieved / n,
                          "accuracy": accuracy})
    ends = pd.DataFrame({"policy": ["never", "always"], "threshold": [np.nan, np.nan],
                         "retrieval_rate": [0.0, 1.0], "accuracy": [without.mean(), with_.mean()]})
    return pd.concat([ends, gated], ignore_index=True)[CURVE_COLUMNS]


def retrievals_needed(curve: pd.DataFrame, target: float = 0.95) -> dict[str, float]:
    """The gate's fewest retrievals reaching ``target`` of always-retrieve accuracy: its threshold, retrieval
    rate and accuracy, beside never's and always's accuracy (the gate at +inf always reaches it)."""
    always = float(curve.loc[curve.policy == "always", "accuracy"].iloc[0])
    never = float(curve.loc[curve.policy == "never", "accuracy"].iloc[0])
    gated = curve[curve.policy == "gated"]
    goal = target * always
    best = gated[gated.accuracy >= goal - 1e-12].sort_values(["retrieval_rate", "threshold"]).iloc[0]
    return {"target": target, "never_accuracy": never, "always_accuracy": always, "goal_accuracy": goal,
            "threshold": float(best.threshold), "retrieval_rate": float(best.retrieval_rate),
            "accuracy": float(best.accuracy)}


def risk_coverage_table(confidence: Sequence[float] | np.ndarray, correct: Sequence[int] | np.ndarray) -> pd.DataFrame:
    """The risk-coverage curve as a table: one row per distinct confidence, most confident first."""
    curve = risk_coverage(confidence, correct)
    return pd.DataFrame({"threshold": curve.threshold, "coverage": curve.coverage, "risk": curve.risk})


@dataclass
class RetrievalOutcome:
    """Everything the report shows: the retrieval curve (``table``), its summary, the risk-coverage curve
    and AURC of abstention, and per-question answers."""

    table: pd.DataFrame
    summary: dict[str, float]
    risk_coverage: pd.DataFrame
    abstention: dict[str, float]
    answers: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    def figures(self, out_dir: str | os.PathLike) -> list[Path]:
        """Write retrieval.png (accuracy against retrieval rate) and risk_coverage.png; return their paths."""
        from elical.retrieval.curve_figures import retrieval_figure, risk_coverage_figure

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / "retrieval.png", out / "risk_coverage.png"]
        retrieval_figure(self.table, self.summary).savefig(paths[0], dpi=120)
        risk_coverage_figure(self.risk_coverage, self.abstention["aurc"]).savefig(paths[1], dpi=120)
        return paths

    def markdown(self) -> str:
        """A short Markdown summary of both evaluations."""
        s, a = self.summary, self.abstention
        gate = f"gated (confidence < {s['threshold']:.3g})"
        rows = [("never", 0.0, s["never_accuracy"]), ("always", 1.0, s["always_accuracy"]),
                (gate, s["retrieval_rate"], s["accuracy"])]
        table = ["| retrieval | retrieval rate | accuracy |", "|---|---|---|"]
        table += [f"| {name} | {100 * rate:.1f} % | {100 * acc:.1f} |" for name, rate, acc in rows]
        gated = (f"Gated retrieval reaches {100 * s['target']:.0f} % of always-retrieve accuracy "
                 f"({100 * s['goal_accuracy']:.1f}) with {100 * s['retrieval_rate']:.1f} % of the retrievals.")
        abstain = (f"Abstention: AURC {a['aurc']:.4f} (a perfect ranking: {a['optimal_aurc']:.4f}; "
                   f"answering in random order: {a['error_rate']:.4f}), n = {int(a['n'])}.")
        notes = [f"Note: {note}" for note in self.notes]
        return "\n".join([*table, "", gated, "", abstain, *notes]) + "\n"

    def write(self, out_dir: str | os.PathLike) -> list[Path]:
        """Write the curves (CSV), per-question answers (CSV), summary (JSON, Markdown) and figures."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / "retrieval_curve.csv", out / "risk_coverage.csv", out / "retrieval_answers.csv",
                 out / "retrieval_summary.json", out / "retrieval.md"]
        self.table.to_csv(paths[0], index=False)
        self.risk_coverage.to_csv(paths[1], index=False)
        self.answers.to_csv(paths[2], index=False)
        paths[3].write_text(json.dumps({"retrieval": self.summary, "abstention": self.abstention,
                                        "notes": self.notes}, indent=2))
        paths[4].write_text(self.markdown())
        return paths + self.figures(out)


def _usable(records: Sequence[Record], confidences: Sequence[float]) -> tuple[list[Record], np.ndarray, list[str]]:
    """Records with a judged greedy answer, their confidences, and a note on those left out."""
    if len(records) != len(confidences):
        raise ValueError(f"got {len(records)} records but {len(confidences)} confidences")
    keep = [i for i, r in enumerate(records) if not r.failed and r.greedy_correct is not None]
    if not keep:
        raise ValueError("no record has a judged greedy answer (greedy_correct)")
    dropped = len(records) - len(keep)
    notes = [f"{dropped} record(s) without a judged greedy answer left out"] if dropped else []
    return [records[i] for i in keep], np.asarray(confidences, dtype=float)[keep], notes


def retrieval_outcome(records: Sequence[Record], confidences: Sequence[float], retriever: Retriever,
                      backend: Backend, judge: Judge, settings: RetrievalSettings | None = None) -> RetrievalOutcome:
    """Answer every record with retrieval, then evaluate gated retrieval and abstention by ``confidences``
    (one per record, in order; higher = more likely right without retrieval)."""
    settings = settings or RetrievalSettings()
    kept, conf, notes = _usable(records, confidences)
    without = np.array([int(r.greedy_correct or 0) for r in kept])
    retrieved = answer_with_retrieval(kept, retriever, backend, judge, settings)
    if retrieved.failures:
        notes.append(f"{retrieved.failures} answer(s) with retrieval failed to generate (counted wrong)")
    curve = gated_curve(conf, without, retrieved.correct)
    rc = risk_coverage(conf, without)
    abstention: dict[str, Any] = {"aurc": rc.aurc, "optimal_aurc": optimal_aurc(without),
                                  "error_rate": float(1 - without.mean()), "n": int(without.size)}
    answers = pd.DataFrame({
        "id": [r.id for r in kept], "dataset": [r.dataset for r in kept], "question": [r.question for r in kept],
        "confidence": conf, "correct_without": without, "answer_with": retrieved.answers,
        "correct_with": retrieved.correct, "passages": [" ".join(p) for p in retrieved.passages],
    })
    return RetrievalOutcome(curve, retrievals_needed(curve, settings.target), risk_coverage_table(conf, without),
                            abstention, answers, notes)
