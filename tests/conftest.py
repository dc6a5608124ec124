"""Shared fixtures: the real QA data beside the project, and tiny real models built from a config."""

from __future__ import annotations

import ast
import inspect
import os
import re
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


# Test tiers: `pytest -m unit` is the fast tier, `pytest -m e2e` the rest; the default run runs both (and
# still deselects `slow`). A test is `e2e` when it runs the system end to end: it trains or loads a model
# (tiny real ones included), runs a CLI command, a pipeline or run, starts a server or a subprocess, drives
# a browser, or annotates with a model. pytest_collection_modifyitems below decides, so that a new test
# lands in its tier by itself: a test is `e2e` when
#  1. it uses, directly or through other fixtures, one of E2E_FIXTURES, or
#  2. its body, the body of a fixture it uses, or a function of their module that these call (transitively)
#     matches E2E_CALLS (a CLI runner, a subprocess, run_pipeline, a browser, a server; building, loading or
#     training a model, an embedding judge, annotation), or
#  3. it is marked `@pytest.mark.e2e` (or its module has `pytestmark = pytest.mark.e2e`), for such work
#     that the first two cannot see.
# Every other test that is not `slow` is `unit`. tests/test_test_tiers.py checks this rule.
E2E_FIXTURES = frozenset({"tiny_llama", "tiny_qwen2", "model_dir", "trained_model_dir"})
E2E_CALLS = re.compile(
    r"\bCliRunner\b|\.invoke\(|\bsubprocess\.|\bPopen\b|\bmultiprocessing\b"  # the CLI, other processes
    r"|\brun_pipeline\(|\bplaywright\b|\buvicorn\b"  # a run, a browser, a server
    r"|\bbuild_model\(|\bfrom_pretrained\(|\.from_config\(|\btrain(?:_world_lm|_lm)?\("  # a model built, loaded, trained
    r"|\b(?:Answer|Embedding)Judge\(|\bannotate(?:_sources)?\(")  # embedding models; annotation


def _module_functions(module, cache: dict) -> dict[str, str]:
    """Source of each top-level function of a module, by name (cached)."""
    if module not in cache:
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            source = ""
        lines = source.splitlines()
        cache[module] = {node.name: "\n".join(lines[node.lineno - 1:node.end_lineno])
                         for node in ast.parse(source).body
                         if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return cache[module]


def _does_e2e_work(function, cache: dict) -> bool:
    """Whether `function`, or a function of its module that it calls (transitively), matches E2E_CALLS."""
    function = inspect.unwrap(function)
    if ("e2e", function) in cache:
        return cache["e2e", function]
    module = inspect.getmodule(function)
    here = Path(__file__).resolve().parent  # only the tests' own code: pytest's fixtures (tmp_path, ...) are not e2e work
    ours = module is not None and here in Path(getattr(module, "__file__", None) or "/").resolve().parents
    functions = _module_functions(module, cache) if ours else {}
    todo, seen, found = [function.__name__], set(), False
    while todo and not found:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        found = bool(E2E_CALLS.search(functions[name]))
        todo.extend(n for n in re.findall(r"\b(\w+)\(", functions[name]) if n in functions)
    cache["e2e", function] = found
    return found


def is_e2e(item, cache: dict) -> bool:
    """The tier rule above, for one collected test."""
    if item.get_closest_marker("e2e") or E2E_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    functions = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        functions.extend(getattr(d, "func", None) for d in defs)
    return any(f is not None and _does_e2e_work(f, cache) for f in functions)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(config, items):
    """Mark each test `e2e` or `unit` by the tier rule above; `slow` tests get neither."""
    cache: dict = {}
    for item in items:
        if not item.get_closest_marker("slow"):
            item.add_marker("e2e" if is_e2e(item, cache) else "unit")


@pytest.fixture(scope="session", autouse=True)
def gguf_cache(tmp_path_factory):
    """Models converted from .gguf files (elical.model.gguf_cache) go to a folder of the session, not to the
    home folder of whoever runs the tests (unless ELICAL_CACHE_DIR says where)."""
    patch = pytest.MonkeyPatch()
    if "ELICAL_CACHE_DIR" not in os.environ:
        patch.setenv("ELICAL_CACHE_DIR", str(tmp_path_factory.mktemp("elical-cache")))
    yield
    patch.undo()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (real public QA sets); tests that need it skip when it is absent."""
    if not (SHARED_DATA / "qa").is_dir():
        pytest.skip(f"real QA data not found at {SHARED_DATA} (only present beside the project checkout)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A word-level tokenizer built locally with `tokenizers`, ChatML template, pad token set."""
    from tiny import build_tokenizer

    return build_tokenizer()


@pytest.fixture(scope="session")
def tiny_llama(tiny_tokenizer):
    """A tiny LlamaForCausalLM with random weights, in eval mode."""
    from tiny import build_model

    return build_model(tiny_tokenizer, "llama")


@pytest.fixture(scope="session")
def tiny_qwen2(tiny_tokenizer):
    """A tiny Qwen2ForCausalLM with random weights, in eval mode."""
    from tiny import build_model

    return build_model(tiny_tokenizer, "qwen2")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, tiny_tokenizer):
    """A tiny Llama whose tokenizer has no chat template: the prompt ends with the question's last
    word, which a random 2-layer model carries to the pooled token strongly enough to learn from
    in a few steps (the chat template's fixed tail would need many epochs)."""
    import copy

    from tiny import build_model

    path = tmp_path_factory.mktemp("llama")
    build_model(tiny_tokenizer, "llama").save_pretrained(path)
    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.chat_template = None
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def records_file(tmp_path_factory):
    """Records of tiny.learnable_records (training tests)."""
    from elical.records import write_jsonl
    from tiny import learnable_records

    path = tmp_path_factory.mktemp("records") / "train.jsonl"
    write_jsonl(learnable_records(), path)
    return path


@pytest.fixture(scope="session")
def trained_model_dir(tmp_path_factory, model_dir, records_file):
    """A confidence model trained for a few seconds on tiny.learnable_records (capital questions
    high, fox questions low); its folder (gate and serve tests; copy it before writing into it)."""
    from elical.train.config import TrainConfig
    from elical.train.trainer import train

    out = tmp_path_factory.mktemp("trained")
    cfg = TrainConfig(model=str(model_dir), output_dir=str(out), mode="cal-only", batch_size=8, epochs_stage2=3,
                      lr=1e-2, tokens_per_batch=512, row_length=128, val_fraction=0.25, warmup_ratio=0.0,
                      save_steps=0)
    train(cfg, [records_file], show_progress=False)
    return out / "model"
