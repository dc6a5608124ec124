"""The estimator registry and the checked, batched scoring of records."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from elical.records import RECORD_ATTRIBUTE, MissingFieldError, Record, has_annotation

# Record attribute -> the HonestyBench field a user knows it by, for error messages.
HB_NAME = {attribute: hb_name for hb_name, attribute in RECORD_ATTRIBUTE.items()}


@dataclass(frozen=True)
class Estimator:
    """A training-free confidence: its name, the record fields it needs, and how it scores records."""

    name: str
    requires: tuple[str, ...]
    score_batch: Callable[[Sequence[Record]], np.ndarray]
    description: str = ""


def _present(record: Record, name: str) -> bool:
    if name.startswith("verbal:"):
        return name.split(":", 1)[1] in record.verbal
    return has_annotation(record, name)


def _describe_field(name: str) -> str:
    if name.startswith("verbal:"):
        return f"a verbalized-confidence reply '{name.split(':', 1)[1]}' (record field 'verbal')"
    return f"'{HB_NAME.get(name, name)}'"


ESTIMATORS: dict[str, Estimator] = {}


def register(estimator: Estimator) -> Estimator:
    """Add an estimator to the registry under its (case-insensitive) name."""
    ESTIMATORS[estimator.name.lower()] = estimator
    return estimator


def get_estimator(name: str) -> Estimator:
    """Look an estimator up by name, with the known names in the error."""
    try:
        return ESTIMATORS[name.lower()]
    except KeyError:
        known = ", ".join(e.name for e in ESTIMATORS.values())
        raise KeyError(f"unknown confidence method {name!r}; known: {known}") from None


def applicable_estimators(records: Sequence[Record]) -> tuple[list[Estimator], dict[str, str]]:
    """Estimators whose inputs every record has, and for the others the reason they do not apply."""
    usable, skipped = [], {}
    for estimator in ESTIMATORS.values():
        for name in estimator.requires:
            lacking = sum(not _present(r, name) for r in records)
            if lacking:
                skipped[estimator.name] = f"{lacking} of {len(records)} records lack {_describe_field(name)}"
                break
        else:
            usable.append(estimator)
    return usable, skipped


def score_records(records: Sequence[Record], methods: Sequence[str | Estimator]) -> dict[str, np.ndarray]:
    """Score every record with every method; checks all inputs first, fails before any work."""
    estimators = [m if isinstance(m, Estimator) else get_estimator(m) for m in methods]
    for estimator in estimators:
        for name in estimator.requires:
            lacking = [r for r in records if not _present(r, name)]
            if lacking:
                raise MissingFieldError(
                    f"{estimator.name} needs {_describe_field(name)}, but {len(lacking)} of {len(records)} "
                    f"records lack it (first: id {lacking[0].id}, dataset {lacking[0].dataset}: "
                    f"{lacking[0].question[:60]!r})"
                )
    return {e.name: np.asarray(e.score_batch(records), dtype=float) for e in estimators}
