"""The run report's "Where it transfers": each trained model's AUROC per evaluated dataset against
Eli-Only's, the drops of more than 0.05 in bold, and the best training-free method named per dataset."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from elical.report.document import Document, Paragraph, Table, to_markdown
from elical.run.report import transfer_blocks
from elical.run.results import transfer_matrix

VALUES = {  # (method, budget): AUROC on (in-domain/nq, ood/popqa)
    ("N-Prob", 0): (0.70, 0.90), ("Consis-Sem", 0): (0.80, 0.60), ("Eli-Only", 0): (0.75, 0.85),
    ("EliCal", 100): (0.78, 0.70), ("Cal-Only", 100): (0.74, 0.84),
}


def summary(values=VALUES) -> pd.DataFrame:
    rows = [{"method": m, "budget": b, "split": split, "metric": "auroc", "mean": v, "std": 0.0, "n": 1}
            for (m, b), pair in values.items() for split, v in zip(("in-domain/nq", "ood/popqa"), pair)]
    rows.append({"method": "EliCal", "budget": 100, "split": "in-domain", "metric": "auroc", "mean": 0.78, "std": 0.0, "n": 1})
    return pd.DataFrame(rows)


def numbers(frame: pd.DataFrame) -> SimpleNamespace:
    return SimpleNamespace(summary=frame, evaluation=SimpleNamespace(baselines=["N-Prob", "Consis-Sem"]))


def test_matrix_holds_trained_models_per_dataset_and_names_the_best_training_free():
    trained, best = transfer_matrix(summary(), ["N-Prob", "Consis-Sem"])
    assert set(trained.index) == {("Eli-Only", 0), ("EliCal", 100), ("Cal-Only", 100)}
    assert list(trained.columns) == ["in-domain/nq", "ood/popqa"]  # group averages left out
    assert best.to_dict() == {"in-domain/nq": "Consis-Sem", "ood/popqa": "N-Prob"}


def test_report_marks_the_datasets_where_labels_hurt():
    blocks = transfer_blocks(numbers(summary()))
    table = next(b for b in blocks if isinstance(b, Table))
    rows = {row[("", "model")]: row for _, row in table.frame.iterrows()}
    assert rows["EliCal (100)"][("ood", "popqa")] == "0.700 (-0.150)"
    assert rows["best training-free"][("in-domain", "nq")] == "0.800 Consis-Sem"
    bold = {label: flags for label, (_, flags) in zip(rows, table.bold.iterrows())}
    assert bool(bold["EliCal (100)"][("ood", "popqa")]) and not bold["Cal-Only (100)"][("ood", "popqa")]  # -0.01
    assert "**0.700 (-0.150)**" in to_markdown(Document("t", blocks))


def test_without_eli_only_the_section_says_why():
    values = {k: v for k, v in VALUES.items() if k[0] != "Eli-Only"}
    blocks = transfer_blocks(numbers(summary(values)))
    assert isinstance(blocks[-1], Paragraph) and "No Eli-Only model" in blocks[-1].text
