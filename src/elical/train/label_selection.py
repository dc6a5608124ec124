"""Which pool questions to label: an order over the pool, from the stage-1 (Eli-Only) model, no labels read.

Every strategy gives an ORDER of the whole pool; a budget of b labels is its first b questions, so a
smaller budget's questions lie inside a larger one's (nested). Each strategy orders each dataset's
questions on its own, then the datasets interleave as in :func:`elical.train.budgets.budget_order` (:func:`~elical.train.budgets.interleave`)
(every prefix keeps each dataset's share of the pool within one question):

- ``random``: today's seeded draw, exactly :func:`~elical.train.budgets.budget_order` (the reference);
- ``stratified-confidence``: even coverage of the stage-1 confidence range. Pick i goes to the unpicked
  question whose confidence is nearest the i-th point of a seeded van der Corput sequence stretched over
  [min, max] of the dataset's confidences (every prefix spreads over the range, not over the density);
- ``uncertainty``: least sure first: confidence nearest 0.5 (|c - 0.5| ascending; the seed breaks ties);
- ``diverse``: k-center greedy on the stage-1 model's last-prompt-token hidden states (the features its
  head reads): a seeded first question, then always the one farthest (Euclidean) from those picked;
- ``uncertain-diverse``: k-center greedy whose distance is weighted by uncertainty, 1 - |2c - 1| (a
  question at 0.5 counts its whole distance, one at 0 or 1 none of it): far from the picked AND unsure.

Ties break by a seeded hash of the record id, so an order depends on the seed, the record ids and the
model's outputs, never on file order or on labels.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import numpy as np

from elical.core.choices import LabelStrategy
from elical.core.inputs import InputError, text_lines
from elical.core.strict_json import JsonError, loads
from elical.records import Record
from elical.train.budgets import budget_order, interleave

Strategy = LabelStrategy  # the names, in elical.core.choices (the CLI and the run config offer them)
STRATEGIES: tuple[str, ...] = get_args(Strategy)
NEEDS_FEATURES = frozenset({"diverse", "uncertain-diverse"})  # strategies that read hidden states
SELECTION_FILE = "selection.json"  # in a trained model's folder, when its labels were selected


def check_strategy(name: str) -> Strategy:
    """``name`` when it is a strategy, else an InputError listing them."""
    if name not in STRATEGIES:
        raise InputError(f"unknown label selection strategy {name!r}; expected one of {', '.join(STRATEGIES)}")
    return name  # type: ignore[return-value]


def _hash_key(seed: int, text: str) -> str:
    return hashlib.sha1(f"{seed}\x1flabel-selection\x1f{text}".encode()).hexdigest()


def _van_der_corput(i: int) -> float:
    """The i-th point (i >= 0) of the base-2 van der Corput sequence: 0, 1/2, 1/4, 3/4, 1/8, ..."""
    value, denominator = 0.0, 1.0
    while i:
        denominator *= 2
        i, bit = divmod(i, 2)
        value += bit / denominator
    return value


def confidence_coverage_order(confidence: np.ndarray, ids: Sequence[str], seed: int) -> list[int]:
    """Positions in an order that covers the confidence range evenly (``stratified-confidence``, one dataset)."""
    n = len(confidence)
    if n == 0:
        return []
    low, high = float(confidence.min()), float(confidence.max())
    offset = random.Random(_hash_key(seed, "offset")).random()
    tie = np.array([int(_hash_key(seed, i)[:12], 16) for i in ids], dtype=np.float64) / 16.0 ** 12
    free = np.ones(n, dtype=bool)
    order: list[int] = []
    for i in range(n):
        target = low + (high - low) * ((_van_der_corput(i) + offset) % 1.0)
        distance = np.abs(confidence - target) + 1e-12 * tie  # nearest first; the seeded hash breaks ties
        distance[~free] = np.inf
        pick = int(np.argmin(distance))
        free[pick] = False
        order.append(pick)
    return order


def uncertainty_order(confidence: np.ndarray, ids: Sequence[str], seed: int) -> list[int]:
    """Positions by |confidence - 0.5| ascending (``uncertainty``, one dataset); ties by a seeded hash."""
    return sorted(range(len(ids)), key=lambda p: (abs(float(confidence[p]) - 0.5), _hash_key(seed, ids[p])))


def k_center_order(features: np.ndarray, ids: Sequence[str], seed: int,
                   weight: np.ndarray | None = None) -> list[int]:
    """Positions in k-center greedy order (``diverse``, one dataset): a seeded first pick, then the question
    whose distance to its nearest picked one (times ``weight``, when given) is largest; ties by a seeded hash."""
    n = len(ids)
    if n == 0:
        return []
    x = np.asarray(features, dtype=np.float64)
    rank = np.empty(n)  # seeded tie-break: smaller hash first among equal scores
    rank[sorted(range(n), key=lambda p: _hash_key(seed, ids[p]))] = np.arange(n)
    w = np.ones(n) if weight is None else np.asarray(weight, dtype=np.float64)
    first = int(np.argmin(rank))
    order = [first]
    nearest = np.linalg.norm(x - x[first], axis=1)
    free = np.ones(n, dtype=bool)
    free[first] = False
    for _ in range(n - 1):
        score = nearest * w
        score = np.where(free, score, -np.inf)
        best = score.max()
        pick = int(np.argmin(np.where(score == best, rank, np.inf)))
        free[pick] = False
        order.append(pick)
        nearest = np.minimum(nearest, np.linalg.norm(x - x[pick], axis=1))
    return order


def uncertainty_weight(confidence: np.ndarray) -> np.ndarray:
    """1 - |2c - 1|: 1 at confidence 0.5, 0 at 0 and 1 (``uncertain-diverse``'s weight)."""
    return 1.0 - np.abs(2.0 * np.asarray(confidence, dtype=np.float64) - 1.0)


def selection_order(strategy: str, records: Sequence[Record], seed: int,
                    confidence: Sequence[float] | np.ndarray | None = None,
                    features: np.ndarray | None = None) -> list[int]:
    """Indices of ``records`` in ``strategy``'s labelling order (see the module doc). ``confidence``: the stage-1
    confidence per record (every strategy but random); ``features``: its hidden state per record (diverse,
    uncertain-diverse). Reads the records' ids and datasets only."""
    strategy = check_strategy(strategy)
    if strategy == "random":
        return budget_order(records, seed)
    if confidence is None or len(confidence) != len(records):
        raise ValueError(f"strategy {strategy} needs one stage-1 confidence per record")
    conf = np.asarray(confidence, dtype=np.float64)
    if strategy in NEEDS_FEATURES and (features is None or len(features) != len(records)):
        raise ValueError(f"strategy {strategy} needs one hidden state per record")
    by_dataset: dict[str, list[int]] = defaultdict(list)
    for i, rec in enumerate(records):
        by_dataset[rec.dataset].append(i)
    ordered: dict[str, list[int]] = {}
    for dataset, members in by_dataset.items():
        ids = [records[i].id for i in members]
        c = conf[members]
        if strategy == "stratified-confidence":
            positions = confidence_coverage_order(c, ids, seed)
        elif strategy == "uncertainty":
            positions = uncertainty_order(c, ids, seed)
        else:
            assert features is not None
            x = np.asarray(features, dtype=np.float64)[members]
            positions = k_center_order(x, ids, seed, uncertainty_weight(c) if strategy == "uncertain-diverse" else None)
        ordered[dataset] = [members[p] for p in positions]
    return interleave(ordered, seed)


def order_digest(ids: Sequence[str]) -> str:
    """A short digest of an order of record ids (recorded, so a changed order is noticed)."""
    return hashlib.sha256(json.dumps(list(ids)).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class LabelOrder:
    """A strategy's order of the pool's record ids, with what made it (the stage-1 model, the seed) and the
    stage-1 confidence of each id (None for random without a model). ``source``: the selection file it was read
    from (:func:`read_selection`), whose ids are the chosen questions only (not the whole pool's order)."""

    strategy: str
    seed: int
    ids: tuple[str, ...]
    confidence: dict[str, float] | None = None
    model: str | None = None
    source: str | None = None

    @property
    def complete(self) -> bool:
        """Whether the order covers the whole pool (a strategy's), rather than a selection file's chosen questions."""
        return self.source is None

    @property
    def digest(self) -> str:
        """:func:`order_digest` of the order."""
        return order_digest(self.ids)

    def prefix(self, budget: int) -> list[str]:
        """The first ``budget`` ids (an InputError when the pool has fewer)."""
        check_budget(budget, len(self.ids))
        return list(self.ids[:budget])

    def settings(self) -> dict[str, Any]:
        """What a trained model records of it (its settings digest changes with the strategy or the order)."""
        return {"strategy": self.strategy, "order": self.digest}

    def record(self, budget: int | None, labelled: Collection[str] | None = None) -> dict[str, Any]:
        """``selection.json``'s content: strategy, seed, stage-1 model, order digest and the chosen ids: the first
        ``budget`` of the order (all when None) among the ``labelled`` ids (all when None), in order."""
        among = [i for i in self.ids if labelled is None or i in labelled]
        chosen = among if budget is None else among[:budget]
        source = {"file": self.source} if self.source is not None else {}
        return {"strategy": self.strategy, "seed": self.seed, "model": self.model, "order": self.digest,
                "budget": budget, "pool_size": len(self.ids), "chosen": chosen, **source}


def check_budget(budget: int, pool_size: int) -> None:
    """An InputError unless 1 <= budget <= pool_size."""
    if budget < 1:
        raise InputError(f"--budget must be a positive number of questions, got {budget}")
    if budget > pool_size:
        raise InputError(f"--budget {budget} exceeds the pool's {pool_size} questions; lower --budget to at most "
                         f"{pool_size}")


def stage1_outputs(model_dir: str | os.PathLike, records: Sequence[Record], *, features: bool,
                   device: str | None = None, show_progress: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """The stage-1 model's confidence per record (as ``elical predict`` computes it) and, with ``features``, the
    final hidden state of each prompt's last token (what its head reads, as head-only training caches it)."""
    from rich.progress import Progress

    from elical.model.loading import pick_device
    from elical.model.model_folder import find_model_folder, read_saved
    from elical.model.network import ConfidenceModel
    from elical.train.batching import tokenize_prompts
    from elical.train.predict import last_token_outputs, predict_records, record_prompts

    folder = find_model_folder(model_dir)
    read_saved(folder)  # a folder that holds no model: FileNotFoundError saying so
    model = ConfidenceModel.load(folder, device=pick_device(device or "auto"))
    confidence = np.asarray(predict_records(model, records, show_progress=show_progress), dtype=np.float64)
    if not features:
        return confidence, None
    seqs, _ = tokenize_prompts(model.tokenizer, record_prompts(model, records), model.config.max_length)
    with Progress(disable=not show_progress, transient=True) as bar:
        task = bar.add_task("hidden states", total=len(records))
        hidden = last_token_outputs(model, seqs, range(len(seqs)), model.tokenizer.pad_token_id, head=False,
                                    progress=lambda n: bar.advance(task, n))
    return confidence, np.stack([hidden[i].numpy() for i in range(len(seqs))])


def select_labels(records: Sequence[Record], model_dir: str | os.PathLike | None, *, strategy: str, seed: int,
                  device: str | None = None, show_progress: bool = True) -> LabelOrder:
    """``strategy``'s order of the pool ``records`` (ids unique) with the stage-1 model in ``model_dir`` (random
    reads no model when ``model_dir`` is None). Reads no correctness label."""
    strategy = check_strategy(strategy)
    ids = [r.id for r in records]
    if len(set(ids)) != len(ids):
        raise InputError("the pool's record ids are not unique: a selection names questions by id")
    if not records:
        raise InputError("the pool holds no questions")
    confidence = feats = None
    if model_dir is not None:
        confidence, feats = stage1_outputs(model_dir, records, features=strategy in NEEDS_FEATURES,
                                           device=device, show_progress=show_progress)
    elif strategy != "random":
        raise InputError(f"strategy {strategy} needs the stage-1 model (--model)")
    return label_order(strategy, records, seed, confidence, feats, None if model_dir is None else str(model_dir))


def cached_label_order(records: Sequence[Record], model_dir: str | os.PathLike, *, strategy: str, seed: int,
                       cache: str | os.PathLike, device: str | None = None) -> LabelOrder:
    """:func:`select_labels`, kept in the JSON file ``cache`` and read from it while the stage-1 model's
    weights, the pool's ids, the strategy and the seed are those it was made with (a run computes a seed's
    order once for all its budgets and methods)."""
    from elical.core.fingerprint import path_version
    from elical.core.io import write_json
    from elical.model.model_folder import find_model_folder

    folder = find_model_folder(model_dir)
    made_with = {"strategy": strategy, "seed": seed, "weights": path_version(folder),
                 "pool": order_digest(sorted(r.id for r in records))}
    path = Path(cache)
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("made_with") == made_with:
            return LabelOrder(strategy, seed, tuple(saved["ids"]), saved["confidence"], saved["model"])
    order = select_labels(records, folder, strategy=strategy, seed=seed, device=device, show_progress=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"made_with": made_with, "model": order.model, "ids": list(order.ids),
                      "confidence": order.confidence})
    return order


def label_order(strategy: str, records: Sequence[Record], seed: int, confidence: Sequence[float] | np.ndarray | None = None,
                features: np.ndarray | None = None, model: str | None = None) -> LabelOrder:
    """:func:`selection_order` as a :class:`LabelOrder` of record ids (``model``: where the outputs came from)."""
    ids = [r.id for r in records]
    order = selection_order(strategy, records, seed, confidence, features)
    return LabelOrder(strategy, seed, tuple(ids[i] for i in order),
                      None if confidence is None else {ids[i]: float(confidence[i]) for i in range(len(ids))}, model)


def write_selection(path: str | os.PathLike, order: LabelOrder, *, budget: int, records: Sequence[Record],
                    config: dict[str, Any]) -> int:
    """One JSON line per chosen question, in order: rank, record id, dataset, stage-1 confidence, and the
    selection's config (strategy, seed, budget, model, pool, order digest). Returns the count."""
    from elical.core.io import atomic_write

    chosen = order.prefix(budget)
    dataset = {r.id: r.dataset for r in records}
    settings = {**config, "strategy": order.strategy, "seed": order.seed, "budget": budget, "model": order.model,
                "order": order.digest}
    with atomic_write(Path(path)) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for rank, rid in enumerate(chosen, 1):
            line = {"rank": rank, "id": rid, "dataset": dataset[rid],
                    "confidence": None if order.confidence is None else order.confidence[rid], "config": settings}
            handle.write(json.dumps(line) + "\n")
    return len(chosen)


def read_selection(path: str | os.PathLike, records: Sequence[Record], budget: int | None) -> LabelOrder:
    """The first ``budget`` questions (all when None) of a selection file (:func:`write_selection`'s JSONL, or
    any JSONL of ``{"id": ...}`` lines), in file order, as a :class:`LabelOrder` for ``elical train --selection``.
    One-line InputErrors: a missing file, a line that is not an object with an id, an id not in the pool of
    ``records`` or given twice (file, line), a budget larger than the file."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"--selection {path}: no such file (elical select-labels writes one)")
    pool = {r.id for r in records}
    ids: list[str] = []
    line_of: dict[str, int] = {}
    config: dict[str, Any] = {}
    for number, text in text_lines(path):  # a binary or non-UTF-8 file: one line naming it
        if not text.strip():
            continue
        try:
            line = loads(text)
        except JsonError:
            line = None
        if not isinstance(line, dict) or not isinstance(line.get("id"), str):
            raise InputError(f"{path}, line {number}: not a JSON object with a string \"id\" (a selection file has "
                             "one chosen question per line, as elical select-labels writes)")
        rid = line["id"]
        if rid not in pool:
            raise InputError(f"{path}, line {number}: question {rid!r} is not in the training pool (was the "
                             "selection made for other records?)")
        if rid in line_of:
            raise InputError(f"{path}, line {number}: question {rid!r} is chosen twice (first on line "
                             f"{line_of[rid]})")
        line_of[rid] = number
        ids.append(rid)
        config = config or (line.get("config") if isinstance(line.get("config"), dict) else {}) or {}
    if not ids:
        raise InputError(f"--selection {path}: the file chooses no question")
    if budget is not None and budget > len(ids):
        raise InputError(f"--budget {budget} exceeds the {len(ids)} questions chosen in {path}; lower --budget to at "
                         f"most {len(ids)} (or choose more with elical select-labels)")
    chosen = ids if budget is None else ids[:budget]
    seed = config.get("seed")
    return LabelOrder(str(config.get("strategy") or "file"), seed if isinstance(seed, int) else 0, tuple(chosen),
                      None, None if config.get("model") is None else str(config["model"]), str(path))


def save_selection(folder: str | os.PathLike, order: LabelOrder, budget: int | None,
                   labelled: Collection[str] | None = None) -> Path:
    """Write ``selection.json`` (:meth:`LabelOrder.record`) into a trained model's folder; its path."""
    from elical.core.io import write_json

    path = Path(folder) / SELECTION_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, order.record(budget, labelled))
    return path
