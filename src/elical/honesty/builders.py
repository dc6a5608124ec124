"""Training data of the Alignment-for-Honesty methods, built from records with k judged samples.

Expected accuracy of a question = share of its k samples judged correct. The answer used for a
question is its greedy answer when that is correct, else its first correct sample.

* ``sft``: plain SFT baseline, always answers (the gold answer when no answer of the model is right);
* ``absolute``: answers when the model has a correct answer (and expected accuracy >= the
  threshold), else the refusal sentence;
* ``confidence-num`` / ``confidence-verb``: like ABSOLUTE but the answer is prefixed with the
  expected accuracy, in numbers or words; refuses when no sample is correct;
* ``multisample``: one example per sample: the sample when correct, else the refusal sentence.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from elical.honesty.config import METHODS, HonestyConfig
from elical.records import Record

_EPS = 1e-9


class HonestyInputError(ValueError):
    """Records cannot be used by an Alignment-for-Honesty step; says which records and what is missing."""


@dataclass
class SFTExample:
    """One supervised example: the question (prompted at tuning time) and the target completion."""

    id: str
    question: str
    completion: str
    method: str
    refusal: bool
    expected_accuracy: float
    meta: dict[str, Any] = field(default_factory=dict)


def _ids(records: Sequence[Record], limit: int = 5) -> str:
    shown = ", ".join(r.id for r in records[:limit])
    return shown + (f" (and {len(records) - limit} more)" if len(records) > limit else "")


def check_records(records: Sequence[Record], *, need_samples: bool = True, need_greedy: bool = False) -> list[Record]:
    """Stop with an error naming what is missing before any work; returns the usable records.

    Records whose annotation failed (``failure`` set) are left out with a warning saying how many.
    """
    if not records:
        raise HonestyInputError("no records given")
    usable = [r for r in records if not r.failed]
    if len(usable) < len(records):
        failed = [r for r in records if r.failed]
        warnings.warn(f"leaving out {len(failed)} record(s) whose annotation failed: {_ids(failed)}", stacklevel=2)
    if not usable:
        raise HonestyInputError(f"all {len(records)} records failed annotation; nothing to use")
    if need_samples:
        no_samples = [r for r in usable if not r.samples]
        if no_samples:
            raise HonestyInputError(
                f"{len(no_samples)} of {len(usable)} records have no sampled answers ('sampling_response'); "
                f"the honesty methods need k samples per question: {_ids(no_samples)}"
            )
        no_correct = [r for r in usable if r.sample_correct is None]
        if no_correct:
            raise HonestyInputError(
                f"{len(no_correct)} of {len(usable)} records have no correctness of their samples "
                f"('sampling_correctness'); annotate them with a correctness judge first: {_ids(no_correct)}"
            )
    if need_greedy:
        no_greedy = [r for r in usable if r.greedy_response is None or r.greedy_correct is None]
        if no_greedy:
            raise HonestyInputError(
                f"{len(no_greedy)} of {len(usable)} records have no greedy answer or no greedy correctness "
                f"('greedy_response', 'greedy_correctness'): {_ids(no_greedy)}"
            )
    return usable


def expected_accuracy(rec: Record) -> float:
    """Share of the record's samples judged correct."""
    if not rec.samples or rec.sample_correct is None:
        raise HonestyInputError(f"record {rec.id} has no judged samples")
    return sum(rec.sample_correct) / len(rec.sample_correct)


def best_answer(rec: Record) -> str | None:
    """The greedy answer when correct, else the first correct sample, else None."""
    if rec.greedy_correct and rec.greedy_response is not None:
        return rec.greedy_response
    for text, ok in zip(rec.samples, rec.sample_correct or []):
        if ok:
            return text
    return None


def gold_answer(rec: Record, config: HonestyConfig | None = None) -> str:
    """The first gold alias as a sentence (the authors' SFT target when the model has no right answer);
    as written when ``config.answer_case`` is "keep"."""
    text = rec.answers[0].strip()
    if config is not None and config.answer_case == "keep":
        return text
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def verbal_phrase(accuracy: float, config: HonestyConfig) -> str:
    """The CONFIDENCE-VERB phrasing for an expected accuracy."""
    for level in config.verb_levels:
        if accuracy <= level.up_to + _EPS:
            return level.text
    return config.verb_levels[-1].text


def _lower_first(text: str) -> str:
    """Lower-case the first letter so the answer continues the verbal phrasing (keeps "B)" and "A.")."""
    if len(text) >= 2 and text[0].isupper() and text[1] in ").":
        return text
    if len(text) == 1 and text.isupper():
        return text
    return text[:1].lower() + text[1:]


def _example(rec: Record, completion: str, method: str, refusal: bool, accuracy: float, **meta: Any) -> SFTExample:
    return SFTExample(rec.id, rec.question, completion, method, refusal, accuracy, dict(meta))


def _one(rec: Record, method: str, config: HonestyConfig) -> list[SFTExample]:
    accuracy = expected_accuracy(rec)
    answer = best_answer(rec)
    n_correct = sum(rec.sample_correct or [])
    if method == "sft":
        return [_example(rec, answer if answer is not None else gold_answer(rec, config), method, False, accuracy,
                         source="model" if answer is not None else "gold")]
    if method == "absolute":
        if answer is not None and accuracy >= config.absolute_threshold - _EPS:
            return [_example(rec, answer, method, False, accuracy)]
        return [_example(rec, config.refusal, method, True, accuracy)]
    if method in ("confidence-num", "confidence-verb"):
        if n_correct == 0 or answer is None:
            return [_example(rec, config.refusal, method, True, accuracy)]
        if method == "confidence-num":
            template = config.num_low if accuracy <= config.num_split + _EPS else config.num_high
            prefix = template.replace("{percent}", str(round(accuracy * 100)))
            return [_example(rec, f"{prefix} {answer}", method, False, accuracy)]
        return [_example(rec, verbal_phrase(accuracy, config)
                             + (answer if config.answer_case == "keep" else _lower_first(answer)), method, False, accuracy)]
    if method == "multisample":
        return [
            _example(rec, text if ok else config.refusal, method, not ok, accuracy, sample=i)
            for i, (text, ok) in enumerate(zip(rec.samples, rec.sample_correct or []))
        ]
    raise ValueError(f"unknown method '{method}'; expected one of {', '.join(METHODS)}")


def _balance(records: list[Record], seed: int) -> list[Record]:
    """Equal numbers of known (some correct answer) and unknown questions, as the paper's training set."""
    known = [r for r in records if best_answer(r) is not None]
    unknown = [r for r in records if best_answer(r) is None]
    n = min(len(known), len(unknown))
    if n == 0:
        raise HonestyInputError(
            f"cannot balance known and unknown questions: {len(known)} known, {len(unknown)} unknown"
        )
    rng = random.Random(seed)
    keep = {r.id for r in rng.sample(known, n) + rng.sample(unknown, n)}
    return [r for r in records if r.id in keep]


def build_examples(records: Sequence[Record], method: str | None = None, config: HonestyConfig | None = None) -> list[SFTExample]:
    """The training examples of one method (``config.method`` by default), in record order."""
    config = config or HonestyConfig()
    method = method or config.method
    if method not in METHODS:
        raise ValueError(f"unknown method '{method}'; expected one of {', '.join(METHODS)}")
    usable = check_records(records)
    if config.balance:
        usable = _balance(usable, config.seed)
    return [ex for rec in usable for ex in _one(rec, method, config)]


def honesty_texts(config: HonestyConfig | None = None) -> list[str]:
    """Every wording the methods add to answers (refusal, confidence phrasings with each percent), so
    a closed-vocabulary tokenizer (the synthetic world's) can be built to spell them."""
    config = config or HonestyConfig()
    percents = [str(p) for p in range(101)]
    return ([config.refusal, config.prompt_text("")] + [lvl.text for lvl in config.verb_levels]
            + [t.replace("{percent}", p) for t in (config.num_low, config.num_high) for p in percents])


def summarize(examples: Sequence[SFTExample]) -> dict[str, Any]:
    """Counts worth recording with a training set: examples, questions, refusals."""
    return {
        "examples": len(examples),
        "questions": len({ex.id for ex in examples}),
        "refusals": sum(ex.refusal for ex in examples),
    }
