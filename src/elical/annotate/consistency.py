"""Do two answers to one question give the same answer? Rules on the answers' cores.

Two replies often share a sentence frame ("Kumasi is in Ghana." / "Kumasi is in Nigeria."), and a
similarity of whole sentences then mostly measures the frame. So each reply is cut to its answer,
its first sentence (models state the answer first and then elaborate, often until the token limit),
and that to its core: its tokens less function words and less the words of the question. Then:

- an empty core (only function words) agrees with nothing; where one core is empty and the other not,
  the first answer only restates the question ("France" for "What is the capital of France?");
  where both are (choice and yes/no questions repeat their options), the whole answers are compared;
- where both cores name something (capitalized words, numbers, the word after an adjective of origin
  as in "a Japanese politician"), only the named words are compared;
  cores (or named words) with the same words agree, and so does one whose words all occur in the
  other ("Gitega" / "The capital of Burundi is Gitega."; "Paris" / "Paris, France"), a word
  counting in its other forms ("Japan" / "Japanese", "produces" / "produced"), unless the one names
  nothing and the other names something it does not ("located" / "located in East Asia": the name
  may be just what the first lacks, so the whole cores are left for a model to compare);
- "yes" and "no" disagree, and so do different numbers or letters ("1944" / "1945", "Hepatitis A" /
  "Hepatitis B"): sentence embeddings blur such codes;
- an abbreviation agrees with the words it abbreviates ("JFK" / "John F. Kennedy"), and initials
  with the given names they begin next to a shared name ("J.K. Rowling" / "Joanne Rowling");
- otherwise the words each core does not share with the other are left for a model to compare.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from elical.annotate.text import Token, tokenize

ANSWER_THRESHOLD = 0.86  # cosine of the differing parts: fitted on tests/data/judge_pairs_consistency.jsonl

FUNCTION_WORDS = frozenset(
    "a an the is are was were be been being am has have had do does did will would can could it its "
    "he she his her him they their them this that these those there which who whom whose of in on at "
    "to by for from with as into s".split()
)
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_SUFFIXES = ("s", "es", "d", "ed", "ing", "n", "an", "ian", "ese")
_INFLECTIONS = ("s", "es", "d", "ed", "ing")
_ORIGIN = ("ian", "can", "ean", "ese", "ish", "ch", "ic")  # Italian, American, Korean, Japanese, British, French, Arabic
_CHUNK = re.compile(r"[,;:](?=\s)|[()\[\]\"“”]|\s[-–—]\s")  # punctuation between words: no qualifying across it
_NOT = re.compile(r"n[’']t\b", re.IGNORECASE)  # "don't" -> "do not"
_BREAK = re.compile(r"\n|[.!?]+[\"'”’)\]]*(?=\s)")
_LAST_WORD = re.compile(r"(\w+)\W*$")
_ABBREVIATIONS = frozenset("mr mrs ms dr st mt ft jr sr co inc ltd corp no vs etc gen col lt prof rev approx".split())


def first_sentence(text: str) -> str:
    """The reply up to the end of its first sentence or line; a full stop after an initial or a
    common abbreviation ("U.S.", "Co.", "St.", "No." before a number) or before a lower-case word ends no sentence."""
    for found in _BREAK.finditer(text):
        head = text[: found.start()].strip()
        if not head:
            continue
        if found.group() == "\n":
            return head
        last = _LAST_WORD.search(head)
        after = text[found.end() :].lstrip()[:1]
        word = last.group(1).lower() if last is not None else ""
        # "No. 5" abbreviates; "yes or no. Dada ..." ends a sentence (since match@12)
        abbreviation = len(word) == 1 or (word in _ABBREVIATIONS and (word != "no" or after.isdigit()))
        if not abbreviation and (after.isupper() or after.isdigit() or after in "\"'“‘("):
            return text[: found.end()].strip()
    return text.strip()


@dataclass(frozen=True)
class Comparison:
    """The rules' decision (None: undecided) and, when undecided, the two differing parts."""

    decision: bool | None
    left: str = ""
    right: str = ""


def _answer_words(reply: str) -> list[tuple[Token, bool]]:
    """The first sentence's tokens without function words, number words as digits, each with whether
    it names the answer: a capitalized word or a number, or the word after an adjective of origin
    ("Japanese politician"). A capital letter inside a sentence is a letter name ("Vitamin A")."""
    words: list[tuple[Token, bool]] = []
    position = 0
    for chunk in _CHUNK.split(_NOT.sub(" not", first_sentence(reply))):
        tokens = [Token(_NUMBER_WORDS.get(t.text, t.text), t.case, t.initials) for t in tokenize(chunk)]
        for i, token in enumerate(tokens):
            if token.text not in FUNCTION_WORDS or (position > 0 and token.case == "upper"):
                qualified = i > 0 and tokens[i - 1].case != "lower" and tokens[i - 1].text.endswith(_ORIGIN)
                words.append((token, _is_named(token) or (token.case == "lower" and qualified)))
            position += 1
    return words


def _is_number(token: Token) -> bool:
    return token.text.replace(".", "").isdigit()


def _is_code(token: Token) -> bool:
    """A number, a code with digits ("B12") or a single letter: compared exactly, never by similarity."""
    return any(ch.isdigit() for ch in token.text) or (len(token.text) == 1 and token.text.isalpha())


def _is_named(token: Token) -> bool:
    """A capitalized word or a number: what names the answer to a factoid question."""
    return token.case != "lower" or _is_number(token)


@lru_cache(maxsize=1 << 16)
def _forms(word: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """A word's stems (less an inflection), bases (less a suffix) and heads (itself, less a final vowel)."""
    def less(suffixes: tuple[str, ...]) -> set[str]:
        return {word[: -len(s)] for s in suffixes if word.endswith(s) and len(word) - len(s) >= 3}

    heads = {word, word[:-1]} if word[-1:] in ("a", "e", "o", "y") else {word}
    return frozenset(less(_INFLECTIONS) | {word}), frozenset(less(_SUFFIXES)), frozenset(heads)


def same_word(x: str, y: str) -> bool:
    """One word in two forms: inflections ("produces" / "produced") and country adjectives
    ("Canada" / "Canadian", "Japan" / "Japanese"); never two names ("Niger" / "Nigeria")."""
    if x == y:
        return True
    (stems_x, bases_x, heads_x), (stems_y, bases_y, heads_y) = _forms(x), _forms(y)
    return bool(stems_x & stems_y or bases_x & heads_y or bases_y & heads_x)


def _occurs(token: Token, others: list[Token]) -> bool:
    """Whether a form of the token is among ``others``."""
    return any(same_word(token.text, o.text) for o in others)


def _missing(tokens: list[Token], others: list[Token]) -> list[Token]:
    """The tokens with no form of themselves among ``others``."""
    return [t for t in tokens if not _occurs(t, others)]


def _abbreviates(short: list[Token], words: list[Token]) -> bool:
    """Whether ``short`` is one abbreviation spelling the initials of consecutive ``words``."""
    if len(short) != 1 or short[0].case != "upper" or len(short[0].text) < 2:
        return False
    letters = short[0].text
    initials = [t.text[0] for t in words if t.text not in ("of", "and")]
    return any("".join(initials[i : i + len(letters)]) == letters for i in range(len(initials) - len(letters) + 1))


def _initials_of(short: list[Token], words: list[Token]) -> bool:
    """Whether ``short`` is one token of dotted initials that could stand for the capitalized
    ``words`` ("J.K." / "Joanne", "J." / "John Fitzgerald"): the one's letters begin the other's."""
    if len(short) != 1 or not short[0].initials or not words or any(w.case == "lower" for w in words):
        return False
    letters, firsts = short[0].text, "".join(w.text[0] for w in words)
    return letters.startswith(firsts) or firsts.startswith(letters)


def compare_answers(question: str, a: str, b: str) -> Comparison:
    """Compare two answers to ``question`` by their cores (see the module docstring)."""
    words_a, words_b = _answer_words(a), _answer_words(b)
    if not words_a or not words_b:
        return Comparison(False)
    asked = list(tokenize(question))
    core_a = [(t, n) for t, n in words_a if not _occurs(t, asked)]
    core_b = [(t, n) for t, n in words_b if not _occurs(t, asked)]
    if bool(core_a) != bool(core_b):
        return Comparison(False)
    if not core_a:
        core_a, core_b = words_a, words_b
    if {core_a[0][0].text, core_b[0][0].text} == {"yes", "no"}:
        return Comparison(False)
    named_a, named_b = [t for t, n in core_a if n], [t for t, n in core_b if n]
    plain_a, plain_b = [t for t, _ in core_a], [t for t, _ in core_b]
    if named_a and named_b:  # compare what the answers name, not how they describe it
        left, right = _missing(named_a, named_b), _missing(named_b, named_a)
    else:
        left, right = _missing(plain_a, plain_b), _missing(plain_b, plain_a)
        named, unnamed = (named_a, plain_b) if named_a else (named_b, plain_a)
        if named and (not left or not right) and not any(_occurs(t, named) for t in unnamed):
            # words that name nothing, all found in an answer that names something they do not
            # ("located" / "located on the East Coast of Asia"): the name may be just what the first
            # lacks, so the whole cores are compared ("euro" / "the EU uses the Euro" shares its name)
            return Comparison(None, " ".join(t.text for t in plain_a), " ".join(t.text for t in plain_b))
    if not left or not right:
        return Comparison(True)
    if all(_is_code(t) for t in left + right) or (any(map(_is_number, left)) and any(map(_is_number, right))):
        return Comparison(False)
    full_a, full_b = [t for t, _ in words_a], [t for t, _ in words_b]
    if _abbreviates(left, full_b) or _abbreviates(right, full_a):
        return Comparison(True)
    if named_a and named_b and len(left) < len(named_a) and len(right) < len(named_b):  # a shared name
        if _initials_of(left, right) or _initials_of(right, left):
            return Comparison(True)
    return Comparison(None, " ".join(t.text for t in left), " ".join(t.text for t in right))
