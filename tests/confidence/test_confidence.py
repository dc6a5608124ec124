"""Training-free baselines on small hand-built records."""

from __future__ import annotations

import math

import numpy as np
import pytest
from rouge_score import rouge_scorer

from elical.confidence import MissingFieldError, applicable_estimators, score_records
from elical.confidence.baselines import parse_verbal_confidence
from elical.records import Record


def make(greedy="paris", logprobs=(-0.5, -1.5), samples=("paris", "Paris is the capital", "lyon", "paris"),
         consistent=(1, 1, 0, 1), verbal=None, **kw) -> Record:
    return Record(
        question="capital of france?", answers=["Paris"], greedy_response=greedy,
        greedy_tokens=[f"t{i}" for i in range(len(logprobs))], greedy_logprobs=list(logprobs),
        samples=list(samples), sample_consistent=list(consistent), verbal=verbal or {}, **kw,
    )


def test_prob_and_nprob_known_values():
    scores = score_records([make()], ["Prob", "N-Prob"])
    assert scores["Prob"][0] == pytest.approx(math.exp(-2.0))
    assert scores["N-Prob"][0] == pytest.approx(math.exp(-1.0))


def test_prob_prefers_the_released_cumulative_logprob():
    record = make(greedy_cumulative_logprob=-3.0)
    assert score_records([record], ["prob"])["Prob"][0] == pytest.approx(math.exp(-3.0))


def test_consis_sem_is_share_of_consistent_samples():
    assert score_records([make()], ["Consis-Sem"])["Consis-Sem"][0] == 0.75


def test_consis_lex_is_mean_rouge_l_f1_of_google_rouge():
    record = make()
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    expected = np.mean([scorer.score(record.greedy_response, s)["rougeL"].fmeasure for s in record.samples])
    got = score_records([record], ["Consis-Lex"])["Consis-Lex"][0]
    assert got == pytest.approx(expected)
    assert 0.25 < got < 1.0  # "Paris is the capital" overlaps partly, "lyon" not at all


@pytest.mark.parametrize("reply, expected", [
    ("0.8", 0.8), ("Score: 0.75.", 0.75), ("I'd say 80%", 0.8), ("1", 1.0), (".5", 0.5),
    ("between 0 and 1: 0.3", 0.3), ("0.9, not 1.5", 0.9),
])
def test_verbal_parses_last_number_in_unit_interval(reply, expected):
    assert parse_verbal_confidence(reply) == pytest.approx(expected)


@pytest.mark.parametrize("reply", ["I am not sure", "7 out of 10", "", "150%"])
def test_unparseable_verbal_reply_is_missing_not_zero(reply):
    assert math.isnan(parse_verbal_confidence(reply))
    scores = score_records([make(verbal={"verbal-0": reply})], ["Verbal-0"])["Verbal-0"]
    assert math.isnan(scores[0])


def test_empty_greedy_answer_has_no_nprob():
    record = make(greedy="", logprobs=())
    assert math.isnan(score_records([record], ["N-Prob"])["N-Prob"][0])


def test_missing_field_stops_before_work_and_names_it():
    records = [make(), make(consistent=(1, 0, 0, 1))]
    records[1].sample_consistent = None
    with pytest.raises(MissingFieldError, match=r"Consis-Sem needs 'consistency_judgement', but 1 of 2 records"):
        score_records(records, ["Consis-Sem"])
    with pytest.raises(KeyError, match="unknown confidence method 'entropy'; known: Prob"):
        score_records(records, ["entropy"])


def test_applicable_estimators_says_why_others_do_not_apply():
    usable, skipped = applicable_estimators([make(verbal={"verbal-0": "0.4"})])
    assert [e.name for e in usable] == ["Prob", "N-Prob", "Consis-Lex", "Consis-Sem", "Verbal-0"]
    assert "verbal-10" in skipped["Verbal-10"]


@pytest.mark.parametrize("reference, candidate", [
    ("Paris", "paris"), ("the the cat", "the cat the"), ("", "anything"), ("!!!", "???"),
    ("New York City, USA", "city of new york"), ("a b c d e f", "f e d c b a"), ("Zürich", "Zurich"),
])
def test_fast_rouge_l_equals_google_rouge_score(reference, candidate):
    from elical.confidence.baselines import _RougeL

    expected = rouge_scorer.RougeScorer(["rougeL"]).score(reference, candidate)["rougeL"].fmeasure
    assert _RougeL().f1(reference, candidate) == pytest.approx(expected, abs=1e-12)


def test_verbal_reply_under_an_older_key_spelling_is_scored(tmp_path):
    """Records written with the key 'verbal0' (as annotate once did) are read under 'verbal-0'."""
    from elical.records import read_records, record_to_dict

    row = record_to_dict(make(verbal={"verbal-0": "0.7"}))
    row["verbal"] = {"verbal0": "0.7", "Verbal_10": "0.2"}
    path = tmp_path / "nq_test.jsonl"
    import json

    path.write_text(json.dumps(row) + "\n")
    records = read_records(str(path))
    scores = score_records(records, ["Verbal-0", "Verbal-10"])
    assert scores["Verbal-0"][0] == pytest.approx(0.7) and scores["Verbal-10"][0] == pytest.approx(0.2)
