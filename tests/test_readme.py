"""Every `elical` command in README.md runs as written.

The commands of the README's bash blocks (any section, in order) are parsed by the real CLI (unknown options,
values outside a choice and missing arguments fail), their models must resolve and every path they read must
exist once the commands before them have run. Those of the pipeline's steps then run in that order with the
README's own values (--limit, --k, --budget, the default preset's budgets), from a folder with the first lines
of each ``../shared/data`` file beside it (enough lines for the README's budgets): a tiny model replaces the
named one (after the name resolves) and only settings the README leaves out are appended (epochs, tokens,
device). Commands without a tiny size here (a server, say) are parsed and checked only."""

from __future__ import annotations

import csv
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

# Options appended to run a step at a tiny size, none of them one the README's commands set; the model options
# are added where the step takes one.
TINY = {
    "annotate": ["--max-new-tokens", "4", "--device", "cpu", "--batch-size", "256"],
    "annotate-merge": [],
    "evaluate": ["--resamples", "10", "--alignment-repeats", "2"],
    "train": ["--set", "epochs_stage1=1", "--set", "epochs_stage2=1", "--set", "batch_size=4", "--set", "max_length=64"],
    "predict": ["--device", "cpu"],
    "select-labels": ["--device", "cpu"],
    "honesty-tune": ["--steps", "1", "--batch-size", "2", "--device", "cpu"],
    "honesty-eval": ["--max-new-tokens", "4", "--device", "cpu"],
    "run": [],  # --config with TINY_RUN
}
TAKES_MODEL = ("annotate", "train", "honesty-tune", "honesty-eval")
# `elical run` of the default preset (the packaged world LM) at a tiny size: its name, methods and label budgets
# are the preset's, so the files it writes are those the default run writes (seed 0 only); the pool holds the
# largest budget.
TINY_RUN = {
    "torch_threads": 1,
    "questions": {"max_train": 510, "max_eval_per_dataset": 6},
    "annotate": {"k": 3, "batch_size": 1024},
    "train": {"seeds": [0], "stage2_passes": 100, "max_epochs": 1, "min_epochs": 1,
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
    from elical.model.loading import ALIASES, resolve_model
    from extras import missing

    model = params.get("model")
    package = ALIASES.get(model.lower(), ("",))[0] if isinstance(model, str) else ""
    # the smollm2 alias resolves only where its optional package is installed (CI installs it)
    # a str model is an LM to resolve; a Path one (select-labels' stage-1 model folder) is a path read, checked below
    if isinstance(model, str) and name != "run" and not (package and missing(package)):
        resolve_model(model)
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
    if name == "run":
        extra += ["--config", str(run_config)]
    return words + extra


def budget_lines(commands: list[list[str]]) -> dict[Path, int]:
    """Lines of each ``../shared/data`` source (relative to it) that a README train command's --budget draws
    on through the annotate command that read it: the budget shared evenly over that command's sources."""
    read: dict[Path, list[str]] = {}  # records file -> the sources annotate read
    lines: dict[Path, int] = {}
    for words in commands:
        name, params = parse(words)
        if name == "annotate":
            read[Path(params["out"]) / "records.parquet"] = params["data"]
        elif name == "train" and params["budget"] is not None:
            for pool in params["records"]:
                for source in read[pool]:
                    lines[Path(source).relative_to("../shared/data")] = -(-params["budget"] // len(read[pool]))
    return lines


def copy_heads(source: Path, target: Path, longer: dict[Path, int], lines: int = 2) -> None:
    """The first ``lines`` rows (lines; CSV records, which may span lines) of every file under ``source``
    (``longer`` gives more to some), in the same places under ``target``."""
    for path in source.rglob("*"):
        if path.is_file():
            relative = path.relative_to(source)
            count = max([lines] + [n for where, n in longer.items() if where in (relative, *relative.parents)])
            copy = target / relative
            copy.parent.mkdir(parents=True, exist_ok=True)
            with path.open(encoding="utf-8", newline="") as handle, copy.open("w", encoding="utf-8", newline="") as out:
                if path.suffix == ".csv":
                    csv.writer(out).writerows(row for _, row in zip(range(count), csv.reader(handle)))
                else:
                    out.writelines(line for _, line in zip(range(count), handle))


@pytest.fixture
def project(tmp_path, monkeypatch, tiny_tokenizer, tiny_llama):
    """A project folder with a tiny ``../shared/data`` beside it (enough lines for the README's budgets), as
    the current folder; the tiny model and run config live outside it."""
    if not (SHARED / "data").is_dir():
        pytest.skip(f"../shared/data not found at {SHARED / 'data'} (the README's commands read it)")
    commands = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    copy_heads(SHARED / "data", tmp_path / "shared" / "data", budget_lines(commands))
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
        for key in OUTPUTS & params.keys():  # what the command names as its output exists too
            assert params[key] is None or Path(params[key]).exists(), f"`{line}` wrote no {params[key]}"
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


def test_readme_score_files_are_ones_the_default_run_writes():
    """Every runs/world-default/scores/ file a README command names is a model the default preset trains (its
    budgets and seeds), so the quickstart works after a plain `elical run`."""
    from elical.run.config import load_run_config
    from elical.run.pipeline import planned_models

    cfg = load_run_config("default")
    written = {f"runs/{cfg.name}/scores/{key.name}.parquet" for key in planned_models(cfg)}
    named = [str(item) for words in readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
             for value in parse(words)[1].values() for item in (value if isinstance(value, (list, tuple)) else [value])
             if "/scores/" in str(item) and str(item).startswith(f"runs/{cfg.name}/")]
    assert named, "the README names no score file of the default run"
    assert set(named) <= written, f"{sorted(set(named) - written)}: not written by `elical run` (it writes {sorted(written)})"
