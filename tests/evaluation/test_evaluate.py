"""Evaluation: joins, group averages, notes, and `elical evaluate` end to end on real questions."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from elical import metrics
from elical.cli import app
from elical.data.synthetic import synthetic_records
from elical.evaluation.evaluate import AVERAGE, COLUMNS, EvalConfig, evaluate
from elical.model.predictions import Predictions, read_predictions, write_predictions
from elical.records import write_jsonl

QA_FILES = {"nq": "nq_test", "pararel": "pararel_test", "popqa": "popqa_test", "squad": "squad_dev"}


def toy_questions(n: int, prefix: str) -> list[tuple[str, list[str]]]:
    return [(f"{prefix} question {i}?", [f"answer {i}"]) for i in range(n)]


@pytest.fixture(scope="module")
def toy_records():
    return synthetic_records(toy_questions(120, "a"), "nq", seed=1) + synthetic_records(
        toy_questions(60, "b"), "hq", seed=2
    ) + synthetic_records(toy_questions(80, "c"), "popqa", seed=3)


def value(table: pd.DataFrame, method: str, dataset: str, metric: str, group: str | None = None) -> float:
    rows = table[(table.method == method) & (table.dataset == dataset) & (table.metric == metric)]
    if group:
        rows = rows[rows.group == group]
    assert len(rows) == 1, rows
    return float(rows.value.iloc[0])


def test_dataset_values_match_metrics_and_groups_are_size_weighted(toy_records):
    result = evaluate(toy_records, config=EvalConfig(methods=["Consis-Sem"], n_resamples=50))
    table = result.table
    assert list(table.columns) == COLUMNS
    nq = [r for r in toy_records if r.dataset == "nq"]
    conf = [np.mean(r.sample_consistent) for r in nq]
    assert value(table, "Consis-Sem", "nq", "auroc") == pytest.approx(
        metrics.auroc(conf, [r.greedy_correct for r in nq])
    )
    nq_auc, hq_auc = value(table, "Consis-Sem", "nq", "auroc"), value(table, "Consis-Sem", "hq", "auroc")
    assert value(table, "Consis-Sem", AVERAGE, "auroc", "in-domain") == pytest.approx((120 * nq_auc + 60 * hq_auc) / 180)
    assert set(table.group) == {"in-domain", "ood"}
    assert value(table, "Consis-Sem", AVERAGE, "auroc", "ood") == value(table, "Consis-Sem", "popqa", "auroc")
    ci = table[table.metric.isin(["auroc", "brier", "alignment", "ece@10-uniform"])]
    assert ((ci.ci_low <= ci.value + 1e-12) & (ci.value <= ci.ci_high + 1e-12)).all()


def test_predictions_join_by_id_and_report_missing(toy_records):
    shuffled = list(reversed(toy_records))[:-10]  # order must not matter; 10 ids without prediction
    pred = Predictions("EliCal", {r.id: float(r.greedy_correct) * 0.8 + 0.1 for r in shuffled})
    result = evaluate(toy_records, [pred], EvalConfig(methods=[], n_resamples=20))
    assert value(result.table, "EliCal", "nq", "auroc") == 1.0
    assert any("EliCal: 10 of 260 records have no prediction" in note for note in result.notes)
    assert value(result.table, "EliCal", "nq", "missing") == 10


def test_prediction_errors(toy_records):
    with pytest.raises(ValueError, match="share no ids"):
        evaluate(toy_records, [Predictions("X", {"nope": 0.5})], EvalConfig(methods=[]))
    with pytest.raises(ValueError, match="both called 'Consis-Sem'"):
        evaluate(toy_records, [Predictions("Consis-Sem", {r.id: 0.5 for r in toy_records})],
                 EvalConfig(methods=["Consis-Sem"]))


def test_failed_records_are_left_out_with_a_note_and_unlabeled_ones_stop(toy_records):
    records = synthetic_records(toy_questions(40, "d"), "nq", seed=4)
    records[0].failure = "CUDA out of memory (after 3 tries)"
    result = evaluate(records, config=EvalConfig(methods=["Prob"], n_resamples=10))
    assert value(result.table, "Prob", "nq", "n") == 39
    assert "1 record(s) marked failed" in result.notes[0]
    records[1].greedy_correct = None
    with pytest.raises(ValueError, match="1 of 39 records have no greedy correctness"):
        evaluate(records, config=EvalConfig(methods=["Prob"]))


def test_prediction_file_round_trip_and_validation(tmp_path):
    for suffix in (".parquet", ".csv", ".jsonl"):
        path = tmp_path / f"elical-1k{suffix}"
        write_predictions(path, ["a", "b"], [0.25, 1.0], "EliCal (1k)", {"seed": 3})
        pred = read_predictions(path)
        assert pred.method == "EliCal (1k)" and pred.confidence == {"a": 0.25, "b": 1.0}
    assert read_predictions(tmp_path / "elical-1k.parquet").meta == {"seed": 3}
    (tmp_path / "bad.csv").write_text("id,confidence\na,0.5\nb,1.7\n")
    with pytest.raises(ValueError, match=r"bad.csv:3: field 'confidence': expected a number in \[0, 1\]"):
        read_predictions(tmp_path / "bad.csv")


@pytest.fixture(scope="module")
def real_record_files(shared_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("records")
    for seed, (dataset, stem) in enumerate(QA_FILES.items()):
        rows = [json.loads(line) for line in open(shared_data / "qa" / f"{stem}.jsonl", encoding="utf-8")][:90]
        records = synthetic_records([(r["question"], r["answer"]) for r in rows], dataset, seed=seed)
        write_jsonl(records, folder / f"{stem}.jsonl", fmt="honestybench")
    return folder


def test_cli_evaluate_end_to_end_on_real_questions(real_record_files, tmp_path):
    from elical.records import read_records

    records = read_records(real_record_files)
    assert len(records) == 360
    write_predictions(tmp_path / "oracle.parquet", [r.id for r in records],
                      [0.1 + 0.8 * r.greedy_correct for r in records], "Oracle")
    out = tmp_path / "eval"
    result = CliRunner().invoke(app, ["evaluate", str(real_record_files), "-p", str(tmp_path / "oracle.parquet"),
                                      "--out", str(out), "--resamples", "50", "--compare", "Oracle:Prob"])
    assert result.exit_code == 0, result.output
    assert "AUROC x100" in result.output and "Oracle" in result.output
    table = pd.read_csv(out / "metrics.csv")
    assert list(table.columns) == COLUMNS
    assert set(table.dataset) == {"nq", "pararel", "popqa", "squad", AVERAGE}
    assert set(table.method) == {"Prob", "N-Prob", "Consis-Lex", "Consis-Sem", "Oracle"}  # no verbal in HB files
    assert value(table, "Oracle", AVERAGE, "auroc", "ood") == 1.0
    assert 0.5 < value(table, "Consis-Sem", AVERAGE, "auroc", "in-domain") < 1.0
    markdown = (out / "table.md").read_text()
    assert "| Method | In-domain: NQ | In-domain: ParaRel | In-domain: Avg | OOD: SQuAD | OOD: PopQA | OOD: Avg |" in markdown
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert "reliability_consis-sem.png" in figures and "auroc_by_dataset.png" in figures
    assert all((out / "figures" / name).stat().st_size > 5000 for name in figures)
    provenance = json.loads((out / "evaluation.json").read_text())
    assert provenance["config"]["n_resamples"] == 50 and provenance["versions"]["numpy"]
    differences = pd.read_csv(out / "differences.csv")
    oracle = differences[(differences.method_a == "Oracle") & (differences.dataset == AVERAGE)
                         & (differences.metric == "auroc")]
    assert set(oracle.group) == {"in-domain", "ood"} and (oracle["diff"] > 0).all() and oracle.excludes_zero.all()
    assert set(oracle.comparison) == {"Oracle - Prob", "Oracle - best training-free"}
    assert "## Differences (paired bootstrap" in markdown and "Oracle above " in markdown


def test_cli_evaluate_bad_input_is_one_clear_line(tmp_path):
    bad = tmp_path / "nq_test.jsonl"
    bad.write_text('{"question": "q?", "answer": ["a"], "greedy_response": ["a"], "greedy_correctness": 3}\n')
    result = CliRunner().invoke(app, ["evaluate", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "nq_test.jsonl:1: field 'greedy_correctness': expected 0 or 1, got 3" in " ".join(result.output.split())


@pytest.mark.parametrize("n", [1, 2, 4])
def test_tiny_datasets_get_nan_alignment_instead_of_an_error(n):
    records = synthetic_records(toy_questions(n, "t"), "nq", seed=5)
    records[0].greedy_correct, records[-1].greedy_correct = 1, 0
    table = evaluate(records, config=EvalConfig(methods=["Consis-Sem"], n_resamples=10)).table
    alignment = value(table, "Consis-Sem", "nq", "alignment")
    assert np.isnan(alignment) if n < 3 else 0 <= alignment <= 1


def test_paper_convention_in_evaluate_gives_the_paper_point_values(toy_records):
    config = EvalConfig(methods=["Consis-Sem"], n_resamples=20, convention="paper")
    table = evaluate(toy_records, config=config).table
    hq = [r for r in toy_records if r.dataset == "hq"]
    conf, correct = [np.mean(r.sample_consistent) for r in hq], [r.greedy_correct for r in hq]
    assert value(table, "Consis-Sem", "hq", "ece@10-uniform-paper") == metrics.ece(conf, correct, convention="paper")
    assert value(table, "Consis-Sem", "hq", "alignment") == metrics.alignment(conf, correct, convention="paper").mean
    tiny = synthetic_records(toy_questions(3, "t"), "nq", seed=5)  # the paper's rule scores any n (threshold 0.5)
    assert np.isfinite(value(evaluate(tiny, config=config).table, "Consis-Sem", "nq", "alignment"))


def test_figures_leave_the_callers_matplotlib_backend_alone(tmp_path):
    """A notebook's backend survives importing and drawing the figures (no pyplot, no matplotlib.use)."""
    import subprocess
    import sys

    code = (
        "import sys, matplotlib, numpy as np\n"
        "matplotlib.use('svg')\n"
        "from elical.report.figures import reliability_diagram\n"
        f"reliability_diagram(np.array([0.2, 0.9, 1.0]), np.array([0, 1, 1]), 't', r'{tmp_path / 'r.png'}')\n"
        "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_records_stored_groups_are_used_and_group_options_override_them(tmp_path):
    """A run's records (world datasets, unknown to the paper's split) keep the group each one stores."""
    records = synthetic_records(toy_questions(40, "a"), "people-birth", seed=1) + synthetic_records(
        toy_questions(40, "b"), "places-capital", seed=2)
    for r in records:
        r.extra["group"] = "in-domain" if r.dataset == "people-birth" else "ood"
    write_jsonl(records, tmp_path / "eval.jsonl")
    runner = CliRunner()
    args = ["evaluate", str(tmp_path / "eval.jsonl"), "--methods", "Consis-Sem", "--resamples", "10",
            "--alignment-repeats", "2"]
    assert runner.invoke(app, [*args, "--out", str(tmp_path / "a")]).exit_code == 0
    table = pd.read_csv(tmp_path / "a" / "metrics.csv")
    assert dict(table[table.dataset != AVERAGE].groupby("dataset").group.first()) == {
        "people-birth": "in-domain", "places-capital": "ood"}
    overridden = runner.invoke(app, [*args, "--out", str(tmp_path / "b"), "--group", "places-capital=mc"])
    assert overridden.exit_code == 0, overridden.output
    assert set(pd.read_csv(tmp_path / "b" / "metrics.csv").group) == {"in-domain", "mc"}
    records[0].extra["group"] = "ood"  # one dataset, two stored groups: say so
    with pytest.raises(ValueError, match=r"'people-birth' store different groups \(in-domain, ood\).*--group"):
        evaluate(records, config=EvalConfig(methods=["Consis-Sem"], n_resamples=10))
