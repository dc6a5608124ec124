"""The authors' short-answer correctness, ``has_answer`` (their ``post_process/utils.py``), ported
with its behaviour and its flaws, so that paper-convention numbers can use the paper's labels.

Steps: NFD (accents stay, as combining marks), lower case, ASCII punctuation to a space, SQuAD
article removal anywhere ("Vitamin A" -> "vitamin"), single spaces; then DrQA's simple tokenizer
(runs of letters/digits/marks, or any other single visible character) and containment of any
alias's token sequence. An alias that normalizes to nothing (gold "A", "The") matches every answer.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence

import regex

from elical.annotate.judges import Judge, JudgeQuery

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_TOKEN = regex.compile(r"([\p{L}\p{N}\p{M}]+)|([^\p{Z}\p{C}])", flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE)


def paper_normalize(text: str) -> str:
    """NFD, lower case, ASCII punctuation replaced by a space, articles removed, single spaces."""
    lowered = unicodedata.normalize("NFD", text).lower()
    spaced = "".join(" " if ch in _PUNCT else ch for ch in lowered)
    return " ".join(_ARTICLES.sub(" ", spaced).split())


def paper_tokens(text: str) -> list[str]:
    """The normalized text cut by the authors' simple tokenizer, lower case."""
    return [m.group().lower() for m in _TOKEN.finditer(paper_normalize(text))]


def has_answer(answers: Sequence[str], text: str) -> bool:
    """Whether any alias's token sequence occurs in the text's (an empty alias occurs everywhere)."""
    words = paper_tokens(text)
    for answer in answers:
        gold = paper_tokens(answer)
        if any(words[i : i + len(gold)] == gold for i in range(len(words) - len(gold) + 1)):
            return True
    return False


class PaperJudge(Judge):
    """Correctness as the authors' evaluation labels it (``has_answer``); multiple-choice letters
    are matched as text too, as theirs were. Consistency was an LLM judge there, so it is refused."""

    name = "paper"

    def answer_key(self, query: JudgeQuery) -> str:
        return paper_normalize(query.answer)

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        if any(q.task != "correctness" for q in queries):
            raise ValueError("the paper judge decides correctness only (the authors judged consistency with an LLM)")
        return [has_answer(q.references, q.answer) for q in queries]
