"""The confidence model: its network (backbone + LoRA + head), model folder, loading, settings, identity (key),
packed-row masks, predictions and the answer/retrieve/abstain gate.

``from elical.model import ConfidenceModel`` imports only :mod:`elical.model.network` (and torch) then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from elical.core._lazy import lazy_exports

if TYPE_CHECKING:
    from elical.model.network import ConfidenceModel

__all__ = ["ConfidenceModel"]

_LAZY = {"ConfidenceModel": "elical.model.network"}  # name -> the module that defines it (tools/check_imports.py reads it)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
