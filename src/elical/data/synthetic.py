"""Synthetic annotations of real questions: records with known structure, for tests and benchmarks.

Each question gets a hidden probability ``p`` that the model knows the answer. The greedy answer
is a gold alias with probability ``p`` (else another question's answer), the k samples repeat the
greedy answer more often the larger ``p`` is, and token log-probabilities follow ``p`` with noise.
So every baseline carries some signal, as on a real model, and nothing needs a model to run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from elical.records import Record


def synthetic_records(
    questions: Sequence[tuple[str, list[str]]], dataset: str, k: int = 20, seed: int = 0, split: str = "test"
) -> list[Record]:
    """Annotated records for (question, gold aliases) pairs, deterministic for a seed."""
    rng = np.random.default_rng(seed)
    pool = [answers[0] for _, answers in questions]
    records = []
    for question, answers in questions:
        p = rng.beta(0.8, 1.2)

        def wrong() -> str:
            return str(pool[rng.integers(len(pool))]) if len(pool) > 1 else "unknown"

        greedy = answers[0] if rng.random() < p else wrong()
        samples = [
            greedy if rng.random() < 0.3 + 0.7 * p else (answers[0] if rng.random() < p else wrong()) for _ in range(k)
        ]
        tokens = greedy.split() or [""]
        logprobs = [float(min(0.0, math.log(max(p, 1e-3)) / len(tokens) + rng.normal(0, 0.3))) for _ in tokens]
        gold = {a.lower() for a in answers}
        records.append(
            Record(
                question=question,
                answers=list(answers),
                dataset=dataset,
                split=split,
                greedy_response=greedy,
                greedy_tokens=tokens,
                greedy_logprobs=logprobs,
                greedy_correct=int(greedy.lower() in gold),
                samples=samples,
                sample_correct=[int(s.lower() in gold) for s in samples],
                sample_consistent=[int(s == greedy) for s in samples],
                verbal={"verbal-0": f"{min(1.0, round(p + rng.normal(0, 0.2), 1)):.1f}"},
            )
        )
    return records
