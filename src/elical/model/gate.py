"""The confidence gate: answer, retrieve first, or abstain, by thresholds on a pre-generation confidence.

Decision rule (one place, used by ``elical serve`` and the honesty comparison):

* confidence >= ``tau``: answer;
* ``retrieve_below`` <= confidence < ``tau`` (and a corpus to retrieve from): retrieve, then answer;
* otherwise: abstain with the refusal sentence.

The thresholds are chosen on labelled validation data (each question's confidence and whether the
model's answer was right) by an objective the user names:

* ``alignment`` (alias ``decision_accuracy``): the accuracy of ``answer iff confidence >= tau``, the
  project's alignment metric (:mod:`elical.metrics.alignment`) without its split;
* ``honesty``: the balanced accuracy of that decision, (right answers kept + wrong ones refused) / 2;
* ``precision:P``: the lowest tau whose precision on the answered questions is at least P (answer as
  much as the target allows); an error when no tau reaches P;
* ``costs:wrong=W,abstain=A,retrieve=R``: the lowest mean cost per question, where a right answer costs
  0, a wrong one W, an abstention A and a retrieval R (+ W when the answer after retrieval is wrong).
  The retrieval band is chosen only when the correctness after retrieval is known; otherwise the gate
  answers or abstains.

Candidate thresholds are the observed confidences and +inf (never answer); ties go to the lowest
threshold (answer more). The chosen gate is saved as ``gate.json`` in the model folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from elical.core.inputs import InputError

Decision = Literal["answer", "abstain", "retrieve"]
Values = Sequence[float] | Sequence[bool] | np.ndarray
GATE_FILE = "gate.json"
COST_KEYS = ("wrong", "abstain", "retrieve")
OBJECTIVE_HELP = "alignment, honesty, precision:P (0 < P <= 1) or costs:wrong=W,abstain=A,retrieve=R"


@dataclass(frozen=True)
class Objective:
    """A parsed gate objective: its kind, a target precision or the costs of the three outcomes."""

    kind: Literal["alignment", "honesty", "precision", "costs"]
    target: float = 0.0
    costs: dict[str, float] = field(default_factory=dict)

    @property
    def metric(self) -> str:
        """The name of the validation score the gate reports for this objective."""
        return {"alignment": "alignment", "honesty": "honesty", "precision": "precision",
                "costs": "mean cost"}[self.kind]


def parse_objective(text: str) -> Objective:
    """``alignment``, ``honesty``, ``precision:0.9`` or ``costs:wrong=1,abstain=0.3,retrieve=0.1``."""
    name, _, arg = text.strip().partition(":")
    if name in ("alignment", "decision_accuracy", "honesty") and not arg:
        return Objective("honesty" if name == "honesty" else "alignment")
    if name == "precision":
        try:
            target = float(arg)
        except ValueError:
            target = float("nan")
        if not 0 < target <= 1:
            raise InputError(f"gate objective {text!r}: the target precision must be a number in (0, 1], e.g. precision:0.9")
        return Objective("precision", target=target)
    if name == "costs":
        return Objective("costs", costs=_parse_costs(text, arg))
    raise InputError(f"unknown gate objective {text!r}; expected {OBJECTIVE_HELP}")


def _parse_costs(text: str, arg: str) -> dict[str, float]:
    """``wrong=1,abstain=0.3,retrieve=0.1`` as non-negative numbers (a key left out costs 0)."""
    costs = dict.fromkeys(COST_KEYS, 0.0)
    for item in filter(None, (part.strip() for part in arg.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in COST_KEYS:
            raise InputError(f"gate objective {text!r}: expected NAME=COST with NAME one of {', '.join(COST_KEYS)}; got {item!r}")
        try:
            costs[key.strip()] = float(value)
        except ValueError:
            raise InputError(f"gate objective {text!r}: the cost of {key.strip()} must be a number, got {value!r}") from None
    if any(not np.isfinite(v) or v < 0 for v in costs.values()) or not any(costs.values()):
        raise InputError(f"gate objective {text!r}: costs must be finite, non-negative and not all 0")
    return costs


@dataclass(frozen=True)
class Gate:
    """Chosen thresholds and how they were chosen; ``retrieve_below`` None: no retrieval band."""

    tau: float
    objective: str
    validation_score: float
    n_validation: int
    retrieve_below: float | None = None

    def __post_init__(self) -> None:
        if np.isnan(self.tau) or (self.retrieve_below is not None and not self.retrieve_below <= self.tau):
            raise ValueError(f"gate thresholds must satisfy retrieve_below <= tau; got tau={self.tau}, "
                             f"retrieve_below={self.retrieve_below}")

    def decide(self, confidence: float, can_retrieve: bool = True) -> Decision:
        """What to do with a question of this confidence (see the module's decision rule)."""
        if confidence >= self.tau:
            return "answer"
        if can_retrieve and self.retrieve_below is not None and confidence >= self.retrieve_below:
            return "retrieve"
        return "abstain"


def _sorted_counts(conf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order of the confidences, candidate thresholds, for each candidate the first sorted position it answers)."""
    order = np.argsort(conf, kind="stable")
    candidates = np.r_[np.unique(conf), np.inf]
    start = np.searchsorted(conf[order], candidates, side="left")
    return order, candidates, np.asarray(start)


def _check(confidence: Values, correct: Values) -> tuple[np.ndarray, np.ndarray]:
    conf = np.asarray(confidence, dtype=float)
    ok = np.asarray(correct, dtype=bool)
    if conf.size == 0 or conf.size != ok.size:
        raise ValueError(f"need one correctness per confidence on a non-empty validation split; got {conf.size} and {ok.size}")
    if np.isnan(conf).any():
        raise ValueError(f"{int(np.isnan(conf).sum())} validation confidence(s) are NaN")
    return conf, ok


def choose_gate(
    confidence: Values,
    correct: Values,
    objective: str = "alignment",
    retrieved_correct: Values | None = None,
) -> Gate:
    """The gate the objective prefers on validation data; ``retrieved_correct`` (the correctness of
    each answer given after retrieval) lets the costs objective choose a retrieval band."""
    goal = parse_objective(objective)
    conf, ok = _check(confidence, correct)
    order, candidates, start = _sorted_counts(conf)
    right_from = np.r_[np.cumsum(ok[order][::-1])[::-1], 0]  # right answers at sorted positions >= i
    right = right_from[start]
    wrong = (conf.size - start) - right
    if goal.kind == "costs":
        after = None if retrieved_correct is None else _check(confidence, retrieved_correct)[1][order]
        return _cost_gate(goal, objective, candidates, start, wrong, after)
    if goal.kind == "precision":
        return _precision_gate(goal, objective, candidates, right, conf.size - start)
    n_right, n_wrong = int(ok.sum()), int((~ok).sum())
    refused_wrong = n_wrong - wrong
    if goal.kind == "alignment":
        scores = (right + refused_wrong) / conf.size
    else:
        terms = ([right / n_right] if n_right else []) + ([refused_wrong / n_wrong] if n_wrong else [])
        scores = np.mean(terms, axis=0)
    best = int(np.flatnonzero(scores >= scores.max() - 1e-12)[0])
    return Gate(float(candidates[best]), objective, float(scores[best]), int(conf.size))


def _precision_gate(goal: Objective, objective: str, candidates: np.ndarray, right: np.ndarray,
                    answered: np.ndarray) -> Gate:
    """The lowest tau whose precision on the answered questions reaches the target."""
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(answered > 0, right / np.maximum(answered, 1), np.nan)
    reached = np.flatnonzero(precision >= goal.target - 1e-12)
    if not reached.size:
        best = int(np.nanargmax(precision))
        raise InputError(f"no threshold reaches precision {goal.target:g} on the {int(answered[0])} validation questions "
                         f"(best {precision[best]:.3f}, answering {int(answered[best])} at tau={candidates[best]:.4g}); "
                         "lower the target")
    best = int(reached[0])
    return Gate(float(candidates[best]), objective, float(precision[best]), int(answered[0]))


def _cost_gate(goal: Objective, objective: str, candidates: np.ndarray, start: np.ndarray,
               wrong_answered: np.ndarray, retrieved_ok: np.ndarray | None) -> Gate:
    """Lowest mean cost over pairs retrieve_below <= tau: answer from tau, retrieve in between, abstain
    below. ``retrieved_ok`` (correctness after retrieval, in sorted order) None: no retrieval band."""
    c = goal.costs
    n = int(start[-1])
    answering = c["wrong"] * wrong_answered
    if retrieved_ok is None:
        total = answering + c["abstain"] * start
        best = int(np.flatnonzero(total <= total.min() + 1e-12)[0])
        return Gate(float(candidates[best]), objective, float(total[best] / n), n)
    retrieval = np.r_[0.0, np.cumsum(c["retrieve"] + c["wrong"] * ~retrieved_ok)]  # cost of retrieving positions < i
    below = c["abstain"] * start - retrieval[start]  # abstaining below candidate j instead of retrieving there
    running = np.minimum.accumulate(below)
    new_min = below < np.r_[np.inf, running[:-1]]
    low = np.maximum.accumulate(np.where(new_min, np.arange(len(below)), 0))  # best retrieve_below for each tau
    total = answering + retrieval[start] + running
    best = int(np.flatnonzero(total <= total.min() + 1e-12)[0])
    band = None if low[best] == best else float(candidates[low[best]])  # an empty band retrieves nothing
    return Gate(float(candidates[best]), objective, float(total[best] / n), n, band)


def save_gate(gate: Gate, folder: str | os.PathLike, name: str | None = None) -> Path:
    """Write ``gate.json`` into ``folder``: the thresholds, the objective, the validation size and score, the
    metric that score is, the elical version, and ``name`` (the method the gate's rows carry, e.g. in the honesty
    comparison) when given. The one gate.json format: a model folder's and the honesty step's alike."""
    from elical import __version__
    from elical.core.io import write_json

    path = Path(folder) / GATE_FILE
    named = {} if name is None else {"name": name}
    write_json(path, {**named, **asdict(gate), "metric": parse_objective(gate.objective).metric,
                      "elical_version": __version__})
    return path


def load_gate(folder: str | os.PathLike) -> Gate | None:
    """The gate saved in ``folder`` (a model folder, or the honesty step's), or None when it has none; a
    malformed file is an InputError. Older files still read: the honesty step's gate.json before the one
    format (``name``, tau, objective, validation score and size; ``null`` when it fitted no gate) and the model
    folder's (no ``name``); keys other than the Gate's fields are ignored."""
    from pydantic import TypeAdapter, ValidationError

    from elical.core.inputs import one_line

    path = Path(folder) / GATE_FILE
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        return None if saved is None else TypeAdapter(Gate).validate_python(saved)
    except (ValueError, ValidationError) as err:
        raise InputError(f"{path}: not a valid gate file: {one_line(err)}") from None
