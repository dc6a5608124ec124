"""Answer text as comparable tokens: Unicode folding, word tokens, abbreviations, numbers.

The rules keep what names an entity and drop only how it was typed:

- NFKC (full-width digits, ligatures), accents folded ("Zürich", decomposed or not, = "Zurich"), a
  few letters with strokes (ø, ł, đ, æ, œ) spelled in ASCII; words compared in lower case, with how
  each was cased kept beside it.
- Punctuation and hyphens separate words ("Jean-Paul" = "Jean Paul"); nothing is glued together.
- Numbers keep their decimal points ("3.14" != "31.4") and lose thousands separators ("3,000" = "3000").
- Dotted initials form one abbreviation token ("U.S." = "U. S." = "US", "J.K." = "J. K." = "JK").
- A token written in capitals (outside all-caps text) is an abbreviation or a letter name ("US", the
  "A" of "Vitamin A"); it is found only where the answer writes it in capitals too (or is written in
  capitals throughout), so gold "U.S." is not in "Tell us more" nor "WHO" in "Who knows?", and gold
  "A" is not the article of "a matter of debate". An answer that is the alias alone matches in any case.
- Single letters are never dropped; an article is dropped only at the start of a gold alias
  ("The Netherlands" = "Netherlands") or in its catalogue form ("Beatles, The"), where it never
  names the entity, never inside ("Vitamin A", "Hepatitis A", "grade A" keep their letters), and
  not where a leading "A" is a letter ("A minor" is not "C minor").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import regex

Case = Literal["lower", "upper", "caps", "other"]  # caps: a word of a text in capitals throughout

ARTICLES = frozenset({"a", "an", "the"})
_STROKES = str.maketrans({"ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE"})
_WORD = regex.compile(r"[\p{L}\p{N}\p{M}]+")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")  # _WORD on ASCII text: letters and digits (ASCII has no marks)
_ASCII_LOWER = re.compile(r"[a-z]")
# where ASCII text may hold a number with a point or separator ("3.14", "3,000") or dotted initials ("U.S.");
# text without either is one token per word
_JOINED = re.compile(r"[0-9][.,][0-9]|(?:^|[^A-Za-z0-9])[A-Za-z]\.")
_INITIAL_GAP = re.compile(r"\.\s*")  # what separates dotted initials: "U.S.", "U. S."
_CATALOGUE_ARTICLE = re.compile(r"^(.*\S)\s*,\s*(?:the|an?)\s*$", re.IGNORECASE)  # "Beatles, The"


@dataclass(frozen=True)
class Token:
    """One word: its folded text, how it was cased, and whether it came from dotted initials."""

    text: str
    case: Case = "other"
    initials: bool = False


def fold(text: str) -> str:
    """NFKC, then accents and stroke letters folded to their base letters; case is kept."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).translate(_STROKES))
    return unicodedata.normalize("NFC", "".join(ch for ch in decomposed if not 0x300 <= ord(ch) <= 0x36F))


def _case(word: str, shouting: bool) -> Case:
    letters = [ch for ch in word if ch.isalpha()]
    if not letters:
        return "other"
    if shouting:
        return "caps"
    if all(ch.islower() for ch in letters):
        return "lower"
    return "upper" if word.isalpha() and word.isupper() else "other"  # "B12" is no word it could be confused with


@lru_cache(maxsize=1 << 16)
def tokenize(text: str) -> tuple[Token, ...]:
    """The tokens of a text under the module's rules (numbers, initials and case kinds resolved);
    cached, as the gold aliases, the question and the reference answer recur for each of k samples.
    ASCII text (most replies) is its own folding; where it has no number with a point or separator and
    no dotted initial, its tokens are its words (runs of letters and digits) one by one, found without
    the rules' loop (:func:`_tokens`, which gives the same tokens, decides the rest)."""
    if text.isascii() and not _JOINED.search(text):
        words = _ASCII_WORD.findall(text)
        shouting = not _ASCII_LOWER.search(text) and sum(not w.isdigit() for w in words) >= 2
        return tuple([_word_token(word, shouting) for word in words])
    return _tokens(fold(text))


def _tokens(folded: str) -> tuple[Token, ...]:
    """The tokens of a folded text (:func:`tokenize`'s rules, word by word)."""
    spans = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(folded)]
    lettered = [w for _, _, w in spans if any(ch.isalpha() for ch in w)]
    shouting = len(lettered) >= 2 and not any(ch.islower() for ch in folded)
    tokens: list[Token] = []
    i = 0
    while i < len(spans):
        _, end, word = spans[i]
        # numbers: "3.14" keeps its point, "3,000" loses its separator
        while i + 1 < len(spans) and word.replace(".", "").isdigit() and spans[i + 1][2].isdigit():
            gap, nxt = folded[end : spans[i + 1][0]], spans[i + 1][2]
            if gap == ".":
                word += "." + nxt
            elif gap == "," and len(nxt) == 3:
                word += nxt
            else:
                break
            end = spans[i + 1][1]
            i += 1
        # dotted initials: single letters each followed by a dot (the last one may lack it if glued)
        run = [word] if len(word) == 1 and word.isalpha() and folded[end : end + 1] == "." else []
        while run and i + 1 < len(spans):
            gap, nxt = folded[end : spans[i + 1][0]], spans[i + 1][2]
            dotted_next = folded[spans[i + 1][1] : spans[i + 1][1] + 1] == "."
            if not (len(nxt) == 1 and nxt.isalpha() and _INITIAL_GAP.fullmatch(gap) and (dotted_next or gap == ".")):
                break
            run.append(nxt)
            end = spans[i + 1][1]
            i += 1
        if run:
            tokens.append(Token("".join(run).casefold(), "upper", initials=True))
        else:
            tokens.append(_word_token(word, shouting))
        i += 1
    return tuple(tokens)


@lru_cache(maxsize=1 << 16)
def _word_token(word: str, shouting: bool) -> Token:
    """The token of one plain word (not initials), shared by every text that has it (tokens are immutable)."""
    return Token(word.casefold(), _case(word, shouting))


def drop_leading_article(tokens: tuple[Token, ...]) -> tuple[Token, ...]:
    """The tokens without a leading article, unless the article is all there is. A capital "A"
    before a lower-case word is a letter or part of a phrase ("A minor", "A cappella"), kept, with
    its case (the capital of a first word) made uninformative."""
    if len(tokens) < 2 or tokens[0].text not in ARTICLES or tokens[0].initials:
        return tokens
    if tokens[0].text == "a" and tokens[0].case == "upper" and tokens[1].case == "lower":
        return (Token("a"),) + tokens[1:]
    return tokens[1:]


def alias_tokens(alias: str) -> tuple[Token, ...]:
    """Tokens of a gold alias, without a leading or catalogue-form ("Beatles, The") article."""
    catalogue = _CATALOGUE_ARTICLE.match(alias)
    return drop_leading_article(tokenize(catalogue.group(1) if catalogue else alias))


def token_matches(needle: Token, hay: Token) -> bool:
    """Same word; an abbreviation or letter name (written in capitals) only where capitals are too."""
    return needle.text == hay.text and (needle.case != "upper" or hay.case in ("upper", "caps"))


def contains(hay: Sequence[Token], needle: Sequence[Token]) -> bool:
    """Whether the (non-empty) token sequence ``needle`` occurs contiguously in ``hay``; where it is
    all of ``hay`` (the answer is just "us" or "a"), case tells nothing and only the words count."""
    n = len(needle)
    if not n:
        return False
    if n == len(hay):
        return all(a.text == b.text for a, b in zip(needle, hay))
    return any(all(token_matches(a, b) for a, b in zip(needle, hay[i : i + n])) for i in starts(hay, needle))


def starts(hay: Sequence[Token], needle: Sequence[Token]) -> list[int]:
    """The positions where the needle may start in the hay: where its first word is, with room for the
    rest (a needle longer than the hay starts nowhere). Only these can match, as a match needs the
    same words."""
    stop = len(hay) - len(needle) + 1  # (list.index reads a stop below 0 from the end)
    if not needle or stop <= 0:
        return []
    texts = [t.text for t in hay]
    first = needle[0].text
    out: list[int] = []
    i = -1
    while True:
        try:
            i = texts.index(first, i + 1, stop)
        except ValueError:
            return out
        out.append(i)


def normalize(text: str) -> str:
    """The text's token words, lower case, single spaces: "Jean-Paul  Sartre!" -> "jean paul sartre"."""
    return " ".join(t.text for t in tokenize(text))


def key_form(text: str) -> str:
    """A form that keeps everything the rule-based judges look at (for dedup and cache keys)."""
    return " ".join(f"{t.text}/{t.case}" + ("." if t.initials else "") for t in tokenize(text))
