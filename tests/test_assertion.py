"""What a reply asserts, not what it mentions (elical.annotate.assertion; the rules of match@4 and answer@3).

Each case below is written for this test and labelled by the rule of tests/data/labels/RULES.md (does the
reply assert the gold answer? do the two replies assert the same answer?), not by running the judge."""

from __future__ import annotations

import pytest

from elical.annotate.assertion import (
    asserts_gold,
    choice_of,
    chosen_option,
    gives_no_answer,
    question_options,
)
from elical.annotate.judges import JudgeQuery, MatchJudge, MentionJudge, extract_choice

BORN = "Who was born later, Marc De Clerck or Wieslaw Perszke?"


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # choice questions: the option chosen decides
        (BORN, "Wieslaw Perszke was born later than Marc De Clerck.", ["Wieslaw Perszke"], True),
        (BORN, "Marc De Clerck was born later, Wieslaw Perszke.", ["Wieslaw Perszke"], False),
        (BORN, "Marc De Clerck was born earlier than Wieslaw Perszke.", ["Wieslaw Perszke"], True),  # by its meaning
        (BORN, "Marc De Clerck or Wieslaw Perszke: it is hard to say.", ["Wieslaw Perszke"], False),
        (BORN, "Not Marc De Clerck but Wieslaw Perszke was born later.", ["Wieslaw Perszke"], True),
        (BORN, "Wieslaw Perszke is a Polish footballer.", ["Wieslaw Perszke"], False),  # names one, chooses none
        (BORN, "The answer is: Wieslaw Perszke.", ["Wieslaw Perszke"], True),
        ("Which film came out first, Alpha Road or Beta Street?", "Alpha Road came out first.", ["Beta Street"], False),
        # lists: every member must be gold
        ("Which countries border Russia?", "China, Vietnam, and the Philippines.", ["China"], False),
        ("Which countries border Russia?", "China and Mongolia.", ["China", "Mongolia"], True),
        ("What city is the Louvre in?", "The Louvre is in Paris, France.", ["Paris"], True),  # a qualifier, not a list
        ("What is his profession?", "He is an actor and comedian.", ["actor"], False),
        # the gold in the question: its echo is no answer
        ("Who/what is Perth named after?", "The name Perth is a nod to a Scottish town.", ["Perth"], False),
        ("Who/what is Norwich Airport named after?", "Norwich Airport is named after the city of Norwich.", ["Norwich"], True),
        ("Who developed Intel Pentium?", "It was developed by Intel.", ["Intel"], True),
        ("Who/what is Blackburn station named after?", "It is named after the Blackburn Shipbuilding Company.", ["Blackburn"], False),
        # context, not answer
        ("What is the nationality of Ada Ruiz?", "The United States is the largest economy in the world.", ["United States"], False),
        ("What is the capital of France?", "Paris is the capital of France.", ["Paris"], True),
        ("What is the capital of France?", "The capital of France is not Paris.", ["Paris"], False),
        ("What is the capital of France?", "The answer to this question is:\n\nParis.", ["Paris"], True),
        ("What is Yoko Ono's citizenship?", "Yoko Ono is a Japanese artist.", ["Japan"], False),  # a form alone
        ("Which city is the capital of France?", "Parisian", ["Paris"], False),  # is not the name
        # yes / no
        ("Are Ian Brown and Dee Snider both singers?", "Yes, both are singers.", ["yes"], True),
        ("Are Ian Brown and Dee Snider both singers?", "No, only one of them sings. Yes, really.", ["yes"], False),
    ],
)
def test_asserts_gold(question, reply, gold, expected):
    assert asserts_gold(question, reply, gold) is expected


def test_the_match_judge_credits_only_what_is_asserted_and_the_mention_judge_keeps_the_old_rules():
    query = JudgeQuery("correctness", BORN, "Marc De Clerck was born later, Wieslaw Perszke.", ("Wieslaw Perszke",))
    assert MatchJudge().judge_batch([query]) == [False]
    assert MentionJudge().judge_batch([query]) == [True]  # "mentions the gold": the rules up to match@3
    assert MatchJudge.name == "match@4" and MentionJudge.name == "mention@3"


def test_choices_are_found_next_to_the_gold_and_without_it():
    found = choice_of(BORN, ["Wieslaw Perszke"])
    assert found is not None and [len(option) for option in found[0].options] == [2, 3] and found[1] == 0
    assert found[0].comparative == "later"
    assert choice_of("Who wrote Hamlet?", ["Shakespeare"]) is None
    assert question_options("Which film came out first, Alpha Road or Beta Street?") is not None
    assert question_options("Who wrote Hamlet?") is None
    assert chosen_option(BORN, "Both were born in Poland.", found[0]) is None


@pytest.mark.parametrize(
    "reply, strict, expected",
    [
        ("B. Canberra", True, "B"),
        ("B. Sydney", True, None),  # the letter of one option with the text of another: no single pick
        ("C. Melbourne\n\nThe answer is D.", True, None),  # two letters
        ("B. Canberra\n\nSydney is larger, though.", True, "B"),  # an option named in the explanation is no pick
        ("B. Sydney", False, "B"),  # the old rules read the letter only
    ],
)
def test_strict_choice_picks(reply, strict, expected):
    assert extract_choice(reply, ("Sydney", "Canberra", "Melbourne", "Perth"), strict) == expected


@pytest.mark.parametrize(
    "question, a, b, expected",
    [
        ("Who directed Pig?", "I don't know.", "I do not know.", False),  # no answer is the same as nothing
        ("Who directed Pig?", "Pig was directed by", "Pig was directed by", False),  # echoes
        ("Who directed Pig?", "Michael Sarnoski.", "Pig was directed by Michael Sarnoski.", True),
        ("Kumasi is in which country?", "Kumasi is in Ghana.", "Kumasi is in Nigeria.", False),
        ("When did it end?", "It ended in 1944.", "It ended in 1945.", False),
        ("Which countries border Peru?", "Chile and Bolivia.", "Chile.", False),  # a list and one of its members
        (BORN, "Wieslaw Perszke.", "Wieslaw Perszke was born later than Marc De Clerck.", True),
        (BORN, "Marc De Clerck.", "Wieslaw Perszke.", False),
        ("Are both from Spain?", "Yes, both are.", "No.", False),
        ("What is the capital of Japan?", "Tokyo.", "The capital of Japan is Tokyo.", True),
    ],
)
def test_consistency_needs_two_answers(question, a, b, expected):
    assert MatchJudge().judge_batch([JudgeQuery("consistency", question, a, (b,))]) == [expected]


def test_no_answer():
    assert gives_no_answer("Who directed Pig?", "I'm sorry, I don't have that information.")
    assert gives_no_answer("Who directed Pig?", "The director of Pig is unknown.")
    assert gives_no_answer("Who directed Pig?", "Who directed Pig?")
    assert not gives_no_answer("Who directed Pig?", "Michael Sarnoski directed it.")
