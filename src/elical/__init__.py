"""elical: calibrated, annotation-efficient confidence for large language models.

``from elical import ConfidenceModel`` loads a trained model (torch is imported only then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["ConfidenceModel", "__version__"]

if TYPE_CHECKING:
    from elical.model import ConfidenceModel


def __getattr__(name: str) -> Any:
    """Lazy export of :class:`elical.model.ConfidenceModel`, so ``import elical`` stays cheap."""
    if name == "ConfidenceModel":
        from elical.model import ConfidenceModel

        return ConfidenceModel
    raise AttributeError(f"module 'elical' has no attribute {name!r}")
