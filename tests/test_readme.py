"""Every `elical` command in README.md runs as written.

The commands of the README's bash blocks (any section, in order) are parsed by the real CLI (unknown options,
values outside a choice and missing arguments fail), their models must resolve and their input paths exist.
Those of the pipeline's steps then run in that order at a tiny size, from a folder with a few lines of each
``../shared/data`` file beside it: a tiny model replaces the named one (after the name resolves) and small sizes
are appended, as later options override earlier ones. Commands without a tiny size here (a server, say) are
parsed and checked only."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from elical.cli import app

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"

# Options appended to run a step at a tiny size; the model options are added where the step takes one.
TINY = {
    "annotate": ["--limit", "3", "--k", "2", "--max-new-tokens", "4", "--device", "cpu"],
    "annotate-merge": [],
    "evaluate": ["--resamples", "10", "--alignment-repeats", "2"],
    "train": ["--set", "epochs_stage1=1", "--set", "epochs_stage2=1", "--set", "batch_size=4", "--set", "max_length=64"],
    "predict": ["--device", "cpu"],
    "honesty-tune": ["--steps", "1", "--batch-size", "2", "--device", "cpu"],
    "honesty-eval": ["--limit", "2", "--max-new-tokens", "4", "--device", "cpu"],
    "run": [],  # --config with TINY_RUN
}
TAKES_MODEL = ("annotate", "train", "honesty-tune", "honesty-eval")
TINY_BUDGET = "4"
# `elical run` of the default preset (the packaged world LM) at a tiny size; its name and plan keep the folders
# the README names (runs/world-default, scores/elical-100-s0).
TINY_RUN = {
    "torch_threads": 1,
    "questions": {"max_train": 120, "max_eval_per_dataset": 6},
    "annotate": {"k": 3, "batch_size": 48},
    "train": {"budgets": [100], "seeds": [0], "stage2_passes": 100, "max_epochs": 1, "min_epochs": 1,
              "settings": {"epochs_stage1": 1, "batch_size": 16}},
    "evaluate": {"n_resamples": 10, "alignment_repeats": 2},
    "honesty": None,
}
OUTPUTS = {"out", "output_dir"}  # parameters that name what a command writes, not what it reads


def readme_commands(text: str) -> list[list[str]]:
    """The words after `elical` of each command in the README's bash blocks, in order; lines continued with a
    backslash are joined, comments dropped and `&&` chains split."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            starts = [0] + [i + 1 for i, word in enumerate(words) if word == "&&"]
            ends = [i for i, word in enumerate(words) if word == "&&"] + [len(words)]
            commands += [words[a + 1:b] for a, b in zip(starts, ends) if b > a and words[a] == "elical"]
    return commands


def parse(words: list[str]) -> tuple[str, dict]:
    """The (sub)command a README command names and its parsed parameters; a usage error fails the test."""
    command = typer.main.get_command(app)
    name = "elical"
    while hasattr(command, "get_command") and words and command.get_command(None, words[0]) is not None:
        name, command, words = words[0], command.get_command(None, words[0]), words[1:]
    try:
        return name, command.make_context(name, list(words)).params
    except typer.TyperException as err:  # the CLI's usage errors (unknown option, bad value, missing argument)
        pytest.fail(f"README command `elical {name} {shlex.join(words)}` does not parse: {err}")


def check_inputs(name: str, params: dict, line: str) -> None:
    """Every model a command names resolves, and every path it reads exists (relative to the current folder):
    each value of a Path option or argument but the outputs, and each other value that holds a '/'."""
    from elical.loading import resolve_model

    if params.get("model") and name != "run":
        resolve_model(params["model"])
    for key, value in params.items():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            read = isinstance(item, Path) or (isinstance(item, str) and "/" in item and "://" not in item)
            if read and key not in OUTPUTS:
                assert Path(item).exists(), f"`{line}`: {key} {item} does not exist"


def tiny_args(name: str, words: list[str], model: Path, run_config: Path) -> list[str]:
    """A README command with the options that make it tiny appended."""
    extra = list(TINY[name])
    if name in TAKES_MODEL:
        extra += ["--model", str(model)]
    if name == "annotate" and "--consistency-judge" not in words:
        extra += ["--consistency-judge", "match"]  # the default answer judge loads an embedding model
    if name == "train" and "--budget" in words:
        extra += ["--budget", TINY_BUDGET]
    if name == "run":
        extra += ["--config", str(run_config)]
    return words + extra


def copy_heads(source: Path, target: Path, lines: int = 4) -> None:
    """The first lines of every file under ``source``, in the same places under ``target``."""
    for path in source.rglob("*"):
        if path.is_file():
            copy = target / path.relative_to(source)
            copy.parent.mkdir(parents=True, exist_ok=True)
            with path.open(encoding="utf-8") as handle:
                copy.write_text("".join(line for _, line in zip(range(lines), handle)), encoding="utf-8")


@pytest.fixture
def project(tmp_path, monkeypatch, tiny_tokenizer, tiny_llama):
    """A project folder with a tiny ``../shared/data`` beside it, as the current folder; the tiny model and
    run config live outside it."""
    if not (SHARED / "data").is_dir():
        pytest.skip(f"../shared/data not found at {SHARED / 'data'} (the README's commands read it)")
    copy_heads(SHARED / "data", tmp_path / "shared" / "data")
    (tmp_path / "main").mkdir()
    tiny_llama.save_pretrained(tmp_path / "tiny-model")
    tiny_tokenizer.save_pretrained(tmp_path / "tiny-model")
    (tmp_path / "tiny-run.yaml").write_text(yaml.safe_dump(TINY_RUN))
    monkeypatch.chdir(tmp_path / "main")
    return tmp_path


def test_readme_commands_parse_and_run_at_a_tiny_size(project):
    commands = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert any(words[:1] == ["annotate"] for words in commands) and any(words[:1] == ["run"] for words in commands)
    runner, done, outputs = CliRunner(), set(), {}
    for words in commands:
        line = "elical " + shlex.join(words)
        name, params = parse(words)
        check_inputs(name, params, line)
        if name not in TINY or line in done:
            continue
        args = tiny_args(name, words, project / "tiny-model", project / "tiny-run.yaml")
        result = runner.invoke(app, args)
        assert result.exit_code == 0, f"`{line}` failed at a tiny size ({shlex.join(args)}):\n{result.output}"
        done.add(line)
        outputs[line] = result.output
    assert "ETA" in outputs["elical run"]  # the run says how long training has left


def test_readme_budgets_fit_the_pools_they_draw_from():
    """A train command's --budget is at most the questions its records file holds at the README's sizes."""
    from elical.data.loaders import load_items

    if not (SHARED / "data").is_dir():
        pytest.skip(f"../shared/data not found at {SHARED / 'data'} (the README's commands read it)")
    pools: dict[Path, int] = {}
    for words in readme_commands((ROOT / "README.md").read_text(encoding="utf-8")):
        name, params = parse(words)
        if name == "annotate":
            sources = [ROOT / source for source in params["data"]]
            pools[Path(params["out"]) / "records.parquet"] = sum(len(load_items(s, limit=params["limit"])) for s in sources)
        elif name == "train" and params["budget"] is not None:
            (pool,) = params["records"]
            assert pool in pools, f"train reads {pool}, which no README annotate command writes"
            assert params["budget"] <= pools[pool], f"--budget {params['budget']} > the {pools[pool]} questions of {pool}"


def test_commands_are_found_in_chains_and_comments_are_dropped():
    text = "```bash\npip install x && elical run --preset default  # note\n# elical nothing\nelical evaluate a \\\n  --out b\n```\n"
    assert readme_commands(text) == [["run", "--preset", "default"], ["evaluate", "a", "--out", "b"]]
