"""The identity of one trained confidence model: method, label budget, seed (and EliCal's stage-2 recipe
when a run trains several to choose one, ``train.select_on``; the label selection strategy when a run trains
several, ``train.label_selection`` a list).

A :class:`ModelKey` travels with a model's predictions (in their metadata) and through the run's
tables, so nothing parses names back out of strings. :attr:`ModelKey.name` is the model's folder and
method string (``elical-100-s0``; ``elical-platt-100-s0`` for a recipe candidate), unchanged from earlier
runs so their folders stay valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import total_ordering
from typing import Any, Literal, get_args

from elical.core.choices import LabelStrategy, Stage2Recipe

METHOD_NAMES = {"eli-only": "Eli-Only", "cal-only": "Cal-Only", "elical": "EliCal", "head-only": "Head-Only"}
TRAINED = tuple(METHOD_NAMES)
STAGE2_RECIPES: tuple[Stage2Recipe, ...] = get_args(Stage2Recipe)
LABEL_STRATEGIES: tuple[LabelStrategy, ...] = get_args(LabelStrategy)

Budget = int | Literal["all"] | None


@total_ordering
@dataclass(frozen=True)
class ModelKey:
    """One trained model: ``method`` (eli-only, cal-only, elical, head-only), ``budget`` (labels; "all" for
    the whole pool; None for Eli-Only, which uses no labels), training ``seed``, and ``stage2``: the
    stage-2 recipe of an EliCal candidate (None: the run's one recipe, ``train.settings.stage2``), and
    ``selection``: the label selection strategy of a Cal-Only or EliCal model when a run trains several
    (``train.label_selection`` a list; None: the run's one strategy, or random, whose models keep their names)."""

    method: str
    budget: Budget
    seed: int
    stage2: str | None = None
    selection: str | None = None

    def __post_init__(self) -> None:
        if self.method not in METHOD_NAMES:
            raise ValueError(f"unknown method {self.method!r}: expected one of {', '.join(METHOD_NAMES)}")
        if self.budget is not None and self.budget != "all" and not (
                isinstance(self.budget, int) and not isinstance(self.budget, bool) and self.budget > 0):
            raise ValueError(f"budget must be a positive number of labels, 'all' or None, got {self.budget!r}")
        if self.method == "eli-only" and self.budget is not None:
            raise ValueError(f"Eli-Only uses no labels: its budget is None, got {self.budget!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise TypeError(f"seed must be an integer, got {self.seed!r}")
        if self.stage2 is not None and self.method != "elical":
            raise ValueError(f"a stage-2 recipe ({self.stage2!r}) belongs to EliCal, not to {self.method}")
        if self.stage2 is not None and self.stage2 not in STAGE2_RECIPES:
            raise ValueError(f"unknown stage-2 recipe {self.stage2!r}: expected one of {', '.join(STAGE2_RECIPES)}")
        if self.selection is not None:
            if self.method not in ("cal-only", "elical") or self.budget is None or self.budget == "all":
                raise ValueError(f"a label selection ({self.selection!r}) belongs to Cal-Only or EliCal at a budget "
                                 f"below all, not to {self.method} at {self.budget!r}")
            if self.selection not in LABEL_STRATEGIES or self.selection == "random":
                raise ValueError(f"label selection {self.selection!r}: expected one of "
                                 f"{', '.join(s for s in LABEL_STRATEGIES if s != 'random')} (random is None)")

    def __lt__(self, other: object) -> bool:
        """Order by method, budget (numbers, then 'all', None first), seed; budgets of mixed types compare."""
        if not isinstance(other, ModelKey):
            return NotImplemented
        return self._sort_key() < other._sort_key()

    def _sort_key(self) -> tuple[str, str, str, int, int, int]:
        rank = (0, 0) if self.budget is None else (2, 0) if self.budget == "all" else (1, int(self.budget))
        return self.method, self.stage2 or "", self.selection or "", rank[0], rank[1], self.seed

    @property
    def name(self) -> str:
        """Folder and method name, e.g. ``elical-100-s0``, ``cal-only-all-s1``, ``eli-only-0-s0``, and for a
        recipe candidate ``elical-platt-100-s0``, for a label selection strategy's ``elical-uncertainty-100-s0``."""
        recipe = f"{self.stage2}-" if self.stage2 is not None else ""
        strategy = f"{self.selection}-" if self.selection is not None else ""
        return f"{self.method}-{recipe}{strategy}{self.budget if self.budget is not None else 0}-s{self.seed}"

    def labels(self, pool_size: int) -> int:
        """Labels the model was trained with: 0 for Eli-Only, the whole pool for 'all'."""
        if self.budget is None:
            return 0
        return pool_size if self.budget == "all" else int(self.budget)

    def display(self, pool_size: int) -> str:
        """Report name: 'EliCal (100)', 'Cal-Only (all=1500)', 'Eli-Only'."""
        if self.method == "eli-only":
            return METHOD_NAMES[self.method]
        labels = self.labels(pool_size)
        return f"{METHOD_NAMES[self.method]} ({f'all={labels}' if labels == pool_size else labels})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for prediction metadata); ``stage2`` and ``selection`` only when set, so other keys
        read as before."""
        recipe = {"stage2": self.stage2} if self.stage2 is not None else {}
        strategy = {"selection": self.selection} if self.selection is not None else {}
        return {"method": self.method, "budget": self.budget, "seed": self.seed, **recipe, **strategy}

    @classmethod
    def of_training(cls, settings: dict[str, Any]) -> ModelKey:
        """The key of a model trained with these ``TrainConfig`` settings (as a model folder records them):
        no budget is 'all' labels, and None where no stage reads labels (Eli-Only, head-only on 'eli')."""
        mode = str(settings["mode"])
        unlabelled = mode == "eli-only" or (mode == "head-only" and settings.get("head_only_target") == "eli")
        return cls(mode, None if unlabelled else settings.get("budget") or "all", settings["seed"])

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelKey:
        """Inverse of :meth:`to_dict`; a missing or bad field is a ValueError naming it."""
        missing = [k for k in ("method", "budget", "seed") if k not in data]
        if missing:
            raise ValueError(f"model key {data!r} lacks {', '.join(missing)}")
        stage2, selection = data.get("stage2"), data.get("selection")
        return cls(str(data["method"]), data["budget"], data["seed"], None if stage2 is None else str(stage2),
                   None if selection is None else str(selection))
