"""Typed seams: each judge and each dataset is declared once (elical.annotate.judge_registry, elical.data.registry) and
everything else derives from that entry; predict, gate and retrieve-eval take config classes; the command line
calls the library by keyword."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

import elical.cli
from elical.annotate.config import AnnotateConfig, JudgeConfig
from elical.annotate.judge_check import DEFAULT_JUDGES
from elical.annotate.judge_factory import BUILDERS, JUDGE_NAMES, judge_maker
from elical.annotate.judge_registry import DEFAULT_JUDGE, JUDGES, checked_judges, judge_names
from elical.annotate.judges import JUDGE_VERSIONS, judge_version
from elical.cli import app as cli_app
from elical.cli.common import JudgeName
from elical.core.choices import ConsistencyJudgeKind, CorrectnessJudgeKind, SubjectName
from elical.core.inputs import one_line
from elical.data.registry import GROUP_ORDER, REGISTRY, dataset_group, display_name, lookup
from elical.evaluation.config import DATASET_GROUPS, EvalConfig
from elical.report.tables import column_label, column_layout
from elical.retrieval.config import RetrievalSettings, RetrieveEvalConfig
from elical.train.predict_config import GateConfig, PredictConfig

CLI = sorted(Path(elical.cli.__file__).parent.glob("*.py"))  # the command line's modules, one per command group

# Judge names and versions are cache keys and settings digests: they never change by accident.
VERSIONED = {"match": "match@17", "mention": "mention@3", "exact": "exact@5", "paper": "paper@1", "answer": "answer@16",
             "embedding": "embedding@2", "llm": "llm@1", "verified": "verified@1(match@17+answer@16)",
             "cascade": "cascade@15(match@17+answer@16+llm@1)"}


def test_judge_names_and_versions_are_unchanged():
    assert JUDGE_NAMES == tuple(VERSIONED) == tuple(JUDGES)
    assert {name: judge_version(name) for name in JUDGES} == VERSIONED
    assert JUDGE_VERSIONS == {name: spec.version for name, spec in JUDGES.items()}


def test_every_registered_judge_is_offered_accepted_and_built():
    assert [j.value for j in JudgeName] == list(JUDGES)  # judge-check --judge
    assert set(BUILDERS) == set(JUDGES)  # a builder per entry, no builder without one
    for task, kind in (("correctness", CorrectnessJudgeKind), ("consistency", ConsistencyJudgeKind)):
        allowed = get_args(kind)
        assert allowed == judge_names(task) and allowed[0] == DEFAULT_JUDGE[task]
        assert set(allowed) == {name for name, spec in JUDGES.items() if task in spec.tasks}
        for name in allowed:
            assert getattr(JudgeConfig(**{task: name}), task) == name
        assert DEFAULT_JUDGES[task] == checked_judges(task)
    assert JudgeConfig().correctness == "verified" and JudgeConfig().consistency == "verified"
    make = judge_maker(AnnotateConfig(device="cpu"))
    for name in ("match", "mention", "exact"):  # judges that load no model
        assert make(name).name == judge_version(name)
    assert make("paper").name == "paper"  # its cache key has never carried its version (annotate's settings do)
    with pytest.raises(ValueError, match="unknown judge 'nope' \\(expected one of match, mention, exact"):
        make("nope")


def test_a_judge_outside_its_task_is_one_clear_error():
    with pytest.raises(ValidationError) as err:
        JudgeConfig(correctness="answer")
    assert one_line(err.value).startswith("correctness: Input should be 'verified', 'match', 'mention'")


def test_every_registered_dataset_has_one_group_display_name_and_converter():
    names = {spec.name for spec in REGISTRY.values()}
    assert {"nq", "tq", "hq", "2wiki", "pararel", "squad", "wq", "cwq", "musique", "popqa", "mmlu",
            "nonambigqa"} == names
    for key, spec in REGISTRY.items():
        assert spec.group in GROUP_ORDER and spec.display
        assert lookup(key) is spec and dataset_group(key) == spec.group == EvalConfig().group_of(key)
        assert DATASET_GROUPS[key] == spec.group and display_name(key) == spec.display
    assert dataset_group("my-own-set") == "other" and display_name("my-own-set") == "my-own-set"
    assert EvalConfig(groups={"nq": "ood"}).group_of("nq") == "ood"  # an override still wins
    assert [column_label("ood", d)[1] for d in ("squad", "webquestions", "nonambigqa")] == ["SQuAD", "WQ", "NonAmbigQA"]


def test_tables_keep_the_paper_order_of_the_registry():
    import pandas as pd

    datasets = ["mine", "popqa", "nonambigqa", "webquestions", "wq", "squad", "hotpotqa", "hq", "nq"]
    rows = pd.DataFrame({"group": [dataset_group(d) for d in datasets], "dataset": datasets})
    assert column_layout(rows) == [("in-domain", "nq"), ("in-domain", "hq"), ("in-domain", "hotpotqa"),
                                   ("in-domain", "average"), ("ood", "squad"), ("ood", "wq"),
                                   ("ood", "webquestions"), ("ood", "popqa"), ("ood", "nonambigqa"),
                                   ("ood", "average"), ("other", "mine")]


@pytest.mark.parametrize("make, problem", [
    (lambda: PredictConfig(tokens_per_batch=0), "tokens_per_batch:"),
    (lambda: PredictConfig(compile=True), "compile: unknown setting"),
    (lambda: PredictConfig(device="tpu9"), "device:"),
    (lambda: GateConfig(objective="precision:2"), "objective: gate objective 'precision:2': the target precision"),
    (lambda: GateConfig(objective="best"), "objective: unknown gate objective 'best'; expected alignment, honesty"),
    (lambda: RetrieveEvalConfig(judge="answer"), "judge: Input should be 'verified', 'match', 'mention', 'exact'"),
    (lambda: RetrieveEvalConfig(subject="moon"), "subject: Input should be 'world', 'geo' or 'qa'"),
    (lambda: RetrieveEvalConfig(retrieval={"k": 0}), "retrieval.k:"),
    (lambda: RetrieveEvalConfig(corpus="c.jsonl"), "corpus: unknown setting"),
])
def test_a_bad_config_value_is_one_clear_error(make, problem):
    with pytest.raises(ValidationError) as err:
        make()
    assert len(err.value.errors()) == 1 and one_line(err.value).startswith(problem), one_line(err.value)


def test_the_new_configs_default_to_the_commands_defaults():
    assert PredictConfig().model_dump() == {"method": None, "device": "auto", "base_model": None,
                                            "tokens_per_batch": 16384, "compile_layers": False}
    assert GateConfig().model_dump() == {"objective": "alignment", "device": "auto"}
    config = RetrieveEvalConfig()
    assert (config.subject, config.judge, config.model, config.device, config.dtype) == ("world", "match", None,
                                                                                        "auto", "auto")
    assert config.retrieval == RetrievalSettings() and get_args(SubjectName) == ("world", "geo", "qa")
    for cls in (PredictConfig, GateConfig, RetrieveEvalConfig):  # documented like the other steps' settings
        assert cls.model_config.get("extra") == "forbid"
        assert all(field.description for field in cls.model_fields.values()), cls


@pytest.mark.parametrize("option, value, allowed", [
    ("--judge", "answer", "'match', 'mention', 'exact', 'paper', 'embedding', 'llm', 'cascade'"),
    ("--subject", "moon", "'world', 'geo', 'qa'"),
])
def test_retrieve_eval_refuses_a_value_outside_its_choice(tmp_path, option, value, allowed):
    result = CliRunner().invoke(cli_app, ["retrieve-eval", str(tmp_path), "-p", str(tmp_path / "p.csv"), "-o",
                                          str(tmp_path / "out"), option, value])
    assert result.exit_code == 2 and f"'{value}' is not one of" in result.output
    assert allowed in " ".join(result.output.replace("│", " ").split())
    assert not (tmp_path / "out").exists()


def _elical_names(tree: ast.Module) -> set[str]:
    """Names a module of elical.cli imports from elical modules, and the functions it defines."""
    names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("elical"):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def test_the_command_line_calls_the_library_by_keyword():
    crowded = []
    for path in CLI:
        tree = ast.parse(path.read_text())
        ours = _elical_names(tree)
        crowded += [f"{path.name} line {node.lineno}: {ast.unparse(node.func)}" for node in ast.walk(tree)
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ours
                    and len(node.args) > 3]
    assert crowded == []


def test_library_seams_take_keywords_after_their_inputs():
    from elical.annotate.judge_check import check_judges
    from elical.annotate.run import annotate_sources
    from elical.audit.commands import draw_audit, score_audit
    from elical.honesty.commands import eval_from_files, tune_from_files
    from elical.retrieval.commands import retrieve_eval_from_files
    from elical.train.predict import fit_gate_files, predict_files

    for function in (annotate_sources, check_judges, draw_audit, score_audit, tune_from_files, eval_from_files,
                     retrieve_eval_from_files, fit_gate_files, predict_files):
        positional = [p for p in inspect.signature(function).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        assert len(positional) <= 4, function.__name__
        assert all(p.default is not p.empty for p in positional[3:]), function.__name__


def test_run_numbers_and_serve_config_are_built_by_keyword(tmp_path):
    pytest.importorskip("fastapi", reason="elical.serve needs the serve extra: pip install -e '.[serve]'")
    from elical.run.report import RunNumbers
    from elical.serve import ServeConfig

    assert all(f.kw_only for f in RunNumbers.__dataclass_fields__.values())
    with pytest.raises(TypeError):
        RunNumbers(*range(15))  # type: ignore[misc]
    assert ServeConfig(tmp_path, tau=0.5).tau == 0.5
    with pytest.raises(TypeError):
        ServeConfig(tmp_path, 0.5)  # type: ignore[misc]
