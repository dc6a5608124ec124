"""Does a reply *assert* a gold answer, or only mention it? The rules of the match judge (match@17; match@4
was the first to judge assertions).

Finding a gold alias in a reply (alias containment, :mod:`elical.annotate.text`) is evidence only where
the alias fills the answer's slot of the question. The rules, each general:

1. **Choice questions.** Where a gold alias is one of the alternatives the question offers ("Who was
   born later, A or B?", "... out of A and B?"), or one of the question's two "A or B" alternatives
   lies inside a gold alias, the reply answers with the option it *chooses*: the first option it
   names (whole, in any case where it has several words, or by a word only that option has, unless that
   word is part of another name: match@7), leaving out mentions that restate the
   alternatives ("A or B"), negated ones ("not A"), the other side of a comparison ("than A",
   "compared to A") and the question repeated up to an option and cut off, where the sentence also
   states the question's comparison or only announces the option ("The answer is A"); naming one
   option without choosing it ("A is a 1999 film") or both without a comparison chooses nothing.
   "A is older than B" and "A was born first, and B second" choose A for "who is older" / "born
   first", and B for the opposite comparative; so does a sentence naming A alone in the opposite sense
   ("A is the younger of the two" chooses B: match@8, answer@7). The comparison must be the question's: a
   degree word grades the question's word ("more members", not "more famous"; "farther east", not "farther
   west": match@10); a word of the same sense ("first" for "earlier") counts beside a word of the
   question's, a superlative for its comparative ("oldest" for "older"), "after" and "before" for "later"
   and "earlier". A ranking on a claim of its own is not
   the question's comparison ("A is the first film to feature a Welsh cast"), nor is a "than" that
   compares in another sense ("A is more resilient than B") or an option with itself. An option denied
   ("A is not the one") or described as a third name ("The film with the older director, A, is C", "A is
   actually a film called C": match@9) is not chosen; an option named without the comparison is chosen
   only where the rest of the sentence announces it ("The film is A.", "A is the answer"), in a sentence finished before the token limit
   ("A was born" chooses nothing for "who was born first"). A later sentence, or a clause after "while" or
   "whereas" (match@10), that chooses the other option contradicts the first. A negated comparison chooses the
   other option ("A was not born earlier than B" chooses B: match@11). Since match@12, a short lead-in
   comparison is said of the option after it ("Born later, A is ..."), a sentence that only denies one of
   two options chooses the other ("The answer is not A."), a near spelling of an option's words is theirs
   ("Loukas Panet." announces Louis Panet), and an option of two words or more is the gold one where a gold
   alias has more words between them ("Philip Labonte" for "Philip Steven Labonte"). A sentence that sets out
   how to answer ("To determine who was born later, A, let's compare ...") chooses nothing yet (match@13); a
   pick the reply calls another option "actually" ("A was released earlier, but it's actually B") is taken
   back (match@14). The reply is right only if it chooses the gold option.
2. **Restated, not answered.** An alias that the question itself names is found in any reply that
   restates the question. Such an occurrence counts only where the reply does not merely repeat it:
   not next to the same content word as in the question ("science historian James Burke"), not as
   part of a longer name, and in the subject of its sentence (before the sentence's first verb) only
   where the predicate repeats the question's own mention ("IBM developed the IBM Network Control
   Program") and the subject does not itself repeat the question's phrase, the same word beside it on
   the same side ("A rechargeable battery is a subclass of a rechargeable battery": match@9).
3. **Context, not answer.** An alias in the subject of a sentence counts only where what the sentence
   says of it restates the question ("Paris is the capital of France" answers "What is the capital of
   France?"; "The United States is the largest economy" does not answer "What is X's nationality?").
   Since match@11, nor does an alias in a clause about a life event the question does not ask about ("born
   in 1822 in Vienna" for "Where did X die?"), nor a sentence that says the question's frame of another
   name ("The capital of Canada is Toronto." for "What is the capital of Ontario?": it answers another
   question; the answer judge reads it as no answer since answer@10).
4. **Negated, or part of another name.** "not X", "no X", "never X" do not assert X; nor does an
   alias the question names inside a longer name ("the Blackburn Shipbuilding Company").
5. **Lists.** An alias that is one member of a list of names with a conjunction ("China, Vietnam, and
   the Philippines", "Ghana or Togo") counts only if every member is a gold alias; so does one half of a
   hyphenated pair of names ("a Canadian-American actor", "Pakistani-Indian": match@10). Since match@11 a
   list is read in the case the reply writes it, whatever the gold's ("great apes, such as chimpanzees,
   bonobos, and gorillas" for "Chimpanzees"), its lower-case members of up to three words ("banks, credit
   card companies, and online payment systems").

A yes/no gold is asserted by the reply's first "yes" or "no" (unless its sentence takes it back: "No, it is
not possible to answer", and since match@13 "No, I'm not able to answer", "No, I'm afraid ...", or, since
match@14, the rest of its sentence says the opposite of it with "both": "No, A and B are both in the family
Apiaceae"), else by a sentence that restates the question's claim (negated: "no"), or (match@9) answers "Do A
and B share the same X?" by naming the one X both have ("A and B are both from Spain.", and since match@12
"Both A and B are located in Australia."), or (match@12) says they are from the same X (yes) or from different
Xs (no), the question's own noun after "same"; a "No" that begins one of the question's names ("No Doubt") is
that name (match@11). An alias of little words in lower case ("in" among India's aliases) names nothing
(match@11). A company's alias counts without its legal form ("Apple Inc.": "Apple"), a noun in "-a" in its
Latin plural too ("algae"; both match@12); "no." ends a sentence unless a number follows ("No. 5"). An option
that is a name and a title set off by commas ("Who lived longer, A, 1st Earl of B or C?") is one option
(match@9). A decade is asserted by its years, a common noun by its plural. The rules read the reply's
sentences up to the first that says something beyond the question (an announcement such as "The answer to this
question is:" is read past). Consistency (:func:`same_assertion`, the answer judge since answer@3):
two replies are the same answer only where both assert one and it is the same one; a yes/no question is
answered by a yes or a no alone (answer@5), a reply cut off by the token limit right before the
answer it introduces ("The seminar was held at the") asserts none. The answer judge (since answer@6)
also reads a reply that answers the inner question of a nested one as asserting none
(:func:`answers_inner_question`: "The state where Shringarpur is located is India." for "Who was in
charge of the state where Shringarpur is located?"; since answer@8 also "The director of film X was Y." for
"Where was the director of film X born?"). Since answer@8, a reply cut off by the token limit in
the first letters of a word of the question ("... the western term" for "terminus") says nothing with that
fragment, and a name that one answer gives first and the other only as the qualifier of another name
("Germany" / "Berlin, Germany") is a coarser answer, not the same one ("Paris" / "Paris, France" keeps it
first). Since answer@9 (and match@10's consistency), an answer ends where a description of it begins (a
relative clause after a name or a comma: "Mumbai, which was ..."; a piece that begins with a participle or
"with": "musicians, known for ..."), unless the clause restates the question; a clause that restricts a
common noun stays part of the statement ("a Swiss mathematician who made ..."); "in the state of North
Carolina" locates something in North Carolina; an abbreviation ("the US") is compared as one; and a
multiple-choice reply that offers a second letter as the answer is the same as nothing, even where its
first line matches the other's word for word. Since answer@10, two answer slots that hold nothing are no
answer, not the same one; since answer@11 a description set off by a comma and "a" or "an" ("the United Arab
Emirates, a major airport ...") ends the answer as a relative clause does; since answer@13 a year is not the name
a slot gives where the question asks for no number ("born in 1980 in Wilmore" names Wilmore). Since answer@14 a
question that names a quantity ("What is the population of ...", "What percent ...", "... has how many ...?") is
answered by a number only, and two slots that name nothing (common words, no name or number) are compared whole by the
answer judge's model, as one holding the other's words ("played" / "played a pivotal role") is no evidence; since
match@15 "A vs. B" restates the alternatives as "A or B" does. Since match@16 / answer@15: a "no" inside a sentence
right before a word is a determiner ("There is no specific information ..."), not the answer; a sentence that sets out
how to answer ("To determine if A and B ..., we need ...") asserts no yes or no; a restated claim answers "Are A and B
both X?" only where the sentence speaks of both ("A is a writer" does not, nor does "A is both a writer and a painter");
a comparison stated in both senses ("both younger and older", "before and after") chooses nothing; a near spelling of
a long question word is the question's word ("Nicolas" for "Nicholas": a reply that repeats the question with a letter
changed adds nothing); a clause without its pronoun nests a question ("Who was elected president of | the country X is
located in?"), unless it follows the question's own "Which country"; and (elical.annotate.judges) a multiple-choice pick
whose own line calls it wrong ("C. ... is not the answer") is no pick. Since match@17 / answer@16: a comparison said of
both options ("Both A and B were born earlier", "A and B were both released earlier") chooses neither; a year question
("... in what year?", anywhere in it) is answered by a number of three digits or more ("completed in 2" is a year cut
off); and a slot of vague words only ("several key ways", "significant") names no answer.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cached_property, lru_cache
from itertools import pairwise

from elical.annotate.consistency import (
    _NUMBER_WORDS,
    FUNCTION_WORDS,
    Comparison,
    _forms,
    compare_answers,
    first_sentence,
    same_word,
)
from elical.annotate.text import ARTICLES, Token, alias_tokens, contains, starts, token_matches, tokenize

# verbs that end a sentence's subject: copulas, auxiliaries, and words that read as past participles
_VERBS = frozenset([
    "is", "are", "was", "were", "be", "been", "has", "have", "had", "does", "did", "do", "can", "could",
    "will", "would", "may", "might", "must", "shall", "should", "became", "becomes", "become", "remains",
    "remained"
])
_NEGATIONS = frozenset([
    "not", "no", "never", "neither", "nor", "without"
])
_CONNECTORS = frozenset([
    "of", "the", "de", "da", "di", "del", "der", "von", "van", "la", "le", "du", "des", "y", "and"
])  # inside names
# comparatives whose opposite hands a "than" comparison to its other side
_OPPOSITES = (
    ("older", "younger"), ("elder", "younger"), ("oldest", "youngest"), ("older", "newer"), ("earlier", "later"),
    ("first", "later"), ("before", "after"), ("earlier", "after"), ("before", "later"), ("sooner", "later"),
    ("recently", "earlier"), ("recent", "older"),
    ("longer", "shorter"), ("taller", "shorter"), ("more", "less"), ("larger", "smaller"), ("bigger", "smaller"),
    ("higher", "lower"), ("faster", "slower"), ("closer", "farther"), ("further", "closer"),
)
_ANTONYM: dict[str, set[str]] = {}
for _a, _b in _OPPOSITES:
    _ANTONYM.setdefault(_a, set()).add(_b)
    _ANTONYM.setdefault(_b, set()).add(_a)
# words that announce an answer without saying anything of it ("The answer I'm referring to is X")
_ANNOUNCING = frozenset([
    "answer", "question", "correct", "referring", "mentioned", "talking", "one", "option", "choice", "called",
    "named", "mean", "title", "i", "m"
])
# capitalized only because they start a sentence: never a name
_STARTERS = FUNCTION_WORDS | frozenset([
    "about", "approximately", "around", "over", "nearly", "almost", "roughly", "according", "based", "here",
    "yes", "no", "sure", "well", "however", "also", "in", "on"
])
_SEPARATOR = re.compile(r"^\s*(?:,\s*(?:and|or)?|and|or|&)\s+", re.IGNORECASE)
_LIST_JOIN = re.compile(r"\b(?:and|or)\b|&", re.IGNORECASE)
_NAME = re.compile(r"^(?:the\s+)?(?:[A-Z0-9][\w'’.\-]*)(?:\s+(?:(?:of|the|de|da|di|del|der|von|van|la|le|du|y|and)\s+)*[A-Z0-9][\w'’.\-]*)*")
_LOWER_WORD = r"(?!(?:and|or|but)\b)[a-z][\w'’\-]*"
_WORD = re.compile(rf"^{_LOWER_WORD}(?:\s+{_LOWER_WORD}){{0,2}}")  # up to three: "credit card companies"
_WORD_END = re.compile(rf"(?:{_LOWER_WORD}\s+){{0,2}}{_LOWER_WORD}\s*$")
_NAME_WORDS = r"(?:[A-Z0-9][\w'’.\-]*)(?:\s+(?:(?:of|the|de|da|di|del|der|von|van|la|le|du|y)\s+)*[A-Z0-9][\w'’.\-]*)*"
_NAME_END = re.compile(_NAME_WORDS + r"\s*$")
# the first of a question's options: a name that may end in "?" or "!" ("Which came first, The Love God? or ...")
_OPTION_END = re.compile(_NAME_WORDS + r"[?!]?\s*$")
_JOINED_AFTER = re.compile(r"\s*,?\s+(?:or|and)\s+")  # "A or B": what joins B to A
_JOINED_BEFORE = re.compile(r"\s*,?\s+(?:or|and)\s+$")  # ... and A to B
_OR = re.compile(r"\s*,?\s+or\s+")


def sentences(reply: str) -> list[str]:
    """The reply's sentences and lines, cut as :func:`~elical.annotate.consistency.first_sentence`
    cuts the first (never after an initial or a common abbreviation)."""
    return list(_sentences(reply))


@lru_cache(maxsize=1 << 16)
def _sentences(reply: str) -> tuple[str, ...]:
    """:func:`sentences`, cached: the rules cut each reply several times (and the reference answer
    once for each of k samples)."""
    out: list[str] = []
    rest = reply.strip()
    while rest:
        head = first_sentence(rest)
        if not head or not rest.startswith(head):
            out.append(rest)
            break
        out.append(head)
        rest = rest[len(head) :].strip()
    return tuple(out)


def _find(hay: Sequence[Token], needle: Sequence[Token]) -> list[int]:
    """Start positions of the needle in the hay (the rules of :func:`~elical.annotate.text.contains`)."""
    n = len(needle)
    if not n or n > len(hay):
        return []
    if n == len(hay):
        return [0] if all(a.text == b.text for a, b in zip(needle, hay)) else []
    return [i for i in starts(hay, needle) if all(token_matches(a, b) for a, b in zip(needle, hay[i : i + n]))]


def _content(tokens: Sequence[Token]) -> list[Token]:
    return [t for t in tokens if t.text not in FUNCTION_WORDS]


def _in(token: Token, others: Sequence[Token]) -> bool:
    return any(same_word(token.text, o.text) for o in others)


# ---------------------------------------------------------------------------- choice questions


@dataclass(frozen=True)
class Choice:
    """The alternatives a question offers (token sequences) and its comparison: the comparative word
    and, for a degree word ("more", "less"), the words it grades ("more members", "more band members")."""

    options: tuple[tuple[Token, ...], ...]
    comparative: str | None
    graded: tuple[str, ...] = ()

    @cached_property
    def short_names(self) -> tuple[frozenset[str], ...]:
        """Per option, the words that name it alone: capitalized words of at least four letters the
        other options lack ("Feraoun" for "Mouloud Feraoun"; never the "Gould" two options share);
        computed once per choice (a question's choice is cached, see :func:`question_options`)."""
        def own(index: int) -> frozenset[str]:
            others = {t.text for j, opt in enumerate(self.options) if j != index for t in opt}
            return frozenset(t.text for t in self.options[index] if t.case != "lower" and len(t.text) >= 4
                             and t.text.isalpha() and t.text not in others and t.text not in _STARTERS)
        return tuple(own(i) for i in range(len(self.options)))


_DEGREE = frozenset(["more", "less", "fewer", "most", "least", "farther", "further"])  # comparatives that grade the next word


def _option_beside(question: str, start: int, end: int) -> str | None:
    """The other alternative next to the span [start, end) of the question, joined to it by "or"/"and"."""
    after = question[end:]
    joined = _JOINED_AFTER.match(after)
    if joined:
        rest = after[joined.end() :]
        name = _NAME.match(rest)
        return name.group().strip() if name else None
    before = question[:start]
    joined = _JOINED_BEFORE.search(before)
    if joined:
        name = _NAME_END.search(before[: joined.start()])
        return name.group().strip() if name else None
    return None


def _comparison(question: str) -> tuple[str | None, tuple[str, ...]]:
    """The question's first comparative word with an opposite ("later", "older"), if any, and for a
    degree word the (up to two) content words after it, one of which it grades ("more band members")."""
    tokens = tokenize(question)
    for i, token in enumerate(tokens):
        if token.text in _ANTONYM:
            graded = tuple(t.text for t in tokens[i + 1 :] if t.text not in FUNCTION_WORDS)[:2]
            return token.text, graded if token.text in _DEGREE else ()
    return None, ()


def _make_choice(options: tuple[tuple[Token, ...], ...], question: str) -> Choice:
    return Choice(options, *_comparison(question))


def choice_of(question: str, aliases: Sequence[str]) -> tuple[Choice, int] | None:
    """(the choice the question offers, the index of the gold option) where a gold alias is one of two
    alternatives joined by "or"/"and" in the question, or where exactly one of the question's two
    "A or B" alternatives is (inside) a gold alias ("Mr Mackenzie" for "Mr. Mackenzie"); None for other
    questions. Cached per question and aliases (the k + 1 answers of a question share them)."""
    return _choice_of(question, tuple(aliases))


@lru_cache(maxsize=1 << 12)
def _choice_of(question: str, aliases: tuple[str, ...]) -> tuple[Choice, int] | None:
    for alias in aliases:
        if not alias.strip():
            continue
        for found in re.finditer(re.escape(alias.strip()), question, re.IGNORECASE):
            other = _option_beside(question, found.start(), found.end())
            if other and tokenize(other) and tokenize(other) != tokenize(alias):
                gold, rival = alias_tokens(alias), alias_tokens(other)
                if not gold or not rival or contains(gold, rival) or contains(rival, gold):
                    continue
                return _make_choice((gold, rival), question), 0
    offered = question_options(question)
    if offered is None:
        return None
    golden = [i for i, option in enumerate(offered.options) if _is_gold_text(option, aliases)]
    return (offered, golden[0]) if len(golden) == 1 else None


def _is_gold_text(option: Sequence[Token], aliases: Sequence[str]) -> bool:
    """Whether an option's words are a gold alias's, or lie inside one, case aside; a name of two words or more
    also where the alias has more words between them ("Philip Labonte" for "Philip Steven Labonte": match@12)."""
    words = [t.text for t in option]
    for alias in aliases:
        gold = [t.text for t in alias_tokens(alias)]
        if gold and any(gold[i : i + len(words)] == words for i in range(len(gold) - len(words) + 1)):
            return True
        rest = iter(gold)
        if len(words) > 1 and words[0] == gold[0] and words[-1] == gold[-1] and all(w in rest for w in words):
            return True
    return False


_CONTRAST = re.compile(r",\s*(?=(?:while|whereas)\s)", re.IGNORECASE)  # "A is further east, while B is further east"


def chosen_option(question: str, reply: str, choice: Choice) -> int | None:
    """The index of the option the reply chooses (rule 1 of the module docstring), None if none."""
    asked = tokenize(question)
    said = [clause for sentence in sentences(reply) for clause in _CONTRAST.split(sentence)]
    for i, sentence in enumerate(said):
        picked = _sentence_choice(sentence, choice, asked)
        if picked is not None:
            if picked < 0:
                return None
            later = (_sentence_choice(s, choice, asked) for s in said[i + 1 :])
            if any(p is not None and p >= 0 and p != picked for p in later):
                return None  # contradicted
            return None if _actually_other(" ".join(said[i:]), choice, picked) else picked
    return None


def _actually_other(text: str, choice: Choice, picked: int) -> bool:
    """Whether the text calls the picked option "actually" another one ("A was released earlier, but it's actually
    B.": since match@14): a mention of another option within three words after "actually" takes the pick back."""
    tokens = tokenize(text)
    actually = [i for i, t in enumerate(tokens) if t.text == "actually"]
    return any(o != picked and 0 < p - i <= 3 for i in actually for p, _, o in _mentions(tokens, choice))


def _mentions(tokens: Sequence[Token], choice: Choice) -> list[tuple[int, int, int]]:
    """(position, end, option) of each option the tokens name: by its whole name, in any case where it has
    several words ("making a man" for "Making A Man": only a lone abbreviation needs its capitals), else
    (where the sentence never names it whole) by a word that names it alone, unless that word is part of
    another name ("Buffet Fagarstache" names no "Buffet Froid")."""
    mentions: list[tuple[int, int, int]] = []
    for index, (words_of_option, short) in enumerate(zip(choice.options, choice.short_names)):
        needle = words_of_option if len(words_of_option) < 2 else tuple(Token(t.text) for t in words_of_option)
        whole = [(p, p + len(needle), index) for p in _find(tokens, needle)]
        own = {t.text for t in words_of_option}
        mentions += whole or [(p, p + 1, index) for p, t in enumerate(tokens)
                              if t.text in short and t.case != "lower" and _alone(tokens, p, own)]
    return sorted(mentions)


def _alone(tokens: Sequence[Token], p: int, own: set[str]) -> bool:
    """Whether no capitalized word beside position ``p`` is one the option (its words ``own``) lacks; a near
    spelling of one of them is the option misspelt ("Olga Feder" for "Olga Fedori")."""
    return not any(0 <= i < len(tokens) and tokens[i].case != "lower" and tokens[i].text not in _STARTERS
                   and not _spells_one_of(tokens[i].text, own) for i in (p - 1, p + 1))


def _spells_one_of(word: str, words: set[str]) -> bool:
    """Whether the word is one of ``words`` or a near spelling of one ("feder" / "fedori", "harad" /
    "harrad": a similarity ratio of at least 0.7)."""
    return word in words or any(SequenceMatcher(None, word, w).ratio() >= 0.7 for w in words)


def _compares(words: Sequence[str], choice: Choice, asked: Sequence[Token]) -> bool | None:
    """Whether the words state the question's comparison (None: they do not), and if so, whether in
    its opposite sense (True: "younger" for "who is older"). The question's comparative or an opposite
    states it; a word of the same sense ("first" for "earlier") only beside a word of the question's
    own ("died first"); a degree word only grading the question's word ("more members")."""
    question = choice.comparative
    if not question:
        return None
    opposites = _ANTONYM.get(question, set())
    shares_predicate = any(w not in FUNCTION_WORDS and any(same_word(w, a.text) for a in asked) for w in words)
    for i, word in enumerate(words):
        same_sense = word == question or _superlative(question) == word or (
            shares_predicate and bool(_ANTONYM.get(word, set()) & opposites))
        if not same_sense and word not in opposites and _superlative_of(word) not in opposites:
            continue
        if _ranks_another_claim(words, i, asked):
            continue
        if word in _DEGREE and choice.graded:
            graded = next((w for w in words[i + 1 :] if w not in FUNCTION_WORDS), None)
            if graded is None or not any(same_word(graded, word) for word in choice.graded):
                continue
        return same_sense if _negates(words[max(0, i - 3) : i]) else not same_sense  # "was not born earlier"
    return None


def _negates(words: Sequence[str]) -> bool:
    """Whether the words hold a negation ("not", "never", the "t" of "wasn't")."""
    return any(w in _NEGATIONS or (w == "t" and i and words[i - 1].endswith("n")) for i, w in enumerate(words))


def _superlative(comparative: str) -> str | None:
    """The superlative of an "-er" comparative ("older": "oldest"); None for other words."""
    return comparative[:-2] + "est" if comparative.endswith("er") and len(comparative) > 4 else None


def _superlative_of(word: str) -> str | None:
    """The comparative whose superlative the word is ("youngest": "younger"); None for other words."""
    return word[:-3] + "er" if word.endswith("est") and len(word) > 5 else None


_RANKED_AMONG = frozenset(["two", "both", "pair", "one", "ones", "other", "others", "film", "films", "person", "people"])


def _ranks_another_claim(words: Sequence[str], i: int, asked: Sequence[Token]) -> bool:
    """Whether the ranking word at ``i`` is an adjective ranking something on a claim of its own: "the
    first film to feature a Welsh cast", "the first film released in 1950": two words or more follow
    that the question lacks ("the first to be released" ranks on the question's own claim)."""
    if i == 0 or words[i - 1] not in ("the", "its", "his", "her", "their"):
        return False
    after = [w for w in words[i + 1 :] if w not in FUNCTION_WORDS and w not in _RANKED_AMONG]
    return sum(not any(same_word(w, a.text) for a in asked) for w in after) >= 2


def _under(option: int, opposite: bool | None, choice: Choice) -> int:
    """The option chosen where the comparison (``opposite``: in the opposite sense) is said of ``option``;
    -1 where no comparison is said."""
    if opposite is None:
        return -1
    if opposite:
        return 1 - option if len(choice.options) == 2 else -1
    return option


_CLAUSE_JOIN = frozenset(["and", "but", "while", "whereas"])
_RESTATING_JOINS = frozenset(["or", "and", "vs", "versus"])  # "A or B", "A vs. B": the alternatives restated
# a sentence that sets out how to answer: "To determine which film came first, let's compare ..."
_METHOD = re.compile(
    r"\s*(?:(?:to|in order to) (?:determine|answer|find out|find|figure out|decide)\b"  # "To determine ...,"
    r".*?\b(?:let'?s|let us|we (?:need|must|have|will|can|should)|i (?:need|will|must)|compare|consider|analy[sz]e)"
    r"|let'?s)\b",
    re.IGNORECASE)
_COMPARED_TO = re.compile(r"^(?:than|compared (?:to|with)|in comparison (?:to|with)|unlike)$")


def _lead_in(asked: Sequence[Token], choice: Choice) -> tuple[str, ...]:
    """The three words before the question's first option: a reply that has them before an option,
    and nothing of its own after it, repeats the question ("The film that has the director born
    later, A" cut off there)."""
    starts = [p for option in choice.options for p in _find(asked, option)]
    if not starts or min(starts) < 3:
        return ()
    return tuple(t.text for t in asked[min(starts) - 3 : min(starts)])


def _sentence_choice(sentence: str, choice: Choice, asked: Sequence[Token]) -> int | None:
    """The option one sentence chooses; -1 where it names options without choosing one (it decides:
    the reply chose nothing), None where it names none (the next sentence may)."""
    tokens = tokenize(sentence)
    words = [t.text for t in tokens]
    mentions = _mentions(tokens, choice)
    if not mentions or _METHOD.match(sentence):
        return None  # "To determine who was born later, A, let's compare ..." sets out a method (since match@13)
    if any(b in _ANTONYM.get(a, ()) and joined in ("and", "or") for a, joined, b in zip(words, words[1:], words[2:])):
        return -1  # "A is both younger and older than B", "born before and after B": both senses (match@16)
    compared = next((i for i, w in enumerate(words) if w == choice.comparative), None)
    if compared is not None and "both" in words[:compared] and choice.comparative not in ("more", "less"):
        return -1  # "Both A and B were born earlier", "A and B were both released earlier": said of both (match@17)
    restated = set()
    for (p1, e1, o1), (p2, _, o2) in pairwise(mentions):
        between = words[e1:p2]
        if o1 != o2 and len(between) <= 1 and all(w in _RESTATING_JOINS for w in between):
            restated |= {p1, p2}

    def compared_side(p: int) -> bool:  # "... than A", "compared to A": the other side of a comparison
        return any(_COMPARED_TO.match(" ".join(words[max(0, p - n) : p])) for n in (1, 2, 3))

    lead = _lead_in(asked, choice)  # "The film that has the director born later, A" and no more: an echo
    option_words = {t.text for option in choice.options for t in option}
    echo = next((p for p, _, _ in mentions if lead and tuple(words[max(0, p - len(lead)) : p]) == lead
                 and all(w in option_words | {"or", "and"} for w in words[p:-1])), None)  # the last word may be cut off
    echoed = {p for p, _, _ in mentions if echo is not None and p >= echo}
    named = [(p, e, o) for p, e, o in mentions if p not in restated | echoed
             and not (p > 0 and words[p - 1] in _NEGATIONS) and not compared_side(p)]
    if not named:
        denied = {o for p, _, o in mentions if p > 0 and words[p - 1] in _NEGATIONS and p not in restated | echoed}
        if len(choice.options) == 2 and len(denied) == 1 and len(mentions) == 1:
            return 1 - denied.pop()  # "The answer is not A." chooses B (since match@12)
        return -1
    position, end, option = named[0]
    asked_rest = [t for t in asked if t.text not in option_words]  # the question's words beside its options
    if _denied_or_renamed(tokens, end, option_words, lambda: _compares(words[end:], choice, asked_rest) is not None):
        return -1
    if "than" in words[end:]:  # "A is older than B", "won more races in A than B": A under the comparative
        than = end + words[end:].index("than")
        if any(o == option and p > than for p, _, o in mentions):
            return -1  # "A is older than A"
        said = _compares(words[end:than], choice, asked_rest)
        if said is None:
            said = _compares(words[:position], choice, asked_rest)
        return -1 if said is None else _under(option, said, choice)
    later = [p for p, _, o in named if o != option]
    if later:  # "A was born first, and B second", "A was born later, B": said of A in a clause of its own
        between = words[end : later[0]]
        ends_clause = any(re.search(rf"\b{re.escape(w)}\s*[,;]", sentence, re.IGNORECASE) for w in between if w in _ANTONYM)
        own_clause = bool(between) and (between[-1] in _ANTONYM or ends_clause or bool(_CLAUSE_JOIN & set(between)))
        said = _compares(between, choice, asked_rest) if own_clause else None
        if said is None and position <= 3:  # "Born later, A is ... B": a short lead-in said of A (since match@12)
            said = _compares(words[:position], choice, asked_rest)
        return _under(option, said, choice)
    said = _compares(words[:position] + words[end:], choice, asked_rest)
    if said is not None:  # "A is the older", and "A is the younger" (the opposite sense) chooses the other option
        return _under(option, said, choice)
    # "The film is A", "A is the answer", "A is the film." (the question's words): announced; but "A was
    # born" for "who was born first", cut off before its comparison, is unfinished
    before, after = _content(tokens[:position]), _content(tokens[end:])
    finished = bool(re.search(r"[.!?]\W*$", sentence)) or not choice.comparative
    own = asked_rest + list(choice.options[option])  # the question's words, less the other options'
    spelt = {t.text for t in choice.options[option]}  # a near spelling of the option's words is theirs ("Loukas Panet")

    def owned(t: Token) -> bool:
        return t.text in _ANNOUNCING or _in(t, own) or (t.case != "lower" and _spells_one_of(t.text, spelt))

    announces = all(map(owned, before)) and all(owned(t) and (finished or t.text in _ANNOUNCING) for t in after)
    return option if announces and not _cut_before_answer(sentence) else -1  # "A," cut off


_COPULAS = frozenset(["is", "was", "are", "were"])


_ENDS_SENTENCE = re.compile(r"[.!?]$")
_ENDS_OPEN = re.compile(r"[,;:(\[–—-]$")  # a comma, colon, dash or bracket: more must follow


def _cut_before_answer(sentence: str) -> bool:
    """Whether a sentence stops where more must follow: at a comma, colon, dash or bracket, or at a
    little word ("was held at the"), past a cut-off word of one or two letters ("of G", "(2")."""
    text = sentence.rstrip()
    words = text.split()
    if len(words) > 2 and len(words[-1].strip("(\"'“")) <= 2 and not _ENDS_SENTENCE.search(words[-1]):
        text = text[: text.rfind(" ")].rstrip()  # a word cut off at the token limit
    if _ENDS_OPEN.search(text):
        return True
    last = text.split()[-1].lower() if text.split() else ""
    return last in FUNCTION_WORDS and last not in ("it", "them", "him", "her", "this", "that")  # pronouns end


_CALLED = frozenset(["called", "named", "titled", "entitled"])


def _past_the(tokens: Sequence[Token], i: int) -> int:
    """The position after a "the" at ``i``, else ``i``."""
    return i + 1 if i < len(tokens) and tokens[i].text == "the" else i


def _denied_or_renamed(tokens: Sequence[Token], end: int, option_words: set[str], compared: Callable[[], bool]) -> bool:
    """Whether the sentence denies the option it names ("A is not the one"; ``compared()``: the sentence goes on
    to state the question's comparison, so "A is not older than B" is a comparison, not a denial: match@11) or
    names a third thing as what the option's description is ("The film with the older director, A, is The
    Shawshank Redemption"): a copula right after the option, then a negation, or a name that is no option's
    (after "the", or of two words or more: "is American" describes, "is Black Feathers" names; or
    after "called" a few words on: "is actually a film called The Lion King")."""
    if end + 1 >= len(tokens) or tokens[end].text not in _COPULAS:
        return False
    if tokens[end + 1].text in _NEGATIONS:
        return not compared()
    called = [i for i in range(end + 1, min(end + 7, len(tokens))) if tokens[i].text in _CALLED]
    if called:  # "A is actually a film called C" (since match@9)
        start = _past_the(tokens, called[0] + 1)
        called_name = list(itertools.takewhile(lambda t: t.case != "lower", tokens[start:]))
        whole = len(called_name) > 1 or (len(called_name) == 1 and len(called_name[0].text) > 1)  # not a cut "A"
        return whole and any(t.text not in option_words for t in called_name)
    start = _past_the(tokens, end + 1)
    name: list[Token] = []
    for token in tokens[start:]:
        if token.case == "lower" or (token.text in _STARTERS and not name):
            break
        name.append(token)
    return any(t.text not in option_words for t in name) and (start > end + 1 or len(name) >= 2)


# ---------------------------------------------------------------------------- other questions


def _subject_end(tokens: Sequence[Token]) -> int:
    """The index of a sentence's first verb (the subject is what comes before it); 0 where it has none."""
    for i, token in enumerate(tokens):
        if i > 0 and (token.text in _VERBS or (token.case == "lower" and token.text.endswith("ed") and len(token.text) > 4)):
            return i
    return 0


def _list_members(sentence: str, start: int, end: int, lower: bool = False) -> list[str] | None:
    """The names listed with the span [start, end) of the sentence, where it is one member of a list
    with a conjunction ("A, B and C", "A or B"); None where it is not in such a list. ``lower``: the
    members are lower-case words of up to three, as the occurrence is ("actor and comedian", "credit card
    companies")."""
    member, member_end = (_WORD, _WORD_END) if lower else (_NAME, _NAME_END)
    members, joins = [sentence[start:end]], []
    rest = sentence[end:]
    while True:
        sep = _SEPARATOR.match(rest)
        name = member.match(rest[sep.end() :]) if sep else None
        if not sep or not name or not name.group().strip():
            break
        joins.append(sep.group())
        members.append(name.group().strip())
        rest = rest[sep.end() + name.end() :]
    head = sentence[:start]
    while True:
        sep = re.search(r"(?:,\s*(?:and|or)?|\s(?:and|or)|&)\s*$", head, re.IGNORECASE)
        name = member_end.search(head[: sep.start()]) if sep else None
        if not sep or not name or not name.group().strip():
            break
        joins.append(sep.group())
        members.insert(0, name.group().strip())
        head = head[: name.start()]
    if len(members) < 2 or not any(_LIST_JOIN.search(j) for j in joins):
        return None
    return members


def _char_span(sentence: str, alias: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(re.escape(alias.strip()), sentence, re.IGNORECASE)]


def _is_gold(name: str, gold: Sequence[tuple[Token, ...]]) -> bool:
    words = alias_tokens(name)
    return any(g and (contains(words, g) or contains(g, words)) for g in gold if words)


def _sentence_asserts(question: str, sentence: str, aliases: Sequence[str]) -> bool:
    """Whether one sentence of the reply asserts a gold alias (rules 2 to 5)."""
    if about_another_name(question, sentence):
        return False
    tokens = tokenize(sentence)
    asked = tokenize(question)
    gold = [alias_tokens(a) for a in aliases]
    subject_end = _subject_end(tokens)
    predicate = _content(tokens[subject_end:]) if subject_end else []
    # "X did (it)": a pro-verb stands for the question's predicate
    proverb = bool(subject_end) and tokens[subject_end].text in ("did", "does", "do")
    restates = proverb or not predicate or sum(_in(t, asked) for t in predicate) * 2 >= len(predicate)
    for alias, needle in zip(aliases, gold):
        if not needle:
            continue
        in_question = bool(_find(asked, needle))
        spans = _char_span(sentence, alias)
        positions = _found(tokens, needle)
        # "IBM developed the IBM Network Control Program": the question's own mention, in the predicate
        echo_in_predicate = in_question and any(
            p >= subject_end and _echoes(tokens, p, len(needle), asked, needle) for p in positions)
        for k, position in enumerate(positions):
            if position > 0 and tokens[position - 1].text in _NEGATIONS:
                continue
            subject = position < subject_end
            if subject and (not restates or (in_question and (
                    not echo_in_predicate or _echoes(tokens, position, len(needle), asked, needle, same_side=True)))):
                continue  # since match@9, a subject that repeats the question's phrase is not answered by its predicate
            span = spans[k] if len(spans) > k else None
            echo = not subject and _echoes(tokens, position, len(needle), asked, needle)  # subject: see above
            if in_question and (echo or _inside_longer_name(tokens, position, len(needle), sentence, span)):
                continue
            if span and _of_other_event(question, sentence[: span[0]]):
                continue  # "X was born in Vienna" does not say where X died (since match@11)
            members = _list_members(sentence, *span, lower=sentence[slice(*span)].islower()) if span else None
            if members and not all(_is_gold(m, gold) for m in members):
                continue
            if any(not _is_gold(other, gold) for other in _compounded(sentence, tokens, position, len(needle))):
                continue  # "a Canadian-American actor" gives two nationalities, one of them not gold (since match@10)
            return True
    return False


def _placed_names(tokens: Sequence[Token]) -> list[tuple[str, list[Token]]]:
    """The runs of capitalized words (not a first word that is a little word or a question word; little words
    inside a name are skipped: "Cosimo I de Medici") with the word before each, articles aside ("of" in "the
    capital of the United States")."""
    runs: list[tuple[str, list[Token]]] = []
    before, inside = "", False
    for i, token in enumerate(tokens):
        named = token.case != "lower" and not (i == 0 and token.text in _STARTERS | _WH_WORDS)
        if named and not inside:
            runs.append((before, []))
        if named:
            runs[-1][1].append(token)
        next_named = i + 1 < len(tokens) and tokens[i + 1].case != "lower"
        inside = named or (inside and token.text in _CONNECTORS and next_named)
        if not inside and token.text not in ARTICLES:
            before = token.text
    return runs


_PLACING = frozenset(["of", "in", "for", "from", "at", "on"])  # what ties a name to the question's frame


@lru_cache(maxsize=1 << 12)
def _placed_in_question(question: str) -> dict[str, list[list[Token]]]:
    """The question's names tied to its frame by a preposition, by the preposition ("of": [Ontario]); cached, as
    every sentence of the k + 1 replies asks for them."""
    placed: dict[str, list[list[Token]]] = {}
    for before, run in _placed_names(tokenize(question)):
        if before in _PLACING:
            placed.setdefault(before, []).append(run)
    return placed


def about_another_name(question: str, sentence: str) -> bool:
    """Whether a sentence says the question's frame of another name: where the question ties a name to its frame
    by a preposition ("the capital of Ontario"), the sentence's subject ties a name the question lacks to it by
    the same preposition, beside a word of the question's own, and never names the question's ("The capital of
    Canada is Toronto." answers another question; since match@11 / answer@10). A near spelling of the question's
    name, or its initials ("the UK"), is that name."""
    placed = _placed_in_question(question)
    tokens = tokenize(sentence)
    subject = tokens[: _subject_end(tokens)]
    asked_words = _question_words(question)[0]
    frame = any(t.case == "lower" and t.text not in FUNCTION_WORDS and t.text in asked_words for t in subject)
    if not placed or not frame:
        return False
    said = {t.text for t in tokens}
    for before, run in _placed_names(subject):
        names = placed.get(before, [])
        known = {t.text for name in names for t in name}
        initials = {"".join(t.text[0] for t in name) for name in names}
        other = [t for t in run if t.text not in asked_words | initials | {"i"} and not _spells_one_of(t.text, known)]
        if other and any(not any(t.text in said for t in name) for name in names):
            return True
    return False


# life events a biography states one after another; an occurrence in a clause about one answers only a question about it
_EVENTS = {
    "birth": (frozenset(["born", "birth"]),
              frozenset(["born", "birth", "birthplace", "native", "hometown", "from", "origin", "bear"])),
    "death": (frozenset(["died", "death", "buried"]),
              frozenset(["die", "died", "dies", "death", "buried", "burial", "grave", "killed"])),
}
_CLAUSE_START = re.compile(r"[,;:()]|\b(?:and|but|while|whereas|who|which)\b", re.IGNORECASE)


def _of_other_event(question: str, before: str) -> bool:
    """Whether the clause an occurrence ends (``before``: the sentence up to it, from the last comma, colon or
    conjunction) is about a life event the question does not ask about: "born in 1822 in Vienna" for "Where did
    X die?" places the birth, not the death."""
    clause = tokenize(_CLAUSE_START.split(before)[-1])
    asked = _question_words(question)[0]
    return any(not asked & asking and any(t.text in said for t in clause) for said, asking in _EVENTS.values())


_COMPOUND = re.compile(r"\b([A-Z][\w'’]+)-([A-Z][\w'’]+)\b")


def _compounded(sentence: str, tokens: Sequence[Token], position: int, length: int) -> list[str]:
    """The other half of a hyphenated pair of names ("Canadian-American", "Pakistani-Indian") that the
    occurrence at ``position`` is one half of, unless the alias spans both: the pair names two things, as a
    list does."""
    others = []
    for pair in _COMPOUND.finditer(sentence):
        first = len(tokenize(sentence[: pair.start()]))  # the token index of the pair's first half
        if position not in (first, first + 1) or first + 1 >= len(tokens):
            continue
        other = first + 1 if position == first else first
        if not position <= other < position + length:
            others.append(pair.group(2) if position == first else pair.group(1))
    return others


def _found(tokens: Sequence[Token], needle: Sequence[Token]) -> list[int]:
    """Where the alias occurs; a one-word capitalized alias also in its other forms ("Japan" in
    "a Japanese actor")."""
    exact = _find(tokens, needle)
    if exact or len(needle) != 1 or needle[0].case == "lower" or len(needle[0].text) < 4:
        return exact
    return [i for i, t in enumerate(tokens) if t.case != "lower" and same_word(t.text, needle[0].text)]


_LEGAL_FORMS = frozenset(["inc", "corporation", "corp", "company", "co", "ltd", "limited", "llc", "plc", "group", "gmbh", "ag", "sa"])


def _inside_longer_name(tokens: Sequence[Token], position: int, length: int, sentence: str = "",
                        span: tuple[int, int] | None = None) -> bool:
    """Whether the occurrence is part of a longer name: a capitalized word right before or after it,
    with no punctuation between ("the Blackburn Shipbuilding Company" names a company, not Blackburn;
    "Cairo, Egypt" names Cairo), or a name and "of" before it ("the University of Cambridge"); a legal
    form after it ("Intel Corporation") names the same thing."""
    def named(i: int) -> bool:
        return 0 <= i < len(tokens) and tokens[i].case not in ("lower",) and tokens[i].text not in _STARTERS

    punctuated_after = span is not None and bool(re.match(r"\s*[,;:()\[\]]", sentence[span[1] :]))
    after = position + length
    name_after = named(after) and not punctuated_after and tokens[after].text not in _LEGAL_FORMS
    of_name = position > 1 and tokens[position - 1].text in ("of", "de", "du", "von", "van") and named(position - 2)
    return name_after or (position > 0 and named(position - 1)) or of_name  # "the University of Cambridge"


def _neighbours(tokens: Sequence[Token], position: int, length: int) -> set[tuple[int, str]]:
    """The words next to a span on each side, with the side (-1 before, 1 after), looking past the little
    words inside names ("Battle of Waterloo": "battle"), not past prepositions ("developed by Intel": none)."""
    out: set[tuple[int, str]] = set()
    for step, start in ((-1, position - 1), (1, position + length)):
        i = start
        while 0 <= i < len(tokens) and tokens[i].text in _CONNECTORS:
            i += step
        if 0 <= i < len(tokens) and tokens[i].text not in FUNCTION_WORDS:
            out.add((step, tokens[i].text))
    return out


def _echoes(tokens: Sequence[Token], position: int, length: int, asked: Sequence[Token], needle: Sequence[Token],
            same_side: bool = False) -> bool:
    """Whether the occurrence sits next to the same content word as the alias does in the question; with
    ``same_side``, on the same side, so it repeats the question's own phrase ("A rechargeable battery is ..."
    for "What is rechargeable battery a subclass of?", where "IBM developed ..." for "Who developed IBM
    Network ...?" has its neighbour on the other side)."""
    context: set[tuple[int, str]] = set()
    for p in _find(asked, needle):
        context |= _neighbours(asked, p, len(needle))
    here = _neighbours(tokens, position, length)
    if same_side:
        return bool(here & context)
    return bool({word for _, word in here} & {word for _, word in context})


_CLAIM_JOINS = frozenset(["and", "or", "both", "either", "all"])  # words a restated claim may drop
# a yes or no taken back in its own sentence: the question cannot be answered that way
_WITHDRAWN = re.compile(
    r"\b(?:(?:not possible|impossible|unable|cannot|can'?t|difficult|hard) to (?:answer|say|determine|tell|know)"
    r"|not (?:a |an )?(?:simple|clear|classic|straightforward|definitive)\W+(?:yes|no|answer)"
    r"|ambiguous|unclear|not sure|don'?t know|do not know|it depends)\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=1 << 16)
def _polarity(question: str, reply: str) -> str | None:
    """The reply's answer to a yes/no question: its first "yes" or "no", unless a later sentence restates
    the question's claim in the opposite sense ("No, they are not both actors. They are both actors ...":
    since match@9 / answer@8); else, where its first sentence restates the question's claim (every
    lower-case content word of the question after its auxiliary, in some form, the last in the sentence's
    predicate: "San Francesco, Pisa and Pistoia are located in the same country"), "yes", or "no" where that
    sentence is negated."""
    said = sentences(reply)
    asked = tokenize(question)
    for k, sentence in enumerate(said):
        tokens = tokenize(sentence)
        nos = [i for i, t in enumerate(tokens) if t.text == "no"]  # the k-th "no" token is the k-th "no" in the text
        determiners = {nos[k] for k in _determiner_nos(sentence) if k < len(nos)}
        polar = next((t.text for i, t in enumerate(tokens) if t.text in ("yes", "no") and i not in determiners
                      and not _names_word(asked, tokens, i)), None)
        if polar is not None:  # "No, the answer is not possible to give" withdraws its "no"
            if any(p.search(sentence) and not p.search(question) for p in (_WITHDRAWN, _NO_ANSWER, _AFRAID)):
                return None  # "No, I'm not able to answer", "No, I'm afraid ..." (since match@13)
            found = re.search(rf"\b{polar}\b", sentence, re.IGNORECASE)
            rest = sentence[found.end() :] if found else ""  # "No, A and B are both X": the rest says yes
            both = any(t.text == "both" for t in tokenize(rest))
            later = (x for x in said[k + 1 :] if _of_all_asked(asked, x))  # read only if needed
            taken_back = (both and _claim_polarity(asked, rest) not in (None, polar)) or any(
                _claim_polarity(asked, x) not in (None, polar) for x in later)
            return None if taken_back else polar
    if not said or not asked or asked[0].text not in _YES_NO_START or _METHOD.match(said[0]):
        return None  # "To determine if A and B are from the same country, we need ..." sets out a method (match@16)
    claim = _claim_polarity(asked, said[0])
    if claim == "yes" and any(t.text == "and" for t in asked) and not _of_all_asked(asked, said[0]):
        return None  # "Is A an American singer." says it of A alone, not of "A and B both" (match@16)
    return claim


_NO_WORD = re.compile(r"\bno\b", re.IGNORECASE)
_ANSWER_IS = re.compile(r"\b(?:answer|response|reply)\s*(?:is|was|would be|:)\s*$", re.IGNORECASE)


def _determiner_nos(sentence: str) -> list[int]:
    """Which of the sentence's "no"s (by their order in it) are determiners ("There is no specific information about
    ..."), not the answer "no": inside the sentence, a word right after it, and not announced ("The answer is no
    because ..."). Since match@16 / answer@15."""
    def determiner(found: re.Match[str]) -> bool:
        before, after = sentence[: found.start()], sentence[found.end() :]
        return bool(before.strip()) and bool(re.match(r"\s+[\w\"'“‘]", after)) and not _ANSWER_IS.search(before)

    return [k for k, found in enumerate(_NO_WORD.finditer(sentence)) if determiner(found)]


def _names_word(asked: Sequence[Token], tokens: Sequence[Token], i: int) -> bool:
    """Whether the word at ``i`` begins a name the question has, with the word after it ("No Doubt" for "Did the
    bands No Doubt and ... originate from the same country?" is the band, not a "no": since match@11)."""
    return i + 1 < len(tokens) and tokens[i].case != "lower" and any(
        a.text == tokens[i].text and a.case != "lower" and b.text == tokens[i + 1].text
        for a, b in pairwise(asked[1:]))


_BOTH_OF_THEM = re.compile(r"\b(?:both|all)\b(?!\s+(?:an?|the)\b)", re.IGNORECASE)  # "are both", "are all from"


def _of_all_asked(asked: Sequence[Token], sentence: str) -> bool:
    """Whether a sentence speaks of everything the question names: "they" or "both", or a subject that holds
    every name of the question (not "A is a British actor and B is ..." for "Are A and B both actors?"); "all"
    counts as "both" does, but a "both" that joins two predicates ("A is both a writer and a photographer") speaks
    of one (since match@16)."""
    tokens = tokenize(sentence)
    if any(t.text in ("they", "neither") for t in tokens) or _BOTH_OF_THEM.search(sentence):
        return True
    subject = tokens[: _subject_end(tokens)]
    return all(_in(t, subject) for t in asked[1:] if t.case != "lower")


def _claim_polarity(asked: Sequence[Token], sentence: str) -> str | None:
    """ "yes" where a sentence restates the question's claim (see :func:`_polarity`) or names the one value
    two things share (:func:`_names_shared_value`), "no" where it restates the claim negated, else None."""
    claim = [t for t in asked[1:] if t.case == "lower" and t.text not in FUNCTION_WORDS | _CLAIM_JOINS]
    tokens = tokenize(sentence)
    negated = _negates([t.text for i, t in enumerate(tokens) if not _names_word(asked, tokens, i)])  # not "No Doubt"
    if _names_shared_value(asked, sentence):
        return None if negated else "yes"
    kind = next((b.text for a, b in pairwise(asked) if a.text == "same"), None)  # "the same country?"
    for word, after in pairwise(t.text for t in tokens[_subject_end(tokens) or len(tokens) :]):
        if kind and word in ("same", "different") and (same_word(after, kind) or after in _plurals(kind)):  # match@12
            return ("no" if negated else "yes") if word == "same" else (None if negated else "no")
    predicate = tokens[_subject_end(tokens) or len(tokens) :]  # the claim ends what the sentence says
    if not claim or not all(_in(t, tokens) for t in claim) or not _in(claim[-1], predicate):
        return None
    return "no" if negated else "yes"


_SHARED_VALUE = re.compile(
    r"\b(?:both|all)\s+(?:(?:located|based|born)\s+)?(?:in|from)\s+(?:the\s+)?"  # "both (located) in the"
    r"((?:[A-Z][\w'’.-]*\s*)+?)\s*(?=$|[.,;:!?]|\s(?:and|but)\b)"  # a name that ends the phrase
    r"|\b(?:both|all)\s+([A-Z][\w'’-]*)\s*(?=$|[.,;!?]|\s(?:and|but)\b)"  # "both African-American."
    # "Both A and B are located in Australia." (since match@12)
    r"|^\s*(?:[Bb]oth|[Aa]ll)\b[^.;]*?\b(?:are|were)\s+(?:(?:located|based|born)\s+)?(?:in|from)\s+(?:the\s+)?"
    r"((?:[A-Z][\w'’.-]*\s*)+?)\s*(?=$|[.,;:!?]|\s(?:and|but)\b)"
)


def _names_shared_value(asked: Sequence[Token], sentence: str) -> bool:
    """Whether a sentence answers "Do A and B share the same X?" by naming the one X they both have: "both"
    (or "all") from or in a name that ends the phrase ("A and B are both from Spain.", "... are all from the
    United States", "Both A and B are located in Australia.": match@12), or a name alone that ends the sentence or
    a clause ("... are both African-American.", "both Canadian, but ...": match@10); not a name that qualifies a
    noun ("both located in the Indian subcontinent", "both French films"). Since match@9."""
    if not any(t.text == "same" for t in asked):
        return False
    found = _SHARED_VALUE.search(sentence)
    named = tokenize(next((g for g in found.groups() if g), "")) if found else ()
    return bool(named) and not all(_in(t, asked) for t in named)


def asserts_gold(question: str, reply: str, aliases: Sequence[str]) -> bool:
    """Whether the reply asserts one of the gold aliases as its answer to the question (see the module
    docstring); alias containment alone is necessary, not sufficient."""
    aliases = [a for a in aliases if a and a.strip() and not _little_words(a)]
    words = {normal for a in aliases for normal in [" ".join(t.text for t in tokenize(a))]}
    if words and words <= {"yes", "no"}:
        return _polarity(question, reply) in words
    picked = choice_of(question, aliases)
    if picked is not None:
        choice, gold = picked
        return chosen_option(question, reply, choice) == gold
    aliases += [form for a in aliases for form in _decade_years(a) + _plurals(a) + _without_kind(a, question)
                + _without_legal_form(a)]
    said = tokenize(reply)
    demonyms = _asks_nationality(question)  # "a Japanese actress" gives Japan as a citizenship
    if not any(contains(said, alias_tokens(a)) or (demonyms and _found(said, alias_tokens(a))) for a in aliases):
        return False  # the alias itself is necessary ("Parisian" is no city); its forms count beside it
    asked = tokenize(question)
    for sentence in sentences(reply):
        if _sentence_asserts(question, sentence, aliases):
            return True
        if _content([t for t in tokenize(sentence) if not _in(t, asked)]) and not _says_nothing(sentence) \
                and not _preamble(sentence, asked):
            return False  # the first sentence that says something decides
    return False


def _little_words(alias: str) -> bool:
    """Whether a gold alias is only little words in lower case ("in", a country code's lower-case spelling among
    India's aliases): found in nearly every reply, it names nothing (since match@11). "IN" in capitals is kept:
    it is found only in capitals (:mod:`elical.annotate.text`)."""
    tokens = tokenize(alias)
    return bool(tokens) and all(t.case == "lower" and t.text in FUNCTION_WORDS for t in tokens)


def _preamble(sentence: str, asked: Sequence[Token]) -> bool:
    """A sentence that only remarks on the question's topic before the answer ("The development of Windows
    NT was a significant milestone in computing." for "Who developed Windows NT?"): its subject repeats
    words of the question, and its predicate neither repeats one nor names anything (since match@9)."""
    tokens = tokenize(sentence)
    end = _subject_end(tokens)
    if not end or not any(_in(t, asked) for t in _content(tokens[:end])):
        return False
    predicate = _content(tokens[end + 1 :])
    return not any(_in(t, asked) or t.case != "lower" or any(map(str.isdigit, t.text)) for t in predicate)


_NATIONALITY_WORDS = frozenset(["citizenship", "nationality"])


def _asks_nationality(question: str) -> bool:
    """Whether the question asks for a person's citizenship or nationality: then the country's adjective
    answers it ("a Japanese actress" for Japan; since match@9), as it does not where a country is asked
    for a place ("the Indian subcontinent" is no answer to "In which country is Mumbai?")."""
    return any(t.text in _NATIONALITY_WORDS for t in tokenize(question))


def _without_kind(alias: str, question: str) -> list[str]:
    """A gold alias less the kind of thing that the question asks for, which it ends in ("English
    Language" for "What language do they speak?" is asserted by "English"; since match@9)."""
    words = alias.split()
    asked = {t.text for t in tokenize(question) if t.case == "lower"}  # a common noun, not part of a name
    if len(words) < 2 or words[-1].lower() not in asked or not words[-2][:1].isupper():
        return []
    return [" ".join(words[:-1])]


_LEGAL_SUFFIX = re.compile(r"^(.*\S)\s*,?\s+(?:Inc|Corporation|Corp|Ltd|Limited|LLC|PLC|GmbH|AG)\.?$")


def _without_legal_form(alias: str) -> list[str]:
    """A company's gold alias less its legal form ("Apple Inc.": "Apple"), the name it goes by (since match@12)."""
    found = _LEGAL_SUFFIX.match(alias.strip())
    return [found.group(1)] if found else []


_DECADE = re.compile(r"^\s*(?:the\s+)?(1[0-9]{2}|20[0-9])0'?s\s*$", re.IGNORECASE)


def _decade_years(alias: str) -> list[str]:
    """The years of a decade alias ("1970s": 1970 to 1979), each a more precise form of it."""
    decade = _DECADE.match(alias)
    return [f"{decade.group(1)}{digit}" for digit in range(10)] if decade else []


def _plurals(alias: str) -> list[str]:
    """The plural of a gold alias that ends in a common noun ("Italian composer": "Italian composers")."""
    head = alias.strip().rsplit(" ", 1)[-1]
    if not head.isalpha() or not head.islower() or len(head) < 3 or head.endswith("s"):
        return []
    if head.endswith("y") and head[-2] not in "aeiou":
        return [alias.strip()[:-1] + "ies"]
    latin = [alias.strip() + "e"] if head.endswith("a") else []  # "alga": "algae" (since match@12)
    return [alias.strip() + ("es" if head.endswith(("x", "ch", "sh")) else "s"), *latin]


_ANNOUNCEMENT = re.compile(r"(?:the\s+)?(?:correct\s+|short\s+)?answer(?:\s+to\s+(?:this|the|your)\s+question)?\s+is\s*:?", re.IGNORECASE)


def _says_nothing(sentence: str) -> bool:
    """A sentence that only announces an answer ("The answer to this question is:")."""
    return bool(_ANNOUNCEMENT.fullmatch(sentence.strip()))


# ---------------------------------------------------------------------------- consistency

SHORT_SLOT = 2  # answer-slot words up to which a reply gives an answer to compare (longer: a statement)
_YES_NO_START = frozenset([
    "is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had", "will", "would",
    "should"
])
_AFRAID = re.compile(r"\bi'?m afraid\b|\bi am afraid\b", re.IGNORECASE)
_NO_ANSWER = re.compile(
    r"\b(?:i'?m sorry|i am sorry|i apologi[sz]e|i don'?t know|i do not know|i cannot|i can'?t|i'?m not (?:sure|able|aware)"
    r"|i am not (?:sure|able|aware)|unable to|not possible to|no (?:information|answer|record)|not (?:known|available|specified|mentioned)"
    r"|unknown|unclear|not aware of|does not exist|doesn'?t exist)\b",
    re.IGNORECASE,
)


# a name and a title set off by commas right before an option's last part ("..., Emilio Drake, 1st Marquess of ...")
_TITLED = re.compile(r"\w[^,]*,\s*([^,]+?),\s*$")


@lru_cache(maxsize=1 << 12)
def question_options(question: str) -> Choice | None:
    """The two alternatives a question offers ("..., A or B?"), found without the gold answer; None
    for other questions. Cached: each answer to the question asks."""
    for joined in _OR.finditer(question):
        before = _OPTION_END.search(question[: joined.start()])
        after = _NAME.match(question[joined.end() :])
        if before and after and before.group().strip() and after.group().strip():
            first = before.group()
            titled = _TITLED.search(question[: before.start()])  # "Who lived longer, A, 1st Marquess of B or C?"
            if titled and _NAME.fullmatch(titled.group(1)):
                first = f"{titled.group(1)}, {first.strip()}"
            left, right = alias_tokens(first.strip()), alias_tokens(after.group().strip())
            if left and right and left != right:
                return _make_choice((left, right), question)
    return None


@lru_cache(maxsize=1 << 16)
def _answering_sentence(question: str, reply: str) -> str | None:
    """The reply's first sentence that says something beyond the question; None where none does."""
    asked = _question_words(question)
    replied = sentences(reply)
    for sentence in replied:
        said = [t for t in _content(tokenize(sentence)) if not _asked(t.text, asked) and t.text not in _ANNOUNCING]
        if said and sentence is replied[-1] and _cut_in_question_word(sentence, said[-1], asked):
            said.pop()
        if said and not _says_nothing(sentence):
            return sentence
    return None


def _cut_in_question_word(sentence: str, last: Token, asked: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Whether a sentence left unfinished (by the token limit) ends in the first letters of one of the
    question's words ("... the western term" for "terminus", "in the 2003-200" for "2003-2004"): the
    question repeated and cut off, not a word of its own."""
    words = tokenize(sentence)
    if len(words) < 2 or len(last.text) < 3 or words[-1] != last or _ENDS_SENTENCE.search(sentence.rstrip()):
        return False  # a reply of one word, or of a letter or two ("D"), is no cut-off restatement
    return any(len(word) > len(last.text) and word.startswith(last.text) for word in asked[0])


@lru_cache(maxsize=1 << 16)
def gives_no_answer(question: str, reply: str) -> bool:
    """Whether a reply asserts no answer: it says nothing beyond the question (an echo, a cut-off
    restatement), or its answering sentence refuses or calls the answer unknown."""
    sentence = _answering_sentence(question, reply)
    if sentence is None or about_another_name(question, sentence):
        return True
    if sentence == sentences(reply)[-1] and _cut_before_answer(sentence) and not any(
            _named_run(piece) for piece in answer_slot(question, sentence).pieces):
        return True  # "The seminar was held at the" cut off before the answer it was about to name
    found = _NO_ANSWER.search(sentence)
    return found is not None and not re.search(re.escape(found.group()), question, re.IGNORECASE)


# a noun phrase described by a clause of its own: "the state where ...", "the country that ..."
_NESTED = re.compile(
    r"\b(?:the|a|an)\s+(?:[\w'’-]+\s+){0,3}?(?:where|that|which|whose|who|whom)\b"
    # a clause without its pronoun: "the country Bafwasende is located in", "the branch Ralph Wenzel was part of"
    r"|(?-i:\b(?:[Tt]he|[Aa]n?)\s+(?:[a-z][\w'’-]*\s+){1,3}?(?=[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*)*\s+(?:is|was|are|were)\b))",
    re.IGNORECASE)
_WH_WORDS = frozenset(["what", "which", "who", "whom", "whose", "where", "when", "why", "how"])
_WH_PHRASE = re.compile(r"\s*(?:which|what)(?:\s+[\w'’-]+){0,2}\s*", re.IGNORECASE)  # "Which country " before a clause
# where or when something happened to "the <role> of X": the question nests "who is the <role> of X?"
_ASKED_OF = re.compile(
    r"^\s*((?:where|when)\s+(?:was|were|did|does|is))\s+(the\s+\w+\s+of\s+.+?)\s+"
    r"(born|die|died|work|worked|live|lived|study|studied|graduate|graduated)\s*\??\s*$", re.IGNORECASE)


@lru_cache(maxsize=1 << 12)
def nested_question(question: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The content words of a nested question's outer part and of its inner one, where the question asks
    something of a noun phrase that a clause of its own describes ("Who was in charge of | the state
    where Shringarpur is located?"); None for other questions, and where the outer part has no word of
    its own ("What is | the city where ...?" asks for the noun phrase itself)."""
    asked_of = _ASKED_OF.match(question)  # "Where was | the director of film X | born?" (since answer@8)
    found = None if asked_of else next(  # "Which country | the director of film X is from?" asks of its own clause
        (m for m in _NESTED.finditer(question) if not _WH_PHRASE.fullmatch(question[: m.start()])), None)
    if asked_of:
        parts = (f"{asked_of.group(1)} {asked_of.group(3)}", asked_of.group(2))
    elif found is not None and found.start() > 0:
        parts = (question[: found.start()], question[found.start() :])
    else:
        return None
    outer, inner = (tuple(t.text for t in _content(tokenize(part)) if t.text not in _WH_WORDS) for part in parts)
    return (outer, inner) if outer and inner else None


@lru_cache(maxsize=1 << 16)
def answers_inner_question(question: str, reply: str) -> bool:
    """Whether the reply answers a nested question's inner question instead of it: its answering
    sentence repeats words of the inner part and none of the outer part's ("The state where Shringarpur
    is located is India." names the state, not who was in charge of it). A short answer repeats neither
    and is read as usual. Cached, as the reference answer is compared with each of k samples."""
    parts = nested_question(question)
    sentence = _answering_sentence(question, reply) if parts else None
    if parts is None or sentence is None:
        return False
    said = [t.text for t in tokenize(sentence)]
    def repeated(word: str) -> bool:
        return any(same_word(word, w) for w in said)
    outer, inner = parts
    return any(map(repeated, inner)) and not any(map(repeated, outer))


_PIECE = re.compile(r"[,;:](?=\s)|[()\[\]\"“”]|\s(?:and|or|&)\s", re.IGNORECASE)
_YEAR_QUESTION = re.compile(r"\b(?:what|which) year\b", re.IGNORECASE)
# words that name no answer by themselves: quantifiers, vague adjectives and nouns ("several key ways", "significant")
_VAGUE = frozenset([
    "several", "various", "many", "some", "numerous", "certain", "particular", "significant", "different", "main",
    "key", "important", "major", "multiple", "specific", "general", "primarily", "mostly", "mainly", "largely",
    "ways", "things", "areas", "elements", "factors", "aspects", "types", "kinds", "reasons", "following",
])
_NUMBER_QUESTION = re.compile(
    r"^\s*(?:how (?:many|much|old|long|far|tall|big)|when\b|(?:in )?what (?:year|date|decade|century))"
    r"|\bhow (?:many|much)\b"  # anywhere: "In 2012, how many ...", "... has how many undergraduates?" (answer@14)
    rf"|{_YEAR_QUESTION.pattern}"  # anywhere: "... was completed in what year?" (answer@16)
    r"|^\s*(?:what|which) (?:(?:is|was|are|were) the (?:\w+ ){0,2}?)?"  # a quantity's name: "What is the population of"
    r"(?:population|gdp|salary|percentage|percent|rate|number|amount|size|height|length|elevation|latitude|longitude"
    r"|rank|capacity|budget|revenue|cost|price|distance|depth|temperature|age)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Slot:
    """The words of a sentence that fill the question's answer slot, in pieces (the sentence cut at
    punctuation and conjunctions), and whether a conjunction joins two pieces that name something."""

    pieces: tuple[tuple[Token, ...], ...]
    listed: bool

    @property
    def words(self) -> list[Token]:
        return [t for piece in self.pieces for t in piece]


@lru_cache(maxsize=1 << 16)
def answer_slot(question: str, sentence: str) -> Slot:
    """The words of a sentence that fill the question's answer slot: its content words the question
    lacks, from the predicate where the subject restates the question ("The capital of France is
    Paris"), from the subject where the predicate does ("Paris is the capital of France"), else from
    the predicate (where the sentence says something of its own subject, the claim is what follows)."""
    asked = _question_words(question)
    joins = [m.group() for m in _PIECE.finditer(sentence)]
    pieces = [tokenize(piece) for piece in _PIECE.split(sentence)]
    owner = [i for i, piece in enumerate(pieces) for _ in piece]
    tokens = [t for piece in pieces for t in piece]
    end = _subject_end(tokens)

    def new(lo: int, hi: int) -> list[int]:
        return [i for i in range(lo, hi) if tokens[i].text not in FUNCTION_WORDS and not _asked(tokens[i].text, asked)]

    subject, predicate = (new(0, end), new(end, _described_end(tokens, owner, end, question))) if end else ([], new(0, len(tokens)))
    chosen = subject if subject and not predicate else predicate
    chosen = [i for i in chosen if not _place_kind(tokens, i)]
    grouped: dict[int, list[Token]] = {}
    for i in chosen:
        token = tokens[i] if i or tokens[i].text not in _STARTERS else Token(tokens[i].text, "lower")
        grouped.setdefault(owner[i], []).append(token)
    named = [k for k, words in grouped.items() if _named_run(words)]
    listed = len(named) > 1 and any(_LIST_JOIN.search(joins[k - 1]) for k in named[1:] if 0 < k <= len(joins))
    return Slot(tuple(tuple(grouped[k]) for k in sorted(grouped)), listed)


_RELATIVES = frozenset(["which", "who", "whom", "whose"])
_DESCRIBING = frozenset(["known", "born", "with"])  # words that begin a description, beside participles in -ed


def _described_end(tokens: Sequence[Token], owner: Sequence[int], start: int, question: str) -> int:
    """Where a predicate's answer ends and a description of it begins (since answer@9): a relative clause
    after a name or a comma ("Mumbai, which was ...", "the Big O notation, which is ...") or a piece that
    begins with a participle or "with" ("musicians, known for ...", "California, with 39 million people"). A
    clause that restricts a common noun stays part of the slot ("a Swiss mathematician who made contributions
    to calculus" is a statement, not the answer "Swiss mathematician" to "Where did he work?"), and so does a
    clause whose next content word is the question's (it restates the question, so it holds the answer)."""
    asked = _question_words(question)
    for i in range(start + 2, len(tokens)):
        token, starts_piece = tokens[i], owner[i] != owner[i - 1]
        participle = token.case == "lower" and (token.text in _DESCRIBING or token.text.endswith("ed"))
        relative = token.text in _RELATIVES and (starts_piece or tokens[i - 1].case != "lower")
        # "the UAE, a major ...": an appositive (answer@11)
        appositive = starts_piece and token.text in ("a", "an") and tokens[i - 1].case != "lower"
        if relative or (participle and starts_piece) or appositive:
            verb = next((t.text for t in tokens[i + 1 :] if t.text not in FUNCTION_WORDS), "") if relative else token.text
            if not _asked(verb, asked):
                return i
    return len(tokens)


_PLACE_KINDS = frozenset(["state", "city", "country", "province", "county", "town", "village", "region", "island"])


def _place_kind(tokens: Sequence[Token], i: int) -> bool:
    """Whether the word at ``i`` only names the kind of the place named after it, where the reply locates
    something there ("in the state of North Carolina" is in North Carolina; since answer@9), not where it is
    part of another claim ("the capital of the state of Texas")."""
    return (tokens[i].text in _PLACE_KINDS and 2 <= i < len(tokens) - 2 and tokens[i + 1].text == "of"
            and tokens[i + 2].case != "lower" and [t.text for t in tokens[i - 2 : i]] == ["in", "the"])


@lru_cache(maxsize=1 << 12)
def _question_words(question: str) -> tuple[frozenset[str], frozenset[str]]:
    """The question's words, and the stems of them all (what :func:`_asked` compares a word's with)."""
    words = frozenset(t.text for t in tokenize(question))
    return words, frozenset(stem for word in words for stem in _forms(word)[0])


def _asked(word: str, asked: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Whether the question (its :func:`_question_words`) has the word, as it is or inflected
    ("produces" / "produced"): a stem in common with one of its words; an answer that shares only a
    stem with the question still answers it ("Rome" for "East Roman Empire"). Since answer@15 also a near
    spelling of a long word of the question ("Nicolas" for "Nicholas", "research" for "reserach"): a reply that
    repeats the question with a letter changed adds nothing."""
    words, stems = asked
    return word in words or not _forms(word)[0].isdisjoint(stems) or _near_spelling(word, words)


@lru_cache(maxsize=1 << 16)
def _near_spelling(word: str, words: frozenset[str]) -> bool:
    """Whether a word of five letters or more spells one of ``words`` with a letter or two changed: the same
    first letter, a length one letter apart at most, a similarity ratio of at least 0.87 ("Bosniak" is not
    "Bosnian", 0.86; "footballer" not "football")."""
    return len(word) >= 5 and any(
        abs(len(w) - len(word)) <= 1 and w[0] == word[0] and SequenceMatcher(None, word, w).ratio() >= 0.87
        for w in words)


def _named_run(words: Sequence[Token]) -> tuple[Token, ...]:
    """The first run of named words (capitalized, or holding digits) among the slot's words."""
    run: list[Token] = []
    for token in words:
        if token.case != "lower" or any(map(str.isdigit, token.text)):
            run.append(token)
        elif run:
            break
    return tuple(run)


def _names(slot: Slot, numbers: bool) -> list[tuple[Token, ...]]:
    """The names a slot gives, one per piece (only numbers where the question asks for one)."""
    runs = []
    for piece in slot.pieces:
        piece = tuple(Token(_NUMBER_WORDS.get(t.text, t.text), t.case) for t in piece)
        words = [t for t in piece if any(map(str.isdigit, t.text))] if numbers else list(piece)
        run = _named_run(words)
        if not numbers and run and all(t.text.isdigit() for t in run):
            run = _named_run(words[words.index(run[-1]) + 1 :])  # "born in 1980 in Wilmore": Wilmore (answer@13)
        if run:
            runs.append(run)
    return runs


def _same_name(x: tuple[Token, ...], y: tuple[Token, ...]) -> bool:
    """One name inside the other, a word counting in its other forms ("Japan" / "Japanese")."""
    def inside(a: Sequence[Token], b: Sequence[Token]) -> bool:
        return all(any(same_word(t.text, o.text) for o in b) for t in a)

    return inside(x, y) or inside(y, x)


def same_assertion(question: str, a: str, b: str) -> bool | None:
    """Whether two replies assert the same answer, where what they assert decides it (the rules of
    the answer judge since answer@3); None where the answers' cores must be compared. A reply that
    gives no answer is the same as nothing; yes/no questions compare the replies' yes or no, choice
    questions the options chosen; two replies whose first new names agree give the same answer."""
    words = [t.text for t in tokenize(question)]
    if words and words[0] in _YES_NO_START and " or " not in question:  # answered by a yes or a no alone
        polarity_a, polarity_b = _polarity(question, a), _polarity(question, b)
        return polarity_a is not None and polarity_a == polarity_b
    if question_options(question) is not None:
        chosen_a, chosen_b = _chosen_offered(question, a), _chosen_offered(question, b)
        return chosen_a is not None and chosen_a == chosen_b
    if gives_no_answer(question, a) or gives_no_answer(question, b):
        return False
    (slot_a, names_a), (slot_b, names_b) = _slot_names(question, a), _slot_names(question, b)
    if any(t.text in _NEGATIONS for t in slot_a.words + slot_b.words):
        return False  # a negated claim says what the answer is not
    numbers = _asks_number(question)
    if numbers and not (names_a and names_b):
        return False  # a question that asks for a number is answered by one
    if _YEAR_QUESTION.search(question) and not all(len(n[0].text) >= 3 for n in (names_a[0], names_b[0])):
        return False  # "... completed in 2" is a year cut off, not a year (answer@16)
    words_a, words_b = [t.text for t in slot_a.words], [t.text for t in slot_b.words]
    if words_a and words_b and all(w in _VAGUE for w in words_a + words_b):
        return False  # "several key ways", "significant": words that name no answer (answer@16)
    if words_a and words_a == words_b:  # two empty slots assert nothing (since answer@10)
        return True
    if len(words_a) > SHORT_SLOT or len(words_b) > SHORT_SLOT:
        return False  # long claims: two statements (even where they share a name), not one short answer
    if names_a and names_b:
        if slot_a.listed or slot_b.listed:  # lists are the same answer only as the same set
            return all(any(_same_name(x, y) for y in names_b) for x in names_a) and all(
                any(_same_name(y, x) for x in names_a) for y in names_b)
        if _same_name(names_a[0], names_b[0]):
            return True
        if _only_qualifies(names_a, names_b) or _only_qualifies(names_b, names_a):
            return False  # "Germany" / "Berlin, Germany": a coarser answer, not a shorter form of it
        if all(any(ch.isdigit() for ch in t.text) for t in names_a[0] + names_b[0]):
            return False  # two different numbers
    return None


def _only_qualifies(x: Sequence[tuple[Token, ...]], y: Sequence[tuple[Token, ...]]) -> bool:
    """Whether the first name of one slot is, in the other, only the qualifier of another name: the
    other's first piece names something else, and a later piece names it ("Germany" in "Berlin,
    Germany"). A fuller form of an answer keeps it first ("Paris, France" for "Paris")."""
    return len(y) > 1 and not _same_name(x[0], y[0]) and any(_same_name(x[0], later) for later in y[1:])


@lru_cache(maxsize=1 << 12)
def _asks_number(question: str) -> bool:
    return bool(_NUMBER_QUESTION.search(question))


@lru_cache(maxsize=1 << 16)
def _slot_names(question: str, reply: str) -> tuple[Slot, tuple[tuple[Token, ...], ...]]:
    """The answer slot of the reply's answering sentence and the names it gives (:func:`_names`);
    cached, as the reference answer is compared with each of k samples."""
    slot = answer_slot(question, _answering_sentence(question, reply) or "")
    return slot, tuple(_names(slot, _asks_number(question)))


@lru_cache(maxsize=1 << 16)
def _chosen_offered(question: str, reply: str) -> int | None:
    """The option of the question's own "A or B" (:func:`question_options`) the reply chooses; cached,
    as the reference answer is compared with each of k samples."""
    choice = question_options(question)
    return None if choice is None else chosen_option(question, reply, choice)


def compare_assertions(question: str, a: str, b: str) -> Comparison:
    """Consistency of two replies: :func:`same_assertion` where it decides; else the rules on the
    answers' cores (:func:`~elical.annotate.consistency.compare_answers`) applied to the two short
    answer slots, which may leave the slots' differing parts to a model (the answer judge's embeddings)."""
    decided = same_assertion(question, a, b)
    if decided is not None:
        return Comparison(decided)
    (slot_a, names_a), (slot_b, names_b) = (_slot_names(question, x) for x in (a, b))  # what same_assertion read
    text_a, text_b = _slot_text(slot_a), _slot_text(slot_b)
    if not (text_a and text_b):
        return Comparison(False)
    if not (names_a and names_b):  # answer@14: slots that name nothing are compared whole, as one holding the
        return Comparison(None, text_a, text_b)  # other's words is no evidence ("played" / "played a pivotal role")
    return compare_answers(question, text_a, text_b)


def _slot_text(slot: Slot) -> str:
    """A slot's words as text, names capitalized again, pieces apart (what the core rules compare)."""
    def word(t: Token) -> str:
        if t.case == "upper" or (t.case == "caps" and t.initials):  # "US", "U.S." stay abbreviations
            return t.text.upper()
        return t.text.capitalize() if t.case != "lower" else t.text

    return ", ".join(" ".join(word(t) for t in piece) for piece in slot.pieces if piece)
