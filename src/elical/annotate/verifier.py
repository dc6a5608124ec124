"""A learned veto on the rules' positive decisions (the ``verified`` judge).

The rules of the match and answer judges were written on labelled draws of real SmolLM2 outputs, and
on draws nobody read they keep 85 % (correctness) and 80 % (consistency) of their positive decisions
right: what is left is a long tail of one-off readings that no further rule fixes (docs/judges.md). A
logistic model over sentence embeddings of (question, reply, reference) - the reference is the gold
aliases for correctness, the other reply for consistency - learns from the hand labels which positives
are wrong, and vetoes a positive decision where it finds the label 1 less likely than 0 (class-balanced
training, so the cut is at 0.5 whatever the share of positives). Multiple-choice queries are left to the
letter rules, which are exact.

A verifier is a weight vector and a bias in a ``.safetensors`` file, whose metadata records the
threshold, the embedding model, the labelled sets and item counts it was fitted on, and the library
versions (no pickle). The packaged ones (``elical/annotate/verifiers/{task}.safetensors``) are fitted on
every labelled set of tests/data/labels by ``benchmarks/verifier_fit.py``; ``elical judge-fit``
(:mod:`elical.audit.fit`) fits them on a user's own labels (``elical label-audit`` folders).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from elical.annotate.judge_registry import Task

if TYPE_CHECKING:
    from elical.annotate.judges import JudgeQuery

VERIFIER_DIR = Path(__file__).parent / "verifiers"
# veto below this probability of "right" (class-balanced fit: the even-odds cut), and scikit-learn's C (inverse L2
# strength). Both fixed before the fifteenth draw was labelled, after a look at a sweep (C 1 or 10, threshold 0.3
# to 0.7) on the eleventh to fourteenth draws (docs/judges.md)
THRESHOLD = 0.5
REGULARIZATION = 1.0
MAX_REFERENCES = 5  # gold aliases joined into the reference text (their order is the dataset's)


def reference_text(task: Task, references: Sequence[str]) -> str:
    """The text the reply is compared with: the first gold aliases joined (correctness), the other reply."""
    return " / ".join(references[:MAX_REFERENCES]) if task == "correctness" else (references[0] if references else "")


def veto_texts(query: JudgeQuery) -> tuple[str, str, str]:
    """What a veto reads of a query: (question, reply, reference), embedded for :func:`features`."""
    return query.question, query.answer, reference_text(query.task, query.references)


def features(question: np.ndarray, reply: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The model's inputs from unit-norm embeddings (rows): the three embeddings, the reply's
    element-wise product with and distance from the reference, its product with the question, the
    reference's with the question, and the three cosines."""
    cosines = [np.sum(x * y, axis=1, keepdims=True) for x, y in ((reply, reference), (question, reply), (question, reference))]
    return np.hstack([question, reply, reference, reply * reference, np.abs(reply - reference),
                      question * reply, question * reference, *cosines]).astype(np.float32)


@dataclass(frozen=True)
class Verifier:
    """A fitted veto for one task: p(right) = sigmoid(features @ weight + bias); ``meta`` says how it was fitted."""

    task: Task
    weight: np.ndarray
    bias: float
    threshold: float = THRESHOLD
    meta: Mapping[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """Eight hex digits of the parameters (part of the judge's name, so of its cache keys)."""
        payload = self.weight.astype(np.float32).tobytes() + np.float32(self.bias).tobytes() + repr(self.threshold).encode()
        return hashlib.sha1(payload).hexdigest()[:8]

    @property
    def embedding_model(self) -> str:
        """The label of the sentence model whose embeddings it was fitted on."""
        return self.meta.get("embedding_model", "")

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """p(the positive decision is right) for each row of :func:`features`."""
        if x.shape[1:] != self.weight.shape:
            raise ValueError(f"verifier for {self.task} expects {self.weight.shape[0]} features, got {x.shape[1:]} "
                             f"(fitted on embeddings of {self.embedding_model or 'an unrecorded model'})")
        from scipy.special import expit

        return np.asarray(expit(x @ self.weight + self.bias))

    def save(self, path: str | Path) -> Path:
        """Write the parameters and metadata as safetensors."""
        from safetensors.numpy import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {**self.meta, "task": self.task, "threshold": repr(self.threshold)}
        save_file({"weight": self.weight.astype(np.float32), "bias": np.array([self.bias], dtype=np.float32)}, str(path),
                  metadata={k: str(v) for k, v in meta.items()})
        return path

    @classmethod
    def load(cls, path: str | Path) -> Verifier:
        """Read a verifier :meth:`save` wrote; a clear error for anything else."""
        from safetensors import safe_open

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no verifier file (fit one with elical judge-fit)")
        with safe_open(str(path), framework="numpy") as handle:
            meta = dict(handle.metadata() or {})
            names = set(handle.keys())
            if names != {"weight", "bias"} or meta.get("task") not in ("correctness", "consistency"):
                raise ValueError(f"{path}: not a verifier (expected tensors weight and bias and a task in its metadata)")
            weight, bias = handle.get_tensor("weight"), float(handle.get_tensor("bias")[0])
        task: Task = "correctness" if meta.pop("task") == "correctness" else "consistency"
        return cls(task, weight, bias, float(meta.pop("threshold", THRESHOLD)), meta)


def verifier_path(task: Task, folder: str | Path | None = None) -> Path:
    """Where a task's verifier lies in a folder of verifiers (None: the packaged folder)."""
    return Path(folder or VERIFIER_DIR) / f"{task}.safetensors"


def packaged_verifier(task: Task, folder: str | Path | None = None) -> Verifier:
    """The verifier of a task from ``folder`` (:func:`verifier_path`; None: the packaged one)."""
    path = verifier_path(task, folder)
    verifier = Verifier.load(path)
    if verifier.task != task:
        raise ValueError(f"{path} holds a {verifier.task} verifier")
    return verifier


def fit_verifier(task: Task, x: np.ndarray, labels: Sequence[bool], meta: Mapping[str, str] | None = None,
                 regularization: float = REGULARIZATION, threshold: float = THRESHOLD, seed: int = 0) -> Verifier:
    """Fit a class-balanced logistic model on the :func:`features` of positive decisions and their hand labels
    (1: the decision is right)."""
    import sklearn
    from sklearn.linear_model import LogisticRegression

    y = np.asarray(labels, dtype=bool)
    if len(y) != len(x) or y.all() or not y.any():
        raise ValueError(f"fitting a verifier needs both labels among the positive decisions (got {int(y.sum())} right "
                         f"of {len(y)})")
    model = LogisticRegression(C=regularization, class_weight="balanced", max_iter=5000, random_state=seed)
    model.fit(x, y)
    info = {"regularization": repr(regularization), "items": str(len(y)), "right": str(int(y.sum())),
            "sklearn": sklearn.__version__, "seed": str(seed), **(meta or {})}
    return Verifier(task, model.coef_[0].astype(np.float32), float(model.intercept_[0]), threshold, info)
