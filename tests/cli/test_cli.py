"""The command line as a new user meets it: version, help that names the allowed values, one meaning per short
flag, the run's ETA, and logs free of library noise."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from elical.cli import app
from elical.cli.common import JudgeName
from elical.cli.run_cmds import _duration, _RunLog


def test_version_option_prints_the_installed_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == importlib.metadata.version("elical")


def test_judge_check_offers_exactly_the_judge_names():
    from elical.annotate.judge_factory import JUDGE_NAMES

    assert tuple(j.value for j in JudgeName) == JUDGE_NAMES


@pytest.mark.parametrize("command, shown", [
    (["run"], None),  # every packaged preset, below
    (["annotate"], ["hf|openai|vllm", "paper|short", "verified|match|mention|exact|paper|embedding|llm|cascade", "verified|match|mention|exact|answer"]),
    (["train"], ["eli-only|cal-only|elical|head-only"]),
    (["evaluate"], ["elical|paper", "uniform|quantile"]),
    (["honesty-tune"], ["sft|absolute|confidence-num|confidence-verb|multisample"]),
    (["judge-check"], ["match|mention|exact|paper|answer|embedding|llm|verified|cascade"]),
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
        group = typer.main.get_command(app)
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
    log = _RunLog(lines.append, cfg, tmp_path)
    log("subject world: 1440 questions, model m")
    (tmp_path / "scores" / f"{first}.parquet").write_text("")  # the pipeline logs a model once it is scored
    log(f"train: {first} in 10.0s")
    log(f"train: {second} in 20.0s (2 done, 3 queued or running)")  # the parallel form of the line
    assert lines[0] == "subject world: 1440 questions, model m"
    left = total - 1 - 2
    assert lines[2] == (f"train: {second} in 20.0s (2 done, 3 queued or running) (2/{total - 1} models; ETA "
                        f"{_duration(left * 15)} for training, then evaluation, honesty and the report)")
    assert [_duration(s) for s in (45, 185, 7620)] == ["45s", "3m05s", "2h07m"]


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


def _all_commands() -> list[list[str]]:
    group = typer.main.get_command(app)
    names = [[name] for name in group.commands]  # type: ignore[attr-defined]
    world = group.commands["world"]  # type: ignore[attr-defined]
    return [[], *names, *(["world", name] for name in world.commands)]


@pytest.mark.parametrize("command", _all_commands(), ids=lambda c: " ".join(c) or "elical")
def test_help_shows_plain_metavars_not_python_types(command):
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    for python_name in ("<bool>", "<int>", "<str>", "<path>", "<float>", "list["):
        assert python_name not in result.output, (python_name, result.output)
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    assert "{" not in usage, usage


def test_help_names_arguments_and_types_as_click_does():
    result = CliRunner().invoke(app, ["evaluate", "--help"], env={"COLUMNS": "400"})
    text = " ".join(result.output.replace("│", " ").split())
    assert "Usage: elical evaluate [OPTIONS] RECORDS..." in text
    assert "--out -o PATH" in text and "--resamples INTEGER" in text and "--methods TEXT" in text
    assert "--ece-strategy [uniform|quantile]" in text and "--skip-invalid Skip" in text


def test_ctrl_c_says_what_was_kept_and_how_to_resume(tmp_path):
    import signal
    import socket

    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "Who wrote Hamlet?", "answer": ["Shakespeare"]}\n')
    with socket.create_server(("127.0.0.1", 0)) as server:  # accepts, never answers: annotate waits on it
        server.settimeout(120)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/v1"
        args = ["annotate", str(qa), "-o", str(tmp_path / "out"), "--backend", "openai", "--base-url", url,
                "--model", "m", "--k", "0", "--read-timeout", "5"]
        # Ctrl-C as in a terminal, also where the tests run in the background (a shell's `&` ignores SIGINT,
        # and an ignored SIGINT is inherited)
        proc = subprocess.Popen([sys.executable, "-m", "elical.cli", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            connection, _ = server.accept()  # the command is in the middle of its work
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)  # at once: requests in flight are not waited for (was 25 s)
            connection.close()
        finally:
            proc.kill()
    assert proc.returncode == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted: the finished shards are kept under "), err
    assert lines[0].endswith("rerun the same command to resume: elical " + " ".join(args)), err


def test_train_without_out_says_where_it_writes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["train", str(tmp_path / "missing.jsonl")])
    assert "Writing to runs/train (the default; -o sets it)" in result.output, result.output
    with_out = CliRunner().invoke(app, ["train", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "t")])
    assert "Writing to" not in with_out.output, with_out.output
