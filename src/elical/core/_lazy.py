"""Lazy exports for package ``__init__``s (PEP 562): ``from elical.pkg import Name`` imports only the
submodule that defines ``Name``, so importing a package (or any of its submodules) stays cheap.

A package declares ``_LAZY = {"Name": "elical.pkg.sub", ...}`` (a dict literal, which
``tools/check_imports.py`` reads), imports the same names under ``if TYPE_CHECKING:`` for type checkers,
and sets ``__getattr__, __dir__ = lazy_exports(__name__, _LAZY)``.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, table: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` exporting ``table``'s names lazily."""

    def __getattr__(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(table[name]), name)
        setattr(sys.modules[package], name, value)  # found directly from now on
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table})

    shadowed = {name for name, module in table.items() if module == f"{package}.{name}"}
    if shadowed:  # e.g. elical.honesty.tune, the module, and tune, the function it exports
        _keep_exports(sys.modules[package], shadowed)
    return __getattr__, __dir__


def _keep_exports(package: types.ModuleType, names: set[str]) -> None:
    """Once its submodule ``name`` is loaded, the import system binds the module to the package's attribute
    ``name``; for the ``names`` the package exports from a submodule of the same name, bind the export
    instead (as an eager ``from .name import name`` in ``__init__`` did)."""

    class Package(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if name in names and isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}":
                value = getattr(value, name)
            super().__setattr__(name, value)

    package.__class__ = Package
