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

The code lives in :mod:`elical.annotate.judges` (the cascade judge's default front is this front, and it
builds on the match judge), and is importable from here as before.
"""

from elical.annotate.judges import (  # noqa: F401  (the front's public names, as before)
    _MATCH,
    BAND,
    LONG_ANSWER,
    OfflineFront,
    banded,
    correctness_decision,
    near_spelling,
)
