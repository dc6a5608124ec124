"""The import graph stays light and acyclic: no import cycle between elical modules (function-level imports
included), the declared layering holds (tools/check_imports.py), and the cheap entry points leave torch out."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "peft", "sklearn", "matplotlib")


def _checker():
    spec = importlib.util.spec_from_file_location("check_imports", ROOT / "tools" / "check_imports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycles_and_no_layering_violations():
    checker = _checker()
    graph = checker.build_graph(checker.modules())
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the whole package was read
    assert checker.cycles(graph) == []
    assert checker.layering_problems(graph) == []


def test_checker_finds_a_cycle_hidden_in_a_function(tmp_path, monkeypatch):
    checker = _checker()
    package = tmp_path / "elical"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from elical.b import g\n\ndef f():\n    return g()\n")
    (package / "b.py").write_text("def g():\n    from elical.a import f\n\n    return f\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from elical.a import f\n")
    monkeypatch.setattr(checker, "ROOT", tmp_path)
    graph = checker.build_graph(checker.modules())
    assert checker.cycles(graph) == [["elical.a", "elical.b"]]
    assert graph["elical.c"] == set()  # type-only imports never run


def test_checker_script_exits_zero():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "check_imports.py")], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 cycles, 0 layering violations" in done.stdout


@pytest.mark.parametrize("module", ["elical", "elical.run.config", "elical.cli"])
def test_cheap_entry_points_import_no_torch(module):
    code = f"import sys, {module}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == []


def test_lazy_package_exports_stay_importable():
    code = (
        "import elical.honesty.compare\n"  # its submodule elical.honesty.tune is now loaded
        "from elical.honesty import tune, TuneResult, run_honesty_comparison\n"
        "from elical.annotate import AnnotateConfig, annotate, Judges\n"
        "from elical.report import write_evaluation\n"
        "from elical.retrieval import Retriever\n"
        "from elical.world import generate_world, default_lm_path\n"
        "from elical import ConfidenceModel\n"
        "assert callable(tune) and tune.__module__ == 'elical.honesty.tune'\n"
        "assert 'tune' in dir(elical.honesty) and 'Retriever' in dir(elical.retrieval)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
