"""The offline front of the cascade judge: per task, an offline decision, or None to ask the LLM.

- Correctness (the rules of the match judge): a gold alias found in the answer is right, unless the
  answer is longer than ``long_answer`` tokens (it may name the alias while answering something
  else); an answer that shares no word with any gold alias and spells none nearly ("Africa" /
  "African") is wrong; the rest (a shared word, a near spelling, a long answer) goes to the LLM.
  Multiple choice: the option letter decides (no option picked is wrong).
- Consistency (the answer judge): its rules on the answers' cores decide where they can; the cosine
  similarity of what the two answers do not share decides only outside a band ``threshold ± band``
  (``>= high``: same, ``<= low``: different), the LLM inside it. Without an embedding model, the rules
  alone, and the LLM everything they leave open.

``BAND`` is a round margin, a tenth of the cosine scale on each side of the threshold, not fitted on
labelled pairs: several times the threshold's own uncertainty (refitted on 4/5 of the labelled pairs it
moves by about 0.03). ``benchmarks/judge_savings.py`` measures the front in-sample and cross-validated,
and how the figures move with the band and ``long_answer``.
"""

from __future__ import annotations

from collections.abc import Sequence

from elical.annotate.judge_models import AnswerJudge, compare_query
from elical.annotate.judges import JudgeQuery, MatchJudge, choice_decision
from elical.annotate.text import alias_tokens, tokenize

LONG_ANSWER = 12  # tokens above which a found alias goes to the LLM (the most with no error on the pair file)
BAND = 0.1  # half-width of the answer judge's uncertainty band, in cosine similarity
_MATCH = MatchJudge()


def near_spelling(answer: Sequence[str], gold: Sequence[str]) -> bool:
    """An answer word that begins with all but the last letter of a gold word of 4+ letters and is
    not that word ("African" / "Africa", "Kenyan" / "Kenya"): an inflection a match rule misses."""
    return any(len(g) >= 4 and a != g and a[: len(g) - 1] == g[: len(g) - 1] for a in answer for g in gold)


def correctness_decision(query: JudgeQuery, long_answer: int = LONG_ANSWER) -> bool | None:
    """The correctness front's decision of one query, None where the LLM should decide."""
    if query.choices:
        return bool(choice_decision(query))
    if _MATCH.sure(query):
        return None if len(tokenize(query.answer)) > long_answer else True
    answer = {t.text for t in tokenize(query.answer)}
    gold = {t.text for ref in query.references for t in alias_tokens(ref)}
    return None if answer & gold or near_spelling(sorted(answer), sorted(gold)) else False


def banded(similarity: float, low: float, high: float) -> bool | None:
    """Same (True) at or above ``high``, different (False) at or below ``low``, None in between."""
    return True if similarity >= high else False if similarity <= low else None


class OfflineFront:
    """Decides what it can offline (see the module docstring); ``name`` records its rules and settings."""

    def __init__(self, answer: AnswerJudge | None = None, long_answer: int = LONG_ANSWER, band: float = BAND):
        if long_answer < 1 or not 0.0 <= band <= 1.0:
            raise ValueError(f"long_answer must be at least 1 and band within [0, 1], got {long_answer} and {band}")
        self.answer = answer
        self.long_answer = long_answer
        self.band = band
        consistency = f"{answer.name},band={band:g}" if answer is not None else "answer-rules"
        self.name = f"{MatchJudge.name},long={long_answer}+{consistency}"

    def edges(self) -> tuple[float, float] | None:
        """The band's (low, high) similarity edges; None without an embedding model."""
        if self.answer is None:
            return None
        return self.answer.threshold - self.band, self.answer.threshold + self.band

    def decide(self, queries: Sequence[JudgeQuery]) -> list[bool | None]:
        """One decision per query, None where the LLM should decide."""
        out: list[bool | None] = [None] * len(queries)
        consistency = [i for i, q in enumerate(queries) if q.task == "consistency"]
        for i, q in enumerate(queries):
            if q.task == "correctness":
                out[i] = correctness_decision(q, self.long_answer)
        found = [compare_query(queries[i]) for i in consistency]
        edges = self.edges()
        sims = self.answer.open_similarities(found) if self.answer is not None else [None] * len(found)
        for i, comparison, sim in zip(consistency, found, sims):
            if comparison.decision is not None:
                out[i] = comparison.decision
            elif sim is not None and edges is not None:
                out[i] = banded(sim, *edges)
        return out
