"""The paper's training-free baselines: Prob, N-Prob, Consis-Lex, Consis-Sem, Verbal-0/10."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from elical.confidence.base import Estimator, register
from elical.records import Record


def _prob(records: Sequence[Record]) -> np.ndarray:
    out = []
    for r in records:
        total = r.greedy_cumulative_logprob if r.greedy_cumulative_logprob is not None else sum(r.greedy_logprobs)
        out.append(math.exp(total))
    return np.array(out)


def _nprob(records: Sequence[Record]) -> np.ndarray:
    # An empty greedy answer has no tokens to average over: missing, not a made-up number.
    return np.array([math.exp(np.mean(r.greedy_logprobs)) if r.greedy_logprobs else math.nan for r in records])


def _consis_sem(records: Sequence[Record]) -> np.ndarray:
    return np.array([np.mean(r.sample_consistent) if r.sample_consistent else math.nan for r in records])


class _RougeL:
    """ROUGE-L F1 (Google's rouge-score) with per-string tokenisation and pair results memoised.

    Sampled answers repeat a lot; memoising keeps a 2M-pair evaluation to the distinct pairs.
    """

    def __init__(self) -> None:
        from rouge_score import rouge_scorer, tokenize

        self._scorer = rouge_scorer.RougeScorer(["rougeL"])
        self._tokenize = tokenize.tokenize
        self._lcs = rouge_scorer._score_lcs
        self._tokens: dict[str, tuple[str, ...]] = {}
        self._pairs: dict[tuple[tuple[str, ...], tuple[str, ...]], float] = {}

    def tokens(self, text: str) -> tuple[str, ...]:
        cached = self._tokens.get(text)
        if cached is None:
            cached = self._tokens[text] = tuple(self._tokenize(text, None))
        return cached

    def f1(self, reference: str, candidate: str) -> float:
        key = (self.tokens(reference), self.tokens(candidate))
        cached = self._pairs.get(key)
        if cached is None:
            cached = self._pairs[key] = self._lcs(list(key[0]), list(key[1])).fmeasure
        return cached


def _consis_lex(records: Sequence[Record]) -> np.ndarray:
    rouge = _RougeL()
    return np.array([np.mean([rouge.f1(r.greedy_response, s) for s in r.samples]) for r in records])


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
register(Estimator("Verbal-0", ("verbal:verbal-0",), _verbal("verbal-0"), "stated confidence, zero-shot"))
register(Estimator("Verbal-10", ("verbal:verbal-10",), _verbal("verbal-10"), "stated confidence, 10 examples"))
