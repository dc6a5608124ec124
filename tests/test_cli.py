"""The command line as a new user meets it: version, help that names the allowed values, one meaning per short
flag, the run's ETA, and logs free of library noise."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from typing import get_args

import pytest
from typer.testing import CliRunner

from elical import cli
from elical.cli import app
from elical.prompts import QA_STYLES


def test_version_option_prints_the_installed_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == importlib.metadata.version("elical")


def test_choice_options_allow_exactly_the_configs_values():
    from elical.annotate.config import AnnotateConfig, ConsistencyJudgeKind, CorrectnessJudgeKind
    from elical.annotate.judge_factory import JUDGE_NAMES
    from elical.honesty.config import Method
    from elical.metrics import BinStrategy, Convention
    from elical.train.config import Mode

    assert get_args(cli.Backend) == get_args(AnnotateConfig.model_fields["backend"].annotation)
    assert get_args(cli.CorrectnessJudge) == get_args(CorrectnessJudgeKind)
    assert get_args(cli.ConsistencyJudge) == get_args(ConsistencyJudgeKind)
    assert get_args(cli.QAPrompt) == tuple(QA_STYLES)
    assert get_args(cli.TrainMode) == get_args(Mode)
    assert get_args(cli.HonestyMethod) == get_args(Method)
    assert (get_args(cli.Convention), get_args(cli.BinStrategy)) == (get_args(Convention), get_args(BinStrategy))
    assert tuple(j.value for j in cli.JudgeName) == JUDGE_NAMES


@pytest.mark.parametrize("command, shown", [
    (["run"], None),  # every packaged preset, below
    (["annotate"], ["hf|openai|vllm", "paper|short", "match|mention|exact|paper|embedding|llm|cascade", "answer|match|mention|exact"]),
    (["train"], ["eli-only|cal-only|elical|head-only"]),
    (["evaluate"], ["elical|paper", "uniform|quantile"]),
    (["honesty-tune"], ["sft|absolute|confidence-num|confidence-verb|multisample"]),
    (["judge-check"], ["match|mention|exact|paper|answer|embedding|llm|cascade"]),
])
def test_help_names_the_allowed_values(command, shown):
    from elical.run.config import preset_names

    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())
    for value in shown or [", ".join(preset_names())]:
        assert value in text, value


def test_a_value_outside_a_choice_is_refused_naming_the_allowed_ones(tmp_path):
    result = CliRunner().invoke(app, ["train", str(tmp_path), "--mode", "elicall"])
    assert result.exit_code == 2 and "'elicall' is not one of" in result.output and "'cal-only'" in result.output


def test_short_p_means_predictions_everywhere():
    def short_p(command: list[str]) -> set[str]:
        group = cli.typer.main.get_command(app)
        sub = group.get_command(None, command[0])  # type: ignore[union-attr]
        return {param.name for param in sub.params if "-p" in getattr(param, "opts", [])}

    assert short_p(["evaluate"]) == short_p(["honesty-eval"]) == {"predictions"}
    assert short_p(["run"]) == set()
    result = CliRunner().invoke(app, ["run", "-p", "default"])
    assert result.exit_code == 2 and "No such option" in result.output


def test_run_log_adds_the_models_left_and_the_time_left(tmp_path):
    from elical.run.config import load_run_config
    from elical.run.pipeline import planned_models

    cfg = load_run_config("default")
    total = len(planned_models(cfg))
    first, second = [k.name for k in planned_models(cfg) if k.method == "cal-only"][:2]
    (tmp_path / "scores").mkdir()
    (tmp_path / "scores" / "eli-only-0-s0.parquet").write_text("")  # done before: this invocation trains the rest
    lines: list[str] = []
    log = cli._RunLog(lines.append, cfg, tmp_path)
    log("subject world: 1440 questions, model m")
    (tmp_path / "scores" / f"{first}.parquet").write_text("")  # the pipeline logs a model once it is scored
    log(f"train: {first} in 10.0s")
    log(f"train: {second} in 20.0s (2 done, 3 queued or running)")  # the parallel form of the line
    assert lines[0] == "subject world: 1440 questions, model m"
    left = total - 1 - 2
    assert lines[2] == (f"train: {second} in 20.0s (2 done, 3 queued or running) (2/{total - 1} models; ETA "
                        f"{cli._duration(left * 15)} for training, then evaluation, honesty and the report)")
    assert [cli._duration(s) for s in (45, 185, 7620)] == ["45s", "3m05s", "2h07m"]


def test_annotate_log_holds_no_progress_bars_of_the_model_loader(tiny_tokenizer, tiny_llama, tmp_path):
    """In a fresh process, as a user runs it: transformers' weight-loading bar (tqdm) stays out of the log."""
    tiny_llama.save_pretrained(tmp_path / "model")
    tiny_tokenizer.save_pretrained(tmp_path / "model")
    data = tmp_path / "nq_test.jsonl"
    data.write_text(json.dumps({"question": "Who wrote Hamlet?", "answer": ["Shakespeare"]}) + "\n")
    command = [sys.executable, "-m", "elical.cli", "annotate", str(data), "--model", str(tmp_path / "model"),
               "--k", "2", "--max-new-tokens", "4", "--device", "cpu", "--consistency-judge", "match",
               "-o", str(tmp_path / "run")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False,
                          env={k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"})
    assert done.returncode == 0, done.stderr
    log = done.stdout + done.stderr
    assert "Wrote 1 records" in log
    assert "Loading weights" not in log and "it/s]" not in log and "FutureWarning" not in log
