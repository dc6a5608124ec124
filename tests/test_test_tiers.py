"""The test tiers: tests/conftest.py marks every test `unit` or `e2e` (the rule is written there)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")

# A test module in a scratch project that uses this project's conftest. The names say the tier each
# test must land in. (A module-level string: the rule reads functions, not this text.)
SAMPLE = '''
import subprocess

import pytest
from typer.testing import CliRunner


def helper_runs_a_process():
    return subprocess.run(["true"])


def helper_of_a_helper():
    return helper_runs_a_process()


@pytest.fixture
def backend(tiny_llama):
    return tiny_llama


@pytest.fixture
def saved_model(tmp_path):
    from tiny import build_model
    return build_model(None)


def test_unit_plain():
    assert 1 + 1 == 2


def test_unit_names_the_cli_only_in_words(tmp_path):
    assert "annotate, train and serve" != "run_pipeline"


def test_unit_tokenizer_only(tiny_tokenizer):
    pass


def test_e2e_model_fixture(tiny_llama):
    pass


def test_e2e_fixture_on_a_model_fixture(backend):
    pass


def test_e2e_trained_model(trained_model_dir):
    pass


def test_e2e_local_fixture_builds_a_model(saved_model):
    pass


def test_e2e_cli():
    CliRunner().invoke(None, ["--help"])


def test_e2e_through_helpers():
    helper_of_a_helper()


@pytest.mark.e2e
def test_e2e_marked_by_hand():
    pass


@pytest.mark.slow
def test_slow_is_neither():
    pass


class TestGrouped:
    def test_unit_method(self):
        pass

    def test_e2e_method(self, model_dir):
        pass


@pytest.mark.parametrize("x", [1, 2])
def test_unit_parametrized(x):
    pass
'''

MARKED_MODULE = '''
import pytest

pytestmark = pytest.mark.e2e


def test_e2e_by_module_mark():
    pass
'''


@pytest.fixture
def project(pytester):
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makeini('[pytest]\nmarkers =\n    slow: s\n    unit: u\n    e2e: e\naddopts = -m "not slow"\n')
    pytester.makepyfile(test_sample=SAMPLE, test_marked=MARKED_MODULE)
    return pytester


def collected(pytester, *args) -> set[str]:
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", *args)
    return {line.split("::")[-1] for line in result.outlines if "::" in line}


def test_each_test_lands_in_the_tier_its_name_says(project):
    unit, e2e, default = collected(project, "-m", "unit"), collected(project, "-m", "e2e"), collected(project)
    assert unit == {"test_unit_plain", "test_unit_names_the_cli_only_in_words", "test_unit_tokenizer_only",
                    "test_unit_method", "test_unit_parametrized[1]", "test_unit_parametrized[2]"}
    assert e2e == {"test_e2e_model_fixture", "test_e2e_fixture_on_a_model_fixture", "test_e2e_trained_model",
                   "test_e2e_local_fixture_builds_a_model", "test_e2e_cli", "test_e2e_through_helpers",
                   "test_e2e_marked_by_hand", "test_e2e_method", "test_e2e_by_module_mark"}
    assert default == unit | e2e  # the default run: both tiers, and still not `slow`
    assert collected(project, "-m", "slow") == {"test_slow_is_neither"}


def test_every_test_of_this_session_has_exactly_one_tier(request):
    """Whatever this run collected (all of it, or one tier): one tier per test, none for `slow`."""
    import conftest

    for item in request.session.items:
        tiers = {m.name for m in item.iter_markers() if m.name in ("unit", "e2e")}
        if item.get_closest_marker("slow"):
            assert not tiers, item.nodeid
        else:
            assert len(tiers) == 1, (item.nodeid, tiers)
        if conftest.E2E_FIXTURES.intersection(item.fixturenames):
            assert tiers <= {"e2e"}, item.nodeid
    assert request.node.get_closest_marker("unit"), "the tier rule's own tests are unit tests"
