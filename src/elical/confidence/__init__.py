"""Training-free confidence estimators computed from annotation records.

Each estimator declares the record fields it needs; :func:`score_records` checks them for every
record before any work starts and returns one score per record (NaN where a reply could not be
parsed, counted as missing rather than turned into a number).
"""

from elical.confidence import baselines as _baselines  # noqa: F401  (registers the estimators)
from elical.confidence.base import (
    ESTIMATORS,
    Estimator,
    MissingFieldError,
    applicable_estimators,
    get_estimator,
    score_records,
)

__all__ = [
    "ESTIMATORS",
    "Estimator",
    "MissingFieldError",
    "applicable_estimators",
    "get_estimator",
    "score_records",
]
