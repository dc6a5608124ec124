"""elical: calibrated, annotation-efficient confidence for large language models.

``from elical import ConfidenceModel`` loads a trained model (torch is imported only then).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["ConfidenceModel", "__version__"]

if TYPE_CHECKING:
    from elical.model.network import ConfidenceModel


_LAZY = {"ConfidenceModel": "elical.model.network"}  # name -> the module that defines it (tools/check_imports.py reads it)


def __getattr__(name: str) -> Any:
    """Lazy export of :class:`elical.model.network.ConfidenceModel`, so ``import elical`` stays cheap."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'elical' has no attribute {name!r}")
