"""The rule judges' speed-ups decide exactly as the rules they stand for (issue 24): the ASCII fast path of
``tokenize``, the candidate starts of alias containment, the question's stems looked up at once, the
per-(question, reply) caches of the answer judge's rules, and the dedup of a batch."""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import _lru_cache_wrapper

import pytest

from elical.annotate import assertion, consistency, text
from elical.annotate.assertion import _asked, _find, _near_spelling, _question_words, compare_assertions
from elical.annotate.consistency import _forms
from elical.annotate.judges import CachedJudge, Judge, JudgeQuery, MatchJudge, compare_query
from elical.annotate.text import Token, _tokens, contains, fold, starts, token_matches, tokenize

TRICKY = [
    "", " ", "Paris", "PARIS IS BIG", "U.S.", "U. S. Army", "J.K. Rowling", "3.14", "3,000 people", "1,5", "x.y",
    "Plan A.", "Vitamin A is", "NASA and the WHO", "B12", "a", "I. e. something", "No. 5", "The 1970s", "42",
    "Mr. Smith went to Washington, D.C. in 1999.", "A. B. C", "e.g. this", "10.5.3", "v2.0", "US UK", "The Beatles, The",
]


def clear_rule_caches() -> None:
    """Empty every cache of the rules (tokens, sentences, slots, the per-reply decisions)."""
    for module in (text, consistency, assertion):
        for value in vars(module).values():
            if isinstance(value, _lru_cache_wrapper):
                value.cache_clear()


def random_ascii(rng: random.Random) -> str:
    pieces = ["U", "S", ".", ". ", " ", ",", ", ", "3", "000", "14", "J", "K", "the", "A", "Ab", "NASA", "\n", "x.", "0.5",
              "Paris", "is", "no", "-", "'s", "(", ")", ":"]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))


def test_tokenize_fast_path_gives_the_tokens_of_the_rules():
    rng = random.Random(0)
    for sample in TRICKY + [random_ascii(rng) for _ in range(5000)]:
        assert fold(sample) == sample  # ASCII is its own folding
        assert tokenize.__wrapped__(sample) == _tokens(sample), sample


def test_tokenize_of_non_ascii_text_is_unchanged():
    assert tokenize("Zürich") == tokenize("Zurich") == (Token("zurich", "other"),)
    assert [t.text for t in tokenize("Ｊ．Ｋ． Rowling")] == ["jk", "rowling"]  # full-width initials, folded first
    assert tokenize("ØRSTED A/S") == _tokens(fold("ØRSTED A/S"))


def naive_contains(hay: Sequence[Token], needle: Sequence[Token]) -> bool:
    n = len(needle)
    if not n:
        return False
    if n == len(hay):
        return all(a.text == b.text for a, b in zip(needle, hay))
    return any(all(token_matches(a, b) for a, b in zip(needle, hay[i : i + n])) for i in range(len(hay) - n + 1))


def naive_find(hay: Sequence[Token], needle: Sequence[Token]) -> list[int]:
    n = len(needle)
    if not n or n > len(hay):
        return []
    if n == len(hay):
        return [0] if all(a.text == b.text for a, b in zip(needle, hay)) else []
    return [i for i in range(len(hay) - n + 1) if all(token_matches(a, b) for a, b in zip(needle, hay[i : i + n]))]


def test_containment_tries_only_the_starts_that_can_match():
    rng = random.Random(1)
    words = [Token("us", "upper"), Token("us", "lower"), Token("a", "lower"), Token("a", "upper"), Token("paris", "other")]
    for _ in range(20000):
        hay = tuple(rng.choice(words) for _ in range(rng.randint(0, 7)))
        needle = tuple(rng.choice(words) for _ in range(rng.randint(0, 3)))
        assert contains(hay, needle) == naive_contains(hay, needle), (hay, needle)
        assert _find(hay, needle) == naive_find(hay, needle), (hay, needle)
        assert set(starts(hay, needle)) >= set(naive_find(hay, needle))
    assert starts(tokenize("a b"), tokenize("a b c d")) == []  # a needle longer than the hay starts nowhere


@pytest.mark.parametrize("question", ["Which company produces the Model S?", "Who ruled the East Roman Empire?", "Where is it?"])
def test_question_stems_found_at_once_as_word_by_word(question):
    asked = {t.text for t in tokenize(question)}
    for word in ["produced", "producer", "rome", "roman", "romans", "empire", "model", "models", "x", "is", "ruling"]:
        pairwise = word in asked or any(_forms(word)[0] & _forms(other)[0] for other in asked)
        near = _near_spelling(word, frozenset(asked))  # "producer" / "produces" (answer@15): no stem needed
        assert _asked(word, _question_words(question)) == (pairwise or near), word


GREEDY = {
    "Is Paris the capital of France?": "Yes, Paris is the capital of France.",
    "Who was born later, Alpha Road or Beta Street?": "Beta Street was born later than Alpha Road.",
    "What is the capital of France?": "The capital of France is Paris.",
    "How many moons does Mars have?": "Mars has two moons.",
    "Who wrote Hamlet?": "Hamlet was written by William Shakespeare.",
}
SAMPLES = [
    "Yes.", "No, it is not.", "It is not possible to answer.", "Beta Street.", "Alpha Road was born later than Beta Street.",
    "Both were born in 1950.", "Paris", "Paris, France.", "Lyon is the capital.", "Mars has 2 moons.", "Three moons.",
    "I'm sorry, I don't know.", "William Shakespeare", "Shakespeare wrote it.", "The answer is: Shakespeare.",
    "Christopher Marlowe", "The capital of France is", "",
]


def mixed_batch() -> list[JudgeQuery]:
    """Consistency and correctness queries of yes/no, choice, number and plain questions, with repeats."""
    out = []
    for question, greedy in GREEDY.items():
        for sample in SAMPLES + SAMPLES[:4]:
            out.append(JudgeQuery("consistency", question, sample, (greedy,)))
            out.append(JudgeQuery("correctness", question, sample, (greedy.split()[0].strip(","), "Paris", "2")))
    return out


def rules(query: JudgeQuery) -> tuple:
    if query.task == "consistency":
        found = compare_query(query)
        return found.decision, found.left, found.right
    return (MatchJudge().sure(query),)


def test_cached_rules_decide_as_on_cold_caches():
    queries = mixed_batch()
    cold = []
    for query in queries:  # each query on empty caches: what the rules decide without any cache
        clear_rule_caches()
        cold.append(rules(query))
    clear_rule_caches()
    warm = [rules(q) for q in queries]
    backwards = [rules(q) for q in reversed(queries)][::-1]  # every cache filled by other queries first
    assert warm == cold == backwards
    assert len({r for r in cold}) > 4  # the batch is mixed: several different decisions


def test_cached_rules_as_the_uncached_functions():
    question, greedy = "Who wrote Hamlet?", "Hamlet was written by William Shakespeare."
    for sample in SAMPLES:
        expected = assertion.gives_no_answer.__wrapped__(question, sample)
        assert assertion.gives_no_answer(question, sample) == expected
        assert assertion._polarity(question, sample) == assertion._polarity.__wrapped__(question, sample)
        assert assertion._slot_names(question, sample) == assertion._slot_names.__wrapped__(question, sample)
        warm = compare_assertions(question, sample, greedy)
        clear_rule_caches()
        assert compare_assertions(question, sample, greedy) == warm


class Counting(Judge):
    """The match judge, counting the queries it is asked."""

    name = "counting"

    def __init__(self) -> None:
        self.asked: list[JudgeQuery] = []

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        self.asked += queries
        return MatchJudge().judge_batch(queries)


def test_dedup_keeps_order_and_count():
    queries = mixed_batch()
    queries += [JudgeQuery(q.task, q.question, f"  {q.answer} ", q.references) for q in queries[:10]]  # the same, padded
    inner = Counting()
    judge = CachedJudge(inner)
    decided = judge.judge_batch(queries)
    assert decided == [MatchJudge().judge_batch([q])[0] for q in queries]  # one decision per query, in order
    distinct = {(q.task, q.question, q.answer.strip(), q.references) for q in queries}
    assert len(inner.asked) == len(distinct) < len(queries)  # each distinct query judged once
    assert judge.stats.requested == len(queries) and judge.stats.dedup_saved == len(queries) - len(distinct)
