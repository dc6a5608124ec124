"""The paper's training-free baselines: Prob, N-Prob, Consis-Lex, Consis-Sem, Verbal-0/10."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from elical.confidence.base import Estimator, register
from elical.records import VERBAL_KINDS, Record


def _prob(records: Sequence[Record]) -> np.ndarray:
    out = []
    for r in records:  # score_records has checked that every record has greedy_logprobs
        total = r.greedy_cumulative_logprob if r.greedy_cumulative_logprob is not None else sum(r.greedy_logprobs or ())
        out.append(math.exp(total))
    return np.array(out)


def _nprob(records: Sequence[Record]) -> np.ndarray:
    # An empty greedy answer has no tokens to average over: missing, not a made-up number.
    return np.array([math.exp(np.mean(r.greedy_logprobs)) if r.greedy_logprobs else math.nan for r in records])


def _consis_sem(records: Sequence[Record]) -> np.ndarray:
    return np.array([np.mean(r.sample_consistent) if r.sample_consistent else math.nan for r in records])


class _RougeL:
    """ROUGE-L F1 exactly as Google's rouge-score computes it, with a C++ LCS and memoisation.

    Tokens come from rouge-score's own tokenizer; the longest common subsequence from rapidfuzz
    (rouge-score's is pure Python); F1 = 2PR / (P + R) with P = LCS/|candidate|, R = LCS/|reference|,
    as ``rouge_scorer._score_lcs``. Sampled answers repeat a lot, so pair scores are memoised.
    """

    def __init__(self) -> None:
        from rapidfuzz.distance import LCSseq
        from rouge_score import tokenize

        self._tokenize = tokenize.tokenize
        self._lcs_length = LCSseq.similarity
        self._tokens: dict[str, list[str]] = {}
        self._pairs: dict[tuple[str, str], float] = {}

    def tokens(self, text: str) -> list[str]:
        cached = self._tokens.get(text)
        if cached is None:
            cached = self._tokens[text] = self._tokenize(text, None)
        return cached

    def f1(self, reference: str, candidate: str) -> float:
        key = (reference, candidate)
        cached = self._pairs.get(key)
        if cached is None:
            ref, cand = self.tokens(reference), self.tokens(candidate)
            lcs = self._lcs_length(ref, cand) if ref and cand else 0
            cached = self._pairs[key] = 0.0 if lcs == 0 else 2 * lcs / (len(ref) + len(cand))
        return cached


def _consis_lex(records: Sequence[Record]) -> np.ndarray:
    rouge = _RougeL()  # score_records has checked that every record has a greedy response
    return np.array([np.mean([rouge.f1(r.greedy_response or "", s) for s in r.samples]) for r in records])


_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?|\.\d+)(\s*%)?")


def parse_verbal_confidence(reply: str) -> float:
    """The last number in [0, 1] in a reply ("80%" reads as 0.8); NaN when there is none."""
    found = math.nan
    for match in _NUMBER.finditer(reply):
        value = float(match.group(1))
        if match.group(2):
            value /= 100
        if 0.0 <= value <= 1.0:
            found = value
    return found


def _verbal(key: str):
    def score(records: Sequence[Record]) -> np.ndarray:
        return np.array([parse_verbal_confidence(r.verbal[key]) for r in records])

    return score


register(Estimator("Prob", ("greedy_logprobs",), _prob, "exp(sum of greedy token log-probs)"))
register(Estimator("N-Prob", ("greedy_logprobs",), _nprob, "exp(mean greedy token log-prob)"))
register(Estimator("Consis-Lex", ("greedy_response", "samples"), _consis_lex, "mean ROUGE-L F1, greedy vs samples"))
register(Estimator("Consis-Sem", ("sample_consistent",), _consis_sem, "share of samples judged consistent"))
for _kind, _shots in zip(VERBAL_KINDS, ("zero-shot", "10 examples")):
    register(Estimator(_kind.title(), (f"verbal:{_kind}",), _verbal(_kind), f"stated confidence, {_shots}"))
