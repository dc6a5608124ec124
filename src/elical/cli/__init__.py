"""The `elical` command line, one module per command group (see :mod:`elical.cli.main`).

``from elical.cli import app`` imports the command modules only then; ``import elical.cli`` imports nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from elical.core._lazy import lazy_exports

if TYPE_CHECKING:
    from elical.cli.main import app

__all__ = ["app"]

_LAZY = {"app": "elical.cli.main"}  # name -> the module that defines it (tools/check_imports.py reads it)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
