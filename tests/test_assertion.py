"""What a reply asserts, not what it mentions (elical.annotate.assertion; the rules of match@17 and answer@16).

Each case below is written for this test and labelled by the rule of tests/data/labels/RULES.md (does the
reply assert the gold answer? do the two replies assert the same answer?), not by running the judge."""

from __future__ import annotations

import pytest

from elical.annotate.assertion import (
    answers_inner_question,
    asserts_gold,
    choice_of,
    chosen_option,
    compare_assertions,
    gives_no_answer,
    nested_question,
    question_options,
)
from elical.annotate.judges import JudgeQuery, MatchJudge, MentionJudge, compare_query, extract_choice

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
        # the country's adjective answers a citizenship question (match@9, as the labelled sets have it)
        ("What is Yoko Ono's citizenship?", "Yoko Ono is a Japanese artist.", ["Japan"], True),
        ("Which city is the capital of France?", "Parisian", ["Paris"], False),  # is not the name
        # yes / no
        ("Are Ian Brown and Dee Snider both singers?", "Yes, both are singers.", ["yes"], True),
        ("Are Ian Brown and Dee Snider both singers?", "No, only one of them sings. Yes, really.", ["yes"], False),
    ],
)
def test_asserts_gold(question, reply, gold, expected):
    assert asserts_gold(question, reply, gold) is expected


LAKES = "Are Lake Ohrid and Lake Prespa located in the same country?"
BANDS = "Which band has more members, Blue Harbor or Mr. Kite?"
PEOPLE = "Who was born first, Anna Lindqvist or Pavel Horak?"
DIRECTOR = "Which film has the director born later, Red Dawn or Gray Hill?"


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # choices found without the gold's spelling; named by a word one option alone has
        (BANDS, "Mr. Kite has more members than Blue Harbor.", ["Mr Kite"], True),
        (BANDS, "Blue Harbor has more members than Mr. Kite.", ["Mr Kite"], False),
        (PEOPLE, "Horak was born first.", ["Pavel Horak"], True),
        ("Who is older, Tom Berg or Ann Berg?", "Berg is older.", ["Tom Berg"], False),  # a word both share
        # the comparison said of the first option in a clause of its own; the other side of "compared to"
        (PEOPLE, "Pavel Horak was born first, and Anna Lindqvist second.", ["Pavel Horak"], True),
        (PEOPLE, "Anna Lindqvist was born first, Pavel Horak.", ["Pavel Horak"], False),
        ("Which film came out first, Red Dawn or Gray Hill?", "Red Dawn is the first film made by Gray Hill.", ["Red Dawn"], False),
        ("Which city is larger, Osaka or Kobe?", "Nagoya is larger compared to Osaka.", ["Osaka"], False),
        # the question's own comparison: a degree word grades the question's word, a word of the same
        # sense counts beside the question's predicate
        (BANDS, "Blue Harbor is the more famous band.", ["Blue Harbor"], False),
        (BANDS, "Blue Harbor has more members.", ["Blue Harbor"], True),
        ("Who died earlier, Anna Lindqvist or Pavel Horak?", "Anna Lindqvist was the first to use the word.", ["Anna Lindqvist"], False),
        ("Who died earlier, Anna Lindqvist or Pavel Horak?", "Anna Lindqvist died first.", ["Anna Lindqvist"], True),
        # the question repeated up to an option and cut off is no choice; a sentence that goes on chooses
        (DIRECTOR, "The film that has the director born later, Red Dawn", ["Red Dawn"], False),
        (DIRECTOR, "The film that has the director born later, Red Dawn, is a classic.", ["Red Dawn"], True),
        # a later sentence that chooses the other option contradicts the first
        (PEOPLE, "Anna Lindqvist was born first. Pavel Horak was born first.", ["Anna Lindqvist"], False),
        # yes/no by a restated claim
        (LAKES, "Lake Ohrid and Lake Prespa are located in the same country.", ["yes"], True),
        (LAKES, "Lake Ohrid and Lake Prespa are not located in the same country.", ["no"], True),
        (LAKES, "Lake Ohrid and Lake Prespa are not located in the same country.", ["yes"], False),
        (LAKES, "Lake Ohrid and Lake Prespa in the same country are two different lakes.", ["yes"], False),
        # more precise forms of the gold: a year of a decade, a plural
        ("When did the war end?", "It ended in 1975.", ["1970s"], True),
        ("When did the war end?", "It ended in 1985.", ["1970s"], False),
        ("What profession do Ada and Bea share?", "They are both Italian painters.", ["Italian painter"], True),
        # the gold in the question, outside its echo
        ("Who/what is Lyon Airport named after?", "Lyon Airport is named after the city of Lyon, France.", ["Lyon"], True),
        ("Who/what is Oxford Airport named after?", "Oxford Airport is named after the University of Oxford.", ["Oxford"], False),
        ("Who developed Acme Router?", "Acme Router is a product of Acme Corporation.", ["Acme"], True),
        ("Who developed Acme Router?", "Acme developed the Acme Router in 1990.", ["Acme"], True),
        ("Who developed Acme Router?", "Acme Router was developed in 1990.", ["Acme"], False),
    ],
)
def test_asserts_gold_since_match_5(question, reply, gold, expected):
    assert asserts_gold(question, reply, gold) is expected


YOUNGER = "Who is younger, Anna Lindqvist or Pavel Horak?"
FIRST_FILM = "Which film came out first, Red Dawn or Gray Hill?"


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # a choice needs the question's comparison or an announcement before the option: cut off after
        # the question's verb, the reply has chosen nothing
        (PEOPLE, "Anna Lindqvist was born", ["Anna Lindqvist"], False),
        (PEOPLE, "The person born first is Anna Lindqvist.", ["Anna Lindqvist"], True),
        (PEOPLE, "Anna Lindqvist is the answer.", ["Anna Lindqvist"], True),
        # an option denied, or described as a third thing
        (DIRECTOR, "The film that has the director born later, Red Dawn, is not the one I mean.", ["Red Dawn"], False),
        (DIRECTOR, "The film that has the director born later, Red Dawn, is The Long Road.", ["Red Dawn"], False),
        (DIRECTOR, "Red Dawn is an American film whose director was born later.", ["Red Dawn"], True),
        # a ranking on a claim of its own is not the question's comparison
        (FIRST_FILM, "Red Dawn is the first film to feature a Welsh cast.", ["Red Dawn"], False),
        (FIRST_FILM, "Red Dawn was the first to come out.", ["Red Dawn"], True),
        # "than" compares only in the question's sense
        (YOUNGER, "Pavel Horak was more resilient than Anna Lindqvist.", ["Pavel Horak"], False),
        (YOUNGER, "Pavel Horak is younger than Anna Lindqvist.", ["Pavel Horak"], True),
        # superlatives and "after"/"before" carry the question's sense: a later sentence contradicts
        ("Who is older, Tom Reed or Ann Marsh?", "Tom Reed is the answer. The one who is the oldest is Ann Marsh.",
         ["Tom Reed"], False),
        ("Who was born earlier, Tom Reed or Ann Marsh?", "Tom Reed was born earlier. Tom Reed was born after Ann Marsh.",
         ["Tom Reed"], False),
        ("Who was born earlier, Tom Reed or Ann Marsh?", "Ann Marsh was born after Tom Reed.", ["Tom Reed"], True),
        # a yes or no taken back in its own sentence answers nothing
        (LAKES, "No, the answer to this question is not possible to give; it is ambiguous.", ["no"], False),
        (LAKES, "No, they lie in two countries.", ["no"], True),
    ],
)
def test_asserts_gold_since_match_6(question, reply, gold, expected):
    assert asserts_gold(question, reply, gold) is expected


def test_the_match_judge_credits_only_what_is_asserted_and_the_mention_judge_keeps_the_old_rules():
    query = JudgeQuery("correctness", BORN, "Marc De Clerck was born later, Wieslaw Perszke.", ("Wieslaw Perszke",))
    assert MatchJudge().judge_batch([query]) == [False]
    assert MentionJudge().judge_batch([query]) == [True]  # "mentions the gold": the rules up to match@3
    assert MatchJudge.name == "match@17" and MentionJudge.name == "mention@3"


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
        ("B. Sydney, the largest city", True, None),  # the letter of one option with the text of another
        ("C. Melbourne\n\nThe answer is D.", True, None),  # two letters
        ("B. Canberra\n\nSydney is larger, though.", True, "B"),  # an option named in the explanation is no pick
        ("B. Sydney, the largest city", False, "B"),  # the old rules read the letter only
        ("A. the capital of Australia", True, None),  # closer to another option's words than to A's
        ("B. the federal capital", True, "B"),
        ("B. Canberra is not the answer.", True, None),  # a pick its own line disowns (match@16)
        ("B. Canberra is incorrect.\nC. Melbourne is correct.", True, None),
        ("B. Canberra\n\nSydney is not the correct answer.", True, "B"),  # the explanation's verdict on another
    ],
)
def test_strict_choice_picks(reply, strict, expected):
    options = ("Sydney, the largest city", "Canberra, the capital of Australia", "Melbourne", "Perth")
    assert extract_choice(reply, options, strict) == expected


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
        (LAKES, "Lake Ohrid and Lake Prespa are located in the same country.", "Yes.", True),
        (LAKES, "They are not located in the same country.", "Yes, they are.", False),
        (PEOPLE, "Horak was born first.", "Pavel Horak was born first, and Anna Lindqvist second.", True),
        # a yes/no question is answered by a yes or a no (or a restated claim) alone
        (LAKES, "The two lakes are beautiful.", "The two lakes are beautiful.", False),
        (LAKES, "No, it is impossible to say.", "No.", False),
        (FIRST_FILM, "Red Dawn came out first.", "Red Dawn is the first film to feature a Welsh cast.", False),
    ],
)
def test_consistency_needs_two_answers(question, a, b, expected):
    assert MatchJudge().judge_batch([JudgeQuery("consistency", question, a, (b,))]) == [expected]


def test_no_answer():
    assert gives_no_answer("Who directed Pig?", "I'm sorry, I don't have that information.")
    assert gives_no_answer("Who directed Pig?", "The director of Pig is unknown.")
    assert gives_no_answer("Who directed Pig?", "Who directed Pig?")
    assert not gives_no_answer("Who directed Pig?", "Michael Sarnoski directed it.")


def test_the_same_unclear_multiple_choice_pick_word_for_word_is_the_same_assertion():
    options = ("Sydney, the largest city", "Canberra, the capital of Australia", "Melbourne", "Perth")
    unclear = "A. the capital of Australia"  # letter A, the words of B
    same = JudgeQuery("consistency", "Which city is the capital?", unclear, (unclear + "\n\nMore words.",), options)
    other = JudgeQuery("consistency", "Which city is the capital?", unclear, ("C. the capital of Australia",), options)
    assert MatchJudge().judge_batch([same, other]) == [True, False]


NESTED = "Who was the mayor of the city where the Glass Bridge was built?"


def test_a_nested_question_splits_at_the_clause_that_describes_its_noun_phrase():
    outer, inner = nested_question(NESTED)
    assert outer == ("mayor",) and set(inner) == {"city", "glass", "bridge", "built"}
    assert nested_question("What is the city where the Glass Bridge was built?") is None  # asks for the phrase itself
    assert nested_question("Where was the Glass Bridge built?") is None
    assert nested_question("The city that never sleeps is in which state?") is None  # the phrase starts the question


@pytest.mark.parametrize(
    "reply, inner",
    [
        ("The city where the Glass Bridge was built is Oldport.", True),  # names the city, not its mayor
        ("The Glass Bridge was built in Oldport, a city in Norland.", True),
        ("The mayor of the city where the Glass Bridge was built was Ada Brook.", False),
        ("The Glass Bridge stands in Oldport, whose mayor was Ada Brook.", False),  # the outer word: read as usual
        ("Ada Brook.", False),  # a short answer repeats neither part
        ("Ada Brook was the mayor.", False),
    ],
)
def test_a_reply_that_answers_the_inner_question_answers_none(reply, inner):
    assert answers_inner_question(NESTED, reply) is inner


def test_the_answer_judge_reads_an_inner_answer_as_no_answer():
    def decided(a: str, b: str) -> bool | None:
        return compare_query(JudgeQuery("consistency", NESTED, a, (b,))).decision

    inner = "The city where the Glass Bridge was built is Oldport."
    assert decided(inner, inner) is False  # the same inner answer twice still answers nothing asked
    assert decided("Ada Brook.", "The mayor of the city where the Glass Bridge was built was Ada Brook.") is True
    assert MatchJudge().judge_batch([JudgeQuery("consistency", NESTED, inner, (inner,))]) == [True]  # match keeps its rules


CHOICE_FILM = "Which film has the director who was born later, Making A Man or Night Of The Living Dead?"


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # an option of several words is found in any case: restating both options chooses neither
        (CHOICE_FILM, "The film whose director was born later, making a man or night of the living dead, is", "Night Of The Living Dead", False),
        (CHOICE_FILM, "making a man is the film whose director was born later.", "Making A Man", True),
        # a word that only one option has names it, unless it is part of another name
        ("Who was born first, Olga Fedori or Caleb Dyer?", "Olga Markova was born first.", "Olga Fedori", False),
        ("Who was born first, Olga Fedori or Caleb Dyer?", "Olga Fedory was born first.", "Olga Fedori", True),  # misspelt
        ("Who was born first, Olga Fedori or Caleb Dyer?", "Olga was born first.", "Olga Fedori", True),
    ],
)
def test_an_option_is_named_whole_in_any_case_or_by_its_own_word_alone(question, reply, gold, expected):
    assert asserts_gold(question, reply, [gold]) is expected


OLDER = "Who is older, Ana Ferro or Bela Kuti?"


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # one option named alone with the comparison in the opposite sense chooses the other option (match@8)
        (OLDER, "Bela Kuti is the younger of the two.", "Ana Ferro", True),
        (OLDER, "Bela Kuti is the younger of the two.", "Bela Kuti", False),
        (OLDER, "Ana Ferro is the older of the two.", "Ana Ferro", True),
        ("Which film came out first, Alpha Road or Beta Street?", "Alpha Road came out later.", "Beta Street", True),
        # the opposite sense said again of the other option agrees with the first sentence's choice
        (OLDER, "Ana Ferro is the older of the two. Bela Kuti is the younger of the two.", "Ana Ferro", True),
    ],
)
def test_one_option_named_in_the_opposite_sense_chooses_the_other(question, reply, gold, expected):
    assert asserts_gold(question, reply, [gold]) is expected


def test_two_replies_that_choose_one_option_in_opposite_words_are_the_same_answer():
    """"A is the older" and "B is the younger" assert the same answer (answer@7)."""
    query = JudgeQuery("consistency", OLDER, "Bela Kuti is the younger one.", ("Ana Ferro is the older one.",))
    different = JudgeQuery("consistency", OLDER, "Ana Ferro is the younger one.", ("Ana Ferro is the older one.",))
    assert compare_query(query).decision is True and compare_query(different).decision is False


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # the subject repeats the question's own phrase: the predicate cannot make it the answer (match@9)
        ("What is solar panel a part of?", "A solar panel is a part of a solar panel that turns light into power.",
         ["panel"], False),
        ("Who developed IBM Network Control Program?", "IBM developed the IBM Network Control Program.", ["IBM"], True),
        # an option described as something called by a third name is not chosen (match@9)
        ("Which film came out first, Alpha Road or Beta Street?",
         "The film that came out first, Alpha Road, is actually a film called Gamma Lane.", ["Alpha Road"], False),
        ("Which film came out first, Alpha Road or Beta Street?",
         "The film that came out first, Alpha Road, is a quiet drama called \"A", ["Alpha Road"], True),  # cut off
        # a country's adjective answers a question that asks for a country, not one that asks for a city
        ("What is Mika Tanaka's citizenship?", "Mika Tanaka is a Japanese painter.", ["Japan"], True),
        ("Which city was Mika Tanaka born in?", "Mika Tanaka is a Japanese painter.", ["Japan"], False),
        # an alias that ends in the kind of thing the question asks for, asserted without it
        ("What language is spoken in Ruritania?", "The language spoken in Ruritania is Ruritanian.",
         ["Ruritanian Language"], True),
        ("Who starred in Hannah Montana?", "The show starred Hannah.", ["Hannah Montana"], False),  # a name's own word
        # a first sentence that only remarks on the question's topic does not decide; the next one answers
        ("Who developed Orbit OS?", "The development of Orbit OS was a big step in computing. It was developed by Acme.",
         ["Acme"], True),
        ("Who developed Orbit OS?", "Orbit OS was developed by a small team. It was later sold to Acme.", ["Acme"], False),
        # "Do A and B share the same X?" answered by the one X named for both: yes
        ("Do Ann Lee and Bo Chen have the same nationality?", "Ann Lee and Bo Chen are both from Canada.", ["yes"], True),
        ("Are Alpha Mill and Beta Barn located in the same country?", "They are all located in the Netherlands.",
         ["yes"], True),
        ("Do Ann Lee and Bo Chen have the same nationality?", "Ann Lee and Bo Chen are both Canadian.", ["yes"], True),
        ("Do Ann Lee and Bo Chen have the same nationality?", "They are both from Canada.", ["no"], False),
        # a "no" taken back by a later sentence that restates the claim of both; a sentence on one of them does not
        ("Are Ann Lee and Bo Chen both pilots?", "No, Ann Lee and Bo Chen are not pilots. They are both pilots.",
         ["no"], False),
        ("Are Ann Lee and Bo Chen both pilots?", "No, they are not both pilots. Ann Lee is a pilot and Bo Chen is",
         ["no"], True),
        # a name that qualifies a noun names no shared country
        ("Are Alpha Mill and Beta Barn located in the same country?",
         "Alpha Mill and Beta Barn are both located in the Iberian peninsula.", ["yes"], False),
        ("Do both films have directors from the same country?", "They are both French films.", ["yes"], False),
    ],
)
def test_asserts_gold_since_match_9(question, reply, gold, expected):
    assert asserts_gold(question, reply, gold) is expected


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("B.fission\n\nThe correct answer is:\nC.fusion", None),  # a second letter offered as the answer
        ("B.fission\nAnswer: C", None),
        ("B.fission\nC) fusion", None),  # a second letter at the start of a later line
        ("B.fission\n\nOption C is often confused with it.", "B"),  # a letter in passing offers no answer
    ],
)
def test_a_second_letter_stated_as_the_answer_leaves_no_pick(reply, expected):
    choices = ("decay", "fission", "fusion", "capture")
    assert extract_choice(reply, choices) == expected
    assert extract_choice("B.fission\n\nThe correct answer is:\nC.fusion", choices, strict=False) == "B"  # mention@3


PORT = "In what city was the Rhine harbour of the Lower Delta Company built?"


@pytest.mark.parametrize(
    "question, a, b, expected",
    [
        # cut off by the token limit inside a word of the question: the question repeated, no answer (answer@8)
        ("The Old Mill is a 1920 silent film shot in a town that is the northern terminus of what?",
         "The Old Mill is a 1920 silent film shot in a town that is the northern term",
         "The Old Mill is a 1920 silent film shot in a town that is the northern term", False),
        ("Which university did Ana Lee attend?", "D", "D", True),  # a short answer, not a cut-off "did"
        # a name given first by one answer and only as the other's qualifier: a coarser answer (answer@8)
        (PORT, "It was built in Germany.", "It was built in the city of Duisburg, Germany.", False),
        (PORT, "It was built in Duisburg.", "It was built in Duisburg, Germany.", True),
        (PORT, "It was built in Duisburg, Germany.", "It was built in Duisburg.", True),
    ],
)
def test_consistency_since_answer_8(question, a, b, expected):
    assert compare_query(JudgeQuery("consistency", question, a, (b,))).decision is expected


CANAL = "Which canal lies farther east, Alder Canal or Birch Canal?"


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # a hyphenated pair of names gives two: right only if both are gold, as a list is (match@10)
        ("What nationality is the director of film Quiet Bay?", "The director of Quiet Bay is a Canadian-American actor.",
         ["Canadian"], False),
        ("What nationality is the director of film Quiet Bay?", "The director of Quiet Bay is a Canadian-American actor.",
         ["Canadian", "American"], True),
        ("What is Ana Ruiz's citizenship?", "Ana Ruiz is a Pakistani-Indian singer.", ["India"], False),
        ("What is Ana Ruiz's citizenship?", "Ana Ruiz is an Indian singer.", ["India"], True),
        ("In which state is Walden?", "Walden is in Baden-Wurttemberg.", ["Baden-Württemberg"], True),  # one name
        ("In which state is Walden?", "Walden is in Baden-Wurttemberg.", ["Baden"], False),
        # a title that ends in "?" is still an option of "A or B?" (match@10)
        ("Which film came out more recently, Who Goes There? or The Long Night?",
         "Who Goes There is a film released more recently than The Long Night.", ["The Long Night"], False),
        ("Which film came out more recently, Who Goes There? or The Long Night?",
         "Who Goes There is a film released more recently than The Long Night.", ["Who Goes There?"], True),
        # a shared value named and denied in one sentence answers neither way
        ("Do Ann Lee and Bo Chen have the same nationality?",
         "Ann Lee and Bo Chen are both Canadian, but they are not the same nationality.", ["no"], False),
        ("Do Ann Lee and Bo Chen have the same nationality?", "Ann Lee and Bo Chen are both Canadian, and proud of it.",
         ["yes"], True),
        # a clause after "while" that chooses the other option by the question's comparison contradicts the first;
        # "farther" grades the word after it, as "more" does ("farther west" is not "farther east")
        (CANAL, "The Alder Canal lies farther east, while the Birch Canal lies farther east.", ["Alder Canal"], False),
        (CANAL, "The Alder Canal lies farther east, while the Birch Canal lies farther west.", ["Alder Canal"], True),
        (CANAL, "The Alder Canal lies farther east than the Birch Canal, while Birch", ["Alder Canal"], True),  # cut off
    ],
)
def test_asserts_gold_since_match_10(question, reply, gold, expected):
    assert asserts_gold(question, reply, gold) is expected


WHERE_BORN = "Where was Mary Rolf born?"


@pytest.mark.parametrize(
    "question, a, b, expected",
    [
        # a relative clause or a participle describes the answer; it is not part of it (answer@9)
        (WHERE_BORN, "Mary Rolf was born in Raleigh, which is the capital of North Carolina.", "Mary Rolf was born in Raleigh.",
         True),
        (WHERE_BORN, "Mary Rolf was born in Raleigh, which is the capital.", "Mary Rolf was born in Durham, which is big.",
         False),
        ("What did Tom Field and Ray Hart do for a living?", "They were both carpenters, known for their fine work.",
         "They were both carpenters.", True),
        # a clause that restricts a common noun is part of the statement: no short answer "Swiss mathematician"
        ("Where did Jacob Ames work?", "Jacob Ames was a Swiss mathematician who made contributions to calculus.",
         "Jacob Ames was a Swiss mathematician who made contributions to algebra.", False),
        ("What is the largest state of Ruritania?", "The largest state of Ruritania is Lorn, with 3 million people.",
         "The largest state of Ruritania is Lorn.", True),
        # ... unless the clause restates the question: then it holds the answer
        ("What position does Leo Vance play?", "Leo Vance is a Brazilian footballer who plays as a striker.",
         "Leo Vance is a Brazilian footballer who plays as a goalkeeper.", False),
        # "in the state of X" locates something in X
        ("Where is the town of Ardmore?", "Ardmore is in North Carolina.", "Ardmore is in the state of North Carolina.", True),
        ("What county is Ardmore in?", "Ardmore is the capital of the state of Ohio.", "Ardmore is a county in Ohio.", False),
        # an abbreviation of the other answer's name
        ("Which country is the director of film Quiet Bay from?", "The director of Quiet Bay is from the US.",
         "The director of Quiet Bay is from the United States.", True),
    ],
)
def test_consistency_since_answer_9(question, a, b, expected):
    assert MatchJudge().judge_batch([JudgeQuery("consistency", question, a, (b,))]) == [expected]  # rules alone


def test_an_unclear_pick_that_offers_a_second_letter_is_the_same_as_nothing():
    """"B. <C's text>" twice is one unclear pick; with "The answer is C." after it, the reply asserts none (answer@9)."""
    choices = ("decay", "fission", "fusion", "capture")
    question = "Which process powers the sun?"
    same = JudgeQuery("consistency", question, "B.fusion", ("B.fusion",), choices)
    second = JudgeQuery("consistency", question, "B.fusion\n\nThe answer is C.fusion", ("B.fusion",), choices)
    assert MatchJudge().judge_batch([same, second]) == [True, False]


def test_an_option_with_a_title_set_off_by_commas_is_one_option():
    """"Who lived longer, A B, 1st Earl of C or D E?" offers "A B, 1st Earl of C" and "D E" (match@9)."""
    question = "Who lived longer, Tomas Vero, 1St Earl Of Lanmark or Piet Hals?"
    options = question_options(question)
    assert options is not None and [" ".join(t.text for t in o) for o in options.options] == [
        "tomas vero 1st earl of lanmark", "piet hals"]
    same = JudgeQuery("consistency", question, "Tomas Vero lived longer than Piet Hals.",
                      ("Tomas Vero lived longer than Piet Hals.",))
    assert compare_query(same).decision is True
    assert asserts_gold(question, "Tomas Vero lived longer than Piet Hals.", ["Tomas Vero, 1St Earl Of Lanmark"])


def test_where_or_when_the_role_of_x_was_born_nests_who_the_role_is():
    """"Where was the director of film X born?" nests "Who is the director of film X?" (answer@8)."""
    question = "Where was the director of film Blue Harbour (1961 Film) born?"
    assert nested_question(question) == (("born",), ("director", "film", "blue", "harbour", "1961", "film"))
    assert answers_inner_question(question, "The director of film Blue Harbour (1961 Film) was Ian Roe.")
    assert not answers_inner_question(question, "The director of film Blue Harbour (1961 Film) was born in Leeds.")
    same = JudgeQuery("consistency", question, "The director of film Blue Harbour (1961 Film) was Ian Roe.",
                      ("The director of film Blue Harbour (1961 Film) was Ian Roe.",))
    assert compare_query(same).decision is False


BANDS = "Did the bands No Regrets and Blue Harbour originate from the same country?"


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # a "no" that begins a name of the question is the name, not the answer (match@11)
        (BANDS, "No Regrets and Blue Harbour are both from the United States.", ["no"], False),
        (BANDS, "No Regrets and Blue Harbour are both from the United States.", ["yes"], True),
        (BANDS, "No, No Regrets is British and Blue Harbour is American.", ["no"], True),
        # an alias of little words in lower case names nothing ("in" among India's aliases); "IN" in capitals is kept
        ("In what country is Lakeview School?", "Lakeview School is based in the United Arab Emirates.", ["in", "India"],
         False),
        ("In what country is Lakeview School?", "Lakeview School is in India.", ["in", "India"], True),
        # a list in lower case is a list, whatever the gold's case: one gold member among others is no answer
        ("Zorse is a hybrid of a zebra with what animal?",
         "A zorse is a hybrid of zebras with equids, such as horses, donkeys, and ponies.", ["Horses"], False),
        ("Where do you get a money order from?", "Money orders are sold by banks, grocery stores, and post offices.",
         ["bank"], False),
        ("Where do you get a money order from?", "You get a money order from a bank.", ["bank"], True),
        # a place given in a clause about another life event does not answer where someone died or worked
        ("Where did Karl Ostler die?", "Karl Ostler was born in 1822 in Graz, Austria, and died in 1890.", ["Graz"], False),
        ("Where did Karl Ostler die?", "Karl Ostler was born in Linz and died in Graz.", ["Graz"], True),
        ("Where did Ilse Brandt work?", "Ilse Brandt was born in Bremen and worked as a teacher.", ["Bremen"], False),
        ("Where was Ilse Brandt born?", "Ilse Brandt was born in Bremen.", ["Bremen"], True),
        # the question's frame said of another name answers another question
        ("What is the capital of Norland?", "The capital of Westmark is Port Ellis.", ["Port Ellis"], False),
        ("What is the capital of Norland?", "The capital of Norland is Port Ellis.", ["Port Ellis"], True),
        ("What is the capital of Norland?", "Port Ellis is the capital of Norland, Westmark.", ["Port Ellis"], True),
        ("What is the capital of the United Kingdom?", "The capital of the UK is London.", ["London"], True),  # initials
        ("What is the capital of Kyrgyzstan?", "The capital of Kyrgystan is Bishkek.", ["Bishkek"], True),  # misspelt
        ("What river is longer than the Ardel?", "The longest river in Ostland is the Vessa.", ["Vessa"], True),
        ("What year was the film with Ann Lee made?", "The film I'm thinking of is Dawn (2009).", ["2009"], True),
    ],
)
def test_asserts_gold_since_match_11(question, reply, gold, expected):
    assert asserts_gold(question, reply, gold) is expected


@pytest.mark.parametrize(
    "question, a, b, expected",
    [
        # a negated comparison chooses the other option
        ("Who was born earlier, Ann Lee or Bo Chen?", "Bo Chen was not born earlier than Ann Lee.",
         "Bo Chen was born earlier than Ann Lee.", False),
        ("Who was born earlier, Ann Lee or Bo Chen?", "Bo Chen wasn't born earlier than Ann Lee.",
         "Ann Lee was born earlier than Bo Chen.", True),
        ("Which was released first, Dawn or Dusk?", "Dawn was never released first.", "Dawn was released first.", False),
        # two replies whose slots hold nothing new assert nothing
        ("Where was traditional Ostland medicine created?", "Traditional Ostland medicine is created and studied.",
         "Traditional Ostland medicine is created and practiced.", False),
        # the question's frame said of another name: no answer, whatever the other reply says
        ("What is the capital of Norland?", "The capital of Westmark is Port Ellis.", "The capital of Norland is Port Ellis.",
         False),
        ("What is the capital of Norland?", "Port Ellis.", "The capital of Norland is Port Ellis.", True),
    ],
)
def test_consistency_since_answer_10(question, a, b, expected):
    assert MatchJudge().judge_batch([JudgeQuery("consistency", question, a, (b,))]) == [expected]  # rules alone


def test_a_negated_comparison_chooses_the_other_option():
    question = "Who was born earlier, Ann Lee or Bo Chen?"
    assert asserts_gold(question, "Bo Chen was not born earlier than Ann Lee.", ["Ann Lee"])
    assert not asserts_gold(question, "Bo Chen was not born earlier than Ann Lee.", ["Bo Chen"])


SAME_COUNTRY = "Are both airports, Alder Field and Birch Field, located in the same country?"


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # "Both A and B are (located) in X." names the one X both have; "from the same X" restates the claim (match@12)
        (SAME_COUNTRY, "Both airports, Alder Field and Birch Field, are located in Ostland.", ["yes"], True),
        (SAME_COUNTRY, "Both airports, Alder Field and Birch Field, are located in Ostland.", ["no"], False),
        (SAME_COUNTRY, "The two airports are indeed both from the same country, Ostland.", ["yes"], True),
        (SAME_COUNTRY, "The two airports are from different countries.", ["no"], True),
        (SAME_COUNTRY, "The two airports are not from the same country.", ["no"], True),
        (SAME_COUNTRY, "Alder Field and Birch Field in the same country are two different airports.", ["yes"], False),
        # an option of two words is the gold one where the gold alias has a middle name between them
        ("Which musician is older, Philip Lane or Alec Hart?", "Philip Lane is older than Alec Hart.",
         ["Philip Steven Lane"], True),
        ("Which musician is older, Philip Lane or Alec Hart?", "Alec Hart is older than Philip Lane.",
         ["Philip Steven Lane"], False),
        # a short lead-in comparison is said of the option after it
        ("Who was born later, Ron Amis or Guy Mell?", "Born later, Ron Amis is the son of a painter.", ["Ron Amis"], True),
        ("Who was born later, Ron Amis or Guy Mell?", "Born later, Ron Amis is the son of a painter.", ["Guy Mell"], False),
        # a sentence that only denies one of two options chooses the other
        ("Which has more members, Dada or Alt-J?", "The answer is not Dada.", ["Alt-J"], True),
        ("Which has more members, Dada or Alt-J?", "The answer is not Dada.", ["Dada"], False),
        # "no." before a capital ends a sentence; "No. 5" does not
        ("Which has more members, Dada or Alt-J?", "It is a yes or no. Dada has more members than Alt-J.", ["Dada"], True),
        # a company's alias without its legal form; a Latin plural
        ("Who developed Quill Books?", "It was developed by Acme's own team.", ["Acme Inc."], True),
        ("What kind of organism is Zelora?", "Zelora is a type of algae.", ["alga"], True),
    ],
)
def test_asserts_gold_since_match_12(question, reply, gold, expected):
    assert asserts_gold(question, reply, gold) is expected


def test_a_description_after_a_comma_and_an_article_ends_the_answer():
    """ "X is named after the Y, a major airport ..." gives Y, as a relative clause would (answer@11)."""
    question = "Who/what is Corran Airport named after?"
    a = "Corran Airport is named after the Duke of Lorn, which is a title."
    b = "Corran Airport is named after the Duke of Lorn, a major figure of the region."
    assert MatchJudge().judge_batch([JudgeQuery("consistency", question, a, (b,))]) == [True]


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # a "no" that its sentence takes back with a refusal answers nothing (match@13)
        (SAME_COUNTRY, "No, I'm not able to answer the question for you.", ["no"], False),
        (SAME_COUNTRY, "No, I'm afraid that's not what I was asked to answer.", ["no"], False),
        (SAME_COUNTRY, "No, they are in different countries.", ["no"], True),
        # a sentence that sets out how to answer chooses nothing; a later one may
        ("Who was born later, Ron Amis or Guy Mell?", "To determine who was born later, Ron Amis, let's compare their ages.",
         ["Ron Amis"], False),
        ("Who was born later, Ron Amis or Guy Mell?",
         "To determine who was born later, let's compare their ages. Ron Amis was born later than Guy Mell.", ["Ron Amis"],
         True),
        ("Which artist lives closer to Ostland, Ron Amis or Guy Mell?",
         "To determine which artist lives closer to Ostland, Ron Amis is the better choice as he lives closer to Ostland.",
         ["Ron Amis"], True),
    ],
)
def test_asserts_gold_since_match_13(question, reply, gold, expected):
    assert asserts_gold(question, reply, gold) is expected


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # a pick the reply calls another option "actually" is taken back (match@14)
        ("Which film was released earlier, Dawn or Dusk?", "Dawn was released earlier, but it's actually Dusk.", ["Dawn"],
         False),
        ("Which film was released earlier, Dawn or Dusk?", "Dawn was released earlier, but it was actually filmed in Rome.",
         ["Dawn"], True),
        # a yes or no that the rest of its sentence contradicts with "both" answers nothing
        ("Are Alder and Birch both in the family Rosaceae?", "No, Alder and Birch are both in the family Rosaceae.", ["no"],
         False),
        ("Are Alder and Birch both in the family Rosaceae?", "No, they are not both in the family Rosaceae.", ["no"], True),
    ],
)
def test_asserts_gold_since_match_14(question, reply, gold, expected):
    assert asserts_gold(question, reply, gold) is expected


def test_a_year_is_not_the_place_a_where_question_asks_for():
    """ "born in 1980 in Wilmore" and "born in 1980 in Ostland" give different places, not the same year (answer@13)."""
    question = "Where was Karl Ostler born?"
    a = "Karl Ostler was born in 1980 in Wilmore, a village."
    b = "Karl Ostler was born in 1980 in Ostland."
    same = "Karl Ostler was born in 1980 in Wilmore."
    assert MatchJudge().judge_batch([JudgeQuery("consistency", question, a, (b,)),
                                     JudgeQuery("consistency", question, a, (same,))]) == [False, True]


@pytest.mark.parametrize(
    "question, a, b, expected",
    [
        # a question that asks for a quantity by its name is answered by a number (answer@14)
        ("What is the population of the city where Karl Ostler was born?",
         "The population of the city where Karl Ostler was born is Wilmore.",
         "The population of the city where Karl Ostler was born is Wilmore.", False),
        ("What is the population of the city where Karl Ostler was born?",
         "The population of Wilmore is 20,000.", "Its population is 20,000.", True),
        ("What percent of people in Ostland were born abroad?", "In Ostland, people were born abroad.",
         "In Ostland, people were born abroad.", False),
        ("In 2012, how many immigrants lived in Wilmore?", "Wilmore had immigrants from Ostland.",
         "Wilmore had immigrants from Ostland.", False),
        ("In 2012, how many immigrants lived in Wilmore?", "Wilmore had 3,000 immigrants.", "3,000.", True),
        # a name of a thing that is not a quantity asks for no number
        ("What is the highest ranking court in Ostland?", "The Supreme Court of Ostland.", "The Supreme Court of Ostland.",
         True),
        # a slot that names something is still compared by the rules
        ("Who directed the opera Dawn?", "The opera Dawn was directed by Karl Ostler.", "Karl Ostler.", True),
    ],
)
def test_consistency_since_answer_14(question, a, b, expected):
    assert MatchJudge().judge_batch([JudgeQuery("consistency", question, a, (b,))]) == [expected]  # rules alone


def test_alternatives_restated_with_vs_choose_nothing():
    """ "A vs. B" restates the question's alternatives as "A or B" does (match@15)."""
    question = "Who is younger, Ann Lee or Bo Chen?"
    for reply in ("It asks which one is younger, Ann Lee vs. Bo Chen.", "Which is younger, Ann Lee versus Bo Chen?"):
        assert not asserts_gold(question, reply, ["Ann Lee"]) and not asserts_gold(question, reply, ["Bo Chen"])
    assert asserts_gold(question, "Ann Lee vs. Bo Chen: Ann Lee is younger than Bo Chen.", ["Ann Lee"]) is False
    assert asserts_gold(question, "Ann Lee is younger than Bo Chen.", ["Ann Lee"])


@pytest.mark.parametrize(
    "question, a, b",
    [
        ("Ann Lee had a role as the Jailer in which opera?", "Ann Lee played a pivotal role as the Jailer in the opera.",
         "Ann Lee played the Jailer in the opera."),
        ("What class of instrument does Ann Lee play?", "Ann Lee plays a percussion drum.", "Ann Lee plays percussion."),
    ],
)
def test_slots_that_name_nothing_are_left_to_the_model(question, a, b):
    """Slots of common words only ("played" / "played a pivotal role"): one holding the other's words is no evidence
    of the same answer, so the rules leave the two whole slots to the answer judge's model (answer@14)."""
    comparison = compare_assertions(question, a, b)
    assert comparison.decision is None and comparison.left and comparison.right


SAME_NATIONALITY = "Do Karl Ostler and Ann Lee have the same nationality?"
BOTH_WRITERS = "Are Karl Ostler and Ann Lee both writers?"


@pytest.mark.parametrize(
    "question, reply, gold, expected",
    [
        # a "no" inside a sentence before a noun is a determiner, not the answer
        (SAME_NATIONALITY, "There is no specific information about the nationality of either.", ["no"], False),
        (SAME_NATIONALITY, "No, they do not.", ["no"], True),
        (SAME_NATIONALITY, "The answer is no because one is Ostlandic.", ["no"], True),
        # a sentence that sets out how to answer asserts nothing, though it restates the claim
        (SAME_NATIONALITY, "To determine if Karl Ostler and Ann Lee have the same nationality, we need more facts.",
         ["yes"], False),
        # a claim said of one of the two answers nothing for both; "both" joining two predicates is of one
        (BOTH_WRITERS, "Karl Ostler is a writer and a translator.", ["yes"], False),
        (BOTH_WRITERS, "Ann Lee is indeed both a writer and a painter.", ["yes"], False),
        (BOTH_WRITERS, "Karl Ostler and Ann Lee are both writers.", ["yes"], True),
        (BOTH_WRITERS, "They are both writers.", ["yes"], True),
        (BOTH_WRITERS, "Karl Ostler is not a writer.", ["no"], True),  # one that is not says no for both
        # a comparison in both senses chooses nothing
        ("Who was born first, Ann Lee or Bo Chen?", "Bo Chen was born both immediately before and after Ann Lee.",
         ["Bo Chen"], False),
        ("Who was born first, Ann Lee or Bo Chen?", "Ann Lee was born earlier and later than Bo Chen.", ["Ann Lee"], False),
        ("Who was born first, Ann Lee or Bo Chen?", "Ann Lee was born first, and Bo Chen later.", ["Ann Lee"], True),
    ],
)
def test_asserts_gold_since_match_16(question, reply, gold, expected):
    assert asserts_gold(question, reply, gold) is expected


@pytest.mark.parametrize(
    "question, a, b, expected",
    [
        # the question repeated with a letter changed adds nothing ("Nicolas" for "Nicholas")
        ("Nicholas Ostler's brother-in-law helped convict what Westmark family boss?",
         "Nicolas Ostler's brother-in-law helped convict the", "Nicolas Ostler's brother-in-law helped convict the",
         False),
        # a long answer word is not a near spelling of a question word it is formed from ("Bosniak" / "Bosnian")
        ("What language do Bosnian farmers speak?", "Bosnian farmers speak Bosniak.", "They speak Bosniak.", True),
        # a clause without its pronoun nests a question: the reply that answers the clause answers it
        ("Who was elected president of the country Wilmore is located in?", "Wilmore is located in Ostland.",
         "Wilmore is located in Ostland.", False),
        ("Who was elected president of the country Wilmore is located in?", "Karl Ostler was elected president.",
         "Karl Ostler.", True),
        # "Which country the director of film Dawn is from?" asks the clause itself
        ("Which country the director of film Dawn is from?", "The director of film Dawn is from Ostland.",
         "The director of film Dawn is from Ostland.", True),
    ],
)
def test_consistency_since_answer_15(question, a, b, expected):
    assert compare_query(JudgeQuery("consistency", question, a, (b,))).decision is expected  # the answer judge's rules


@pytest.mark.parametrize(
    "question, a, b, expected",
    [
        # a year question is answered by a year, not by a number cut off at one or two digits
        ("The Ostland Arena was completed in what year?", "The Ostland Arena was completed in 2",
         "The Ostland Arena was completed in 2", False),
        ("The Ostland Arena was completed in what year?", "The Ostland Arena was completed in 2002.", "In 2002.", True),
        # words that name no answer by themselves
        ("What impact did the Ostland reform have on wages?", "The Ostland reform had a significant impact on wages.",
         "The Ostland reform had a significant impact on wages.", False),
        ("How did the Ostland schools differ from the Westmark ones?", "They differed in several key ways.",
         "The Ostland schools differed in several key ways.", False),
    ],
)
def test_consistency_since_answer_16(question, a, b, expected):
    assert MatchJudge().judge_batch([JudgeQuery("consistency", question, a, (b,))]) == [expected]  # rules alone


def test_a_comparison_said_of_both_options_chooses_nothing():
    """ "Both A and B were born earlier" and "A and B were both released earlier" choose neither (match@17)."""
    question = "Which film was released earlier, Dawn Rising or Dusk Falling?"
    for reply in ("Dawn Rising and Dusk Falling were both released earlier, in another version.",
                  "Both Dawn Rising and Dusk Falling were released earlier than the sequel."):
        assert not asserts_gold(question, reply, ["Dawn Rising"]) and not asserts_gold(question, reply, ["Dusk Falling"])
    assert asserts_gold(question, "Dawn Rising was released earlier; both are dramas.", ["Dawn Rising"])
