"""Annotating into a folder made with other settings: refused by name with nothing written, unless the
setting does not change the records (then it resumes) or --overwrite starts over."""

from __future__ import annotations

import json
import time

import pytest
from test_annotate import CONFIG, make_items
from test_fingerprint import snapshot

from elical.annotate import AnnotateConfig, annotate
from elical.annotate.backends.hf import HFBackend
from elical.core.fingerprint import SettingsMismatch
from elical.records import read_parquet


@pytest.fixture
def backend(tiny_tokenizer, tiny_llama):
    return HFBackend(tiny_llama, tiny_tokenizer, batch_size=12)


def counting(backend) -> list[int]:
    """Count the backend's generate calls from now on."""
    calls: list[int] = []
    original = backend.generate
    backend.generate = lambda *a, **k: calls.append(1) or original(*a, **k)
    return calls


def test_another_k_is_refused_by_name_and_nothing_is_written(backend, tmp_path):
    items = make_items(6)
    annotate(items, backend, None, CONFIG, tmp_path, progress=False)  # k=3, every shard written
    before = snapshot(tmp_path)
    calls = counting(backend)
    other = CONFIG.model_copy(update={"k": 2, "temperature": 0.7})
    with pytest.raises(SettingsMismatch) as err:
        annotate(items, backend, None, other, tmp_path, progress=False)
    assert "k 3 → 2" in str(err.value) and "temperature 1.0 → 0.7" in str(err.value)
    assert "--overwrite" in str(err.value)
    assert not calls and snapshot(tmp_path) == before
    assert AnnotateConfig.from_yaml(tmp_path / "annotate.yaml").k == 3


def test_settings_that_do_not_change_records_resume(backend, tmp_path):
    items = make_items(8)
    first = annotate(items, backend, None, CONFIG.model_copy(update={"shard": "0/2"}), tmp_path, progress=False)
    calls = counting(backend)
    how = {"batch_size": 3, "chunk_size": 1, "device": "cpu", "retries": 5, "shared_prefix": False, "shard": "0/2",
           "judges": CONFIG.judges.model_copy(update={"batch_size": 7, "cache": False})}
    again = annotate(items, backend, None, CONFIG.model_copy(update=how), tmp_path, progress=False)
    assert not calls and [r.samples for r in again] == [r.samples for r in first]
    annotate(items, backend, None, CONFIG.model_copy(update={"shard": "1/2"}), tmp_path, progress=False)  # the other shard
    assert calls


def test_overwrite_starts_over_and_touches_nothing_else(backend, tmp_path):
    items = make_items(5)
    annotate(items, backend, None, CONFIG, tmp_path, progress=False)
    (tmp_path / "my_notes.txt").write_text("mine")
    two = CONFIG.model_copy(update={"k": 2})
    records = annotate(items, backend, None, two, tmp_path, progress=False, overwrite=True)
    assert all(r.k == 2 for r in records) and all(r.k == 2 for r in read_parquet(tmp_path / "records.parquet"))
    shards = sorted((tmp_path / "shards").glob("part-*.parquet"))
    assert sum(len(read_parquet(p)) for p in shards) == 5  # no k=3 shard left among them
    assert AnnotateConfig.from_yaml(tmp_path / "annotate.yaml").k == 2
    assert (tmp_path / "my_notes.txt").read_text() == "mine"
    assert json.loads((tmp_path / "settings" / "annotate.json").read_text())["settings"]["k"] == 2


def annotate_args(tokenizer, model, tmp_path) -> list[str]:
    """`elical annotate` arguments over 3 questions with the tiny model saved under tmp_path (no --k)."""
    from test_annotate import QUESTIONS

    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    data = tmp_path / "nq_test.jsonl"
    data.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in QUESTIONS[:3]))
    return ["annotate", str(data), "--model", str(tmp_path / "model"), "--max-new-tokens", "4", "--device", "cpu",
            "--out", str(tmp_path / "run")]


def test_cli_refuses_other_settings_and_retrained_weights_with_exit_2(tiny_tokenizer, tiny_llama, tmp_path):
    from typer.testing import CliRunner

    from elical.cli import app
    from tiny import build_model

    runner = CliRunner()
    args = annotate_args(tiny_tokenizer, tiny_llama, tmp_path)
    assert runner.invoke(app, [*args, "--k", "3"]).exit_code == 0
    before = snapshot(tmp_path / "run")
    result = runner.invoke(app, [*args, "--k", "2"])
    assert result.exit_code == 2 and "k 3 → 2" in result.output and "--overwrite" in result.output
    assert snapshot(tmp_path / "run") == before
    build_model(tiny_tokenizer, "llama", seed=1).save_pretrained(tmp_path / "model")  # retrained in place
    result = runner.invoke(app, [*args, "--k", "3"])
    assert result.exit_code == 2 and "annotate: its input (model) changed" in result.output
    result = runner.invoke(app, [*args, "--k", "2", "--overwrite"])
    assert result.exit_code == 0, result.output
    assert all(r.k == 2 for r in read_parquet(tmp_path / "run" / "records.parquet"))


def test_cli_fast_decode_is_recorded_so_a_folder_never_mixes_two_samplers(tiny_tokenizer, tiny_llama, tmp_path):
    from typer.testing import CliRunner

    from elical.cli import app

    runner = CliRunner()
    args = [*annotate_args(tiny_tokenizer, tiny_llama, tmp_path), "--k", "2", "--consistency-judge", "match"]
    assert runner.invoke(app, [*args, "--no-fast-decode"]).exit_code == 0
    result = runner.invoke(app, [*args, "--fast-decode"])
    assert result.exit_code == 2 and "fast_decode" in result.output and "--overwrite" in result.output
    result = runner.invoke(app, [*args, "--fast-decode", "--overwrite"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "run" / "settings" / "annotate.json").read_text())["settings"]["fast_decode"] is True
    assert all(len(r.samples) == 2 for r in read_parquet(tmp_path / "run" / "records.parquet"))


def test_new_judge_rules_are_refused_like_other_settings(backend, tmp_path, monkeypatch):
    """A judge whose rules changed (its version bumped) must not resume a folder labelled by the old rules."""
    from elical.annotate import judges

    items = make_items(4)
    annotate(items, backend, None, CONFIG, tmp_path, progress=False)
    kind = CONFIG.judges.correctness
    old = judges.judge_version(kind)
    monkeypatch.setitem(judges.JUDGE_VERSIONS, kind, judges.JUDGE_VERSIONS[kind] + 1)
    with pytest.raises(SettingsMismatch) as err:
        annotate(items, backend, None, CONFIG, tmp_path, progress=False)
    new = judges.judge_version(kind)
    assert f'judges.versions.correctness "{old}" → "{new}"' in str(err.value)


def test_cli_refuses_to_resume_over_edited_gold_answers_and_names_what_changed(tiny_tokenizer, tiny_llama, tmp_path):
    from test_annotate import QUESTIONS
    from typer.testing import CliRunner

    from elical.cli import app

    runner = CliRunner()
    args = [*annotate_args(tiny_tokenizer, tiny_llama, tmp_path), "--k", "1"]
    data = tmp_path / "nq_test.jsonl"
    assert runner.invoke(app, args).exit_code == 0
    before = snapshot(tmp_path / "run")
    rows = [{"question": q, "answer": a} for q, a in QUESTIONS[:3]]
    rows[1]["answer"] = ["an edited gold"]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "the data changed since these records were made" in result.output
    assert "gold answers" in result.output and "'an edited gold'" in result.output and "--overwrite" in result.output
    assert snapshot(tmp_path / "run") == before  # nothing rewritten, not even the config
    result = runner.invoke(app, [*args, "--overwrite"])
    assert result.exit_code == 0, result.output
    assert read_parquet(tmp_path / "run" / "records.parquet")[1].answers == ["an edited gold"]


def test_questions_added_to_the_data_are_annotated_on_resume(backend, tmp_path):
    items = make_items(6)
    annotate(items[:4], backend, None, CONFIG, tmp_path, progress=False)
    calls = counting(backend)
    records = annotate(items, backend, None, CONFIG, tmp_path, progress=False)
    assert calls and [r.id for r in records] == [it.id for it in items]


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs (no retry catches it)."""


def slowed(backend, seconds: float, die_after: int | None = None) -> list[int]:
    """Make each generate call take ``seconds``; raise Killed on call ``die_after`` (counted from 1)."""
    calls: list[int] = []
    original = backend.generate

    def generate(*args, **kwargs):
        calls.append(1)
        if die_after is not None and len(calls) == die_after:
            raise Killed
        time.sleep(seconds)
        return original(*args, **kwargs)

    backend.generate = generate
    return calls


def test_a_chunk_is_written_once_chunk_seconds_pass_even_if_not_full(backend, tmp_path):
    items = make_items(12)
    timed = CONFIG.model_copy(update={"chunk_size": 256, "chunk_seconds": 0.05})  # 4 questions per batch
    slowed(backend, 0.06)
    annotate(items, backend, None, timed, tmp_path, progress=False)
    parts = sorted((tmp_path / "shards").glob("part-*.parquet"))
    assert [len(read_parquet(p)) for p in parts] == [4, 4, 4]  # one batch each, far below 256
    assert AnnotateConfig(chunk_seconds=1).output_settings() == AnnotateConfig().output_settings()


def test_a_run_killed_after_a_timed_chunk_resumes_to_the_same_records(backend, tmp_path, monkeypatch):
    from elical.annotate import decoding

    monkeypatch.setattr(decoding, "FAST_DECODE_CHECK", 0)  # generate calls counted below are the annotation's only
    items = make_items(12)
    whole = annotate(items, backend, None, CONFIG, tmp_path / "whole", progress=False)
    timed = CONFIG.model_copy(update={"chunk_size": 256, "chunk_seconds": 0.05})
    slowed(backend, 0.06, die_after=4)  # each batch: a greedy and a sampling call; killed in the 2nd batch
    with pytest.raises(Killed):
        annotate(items, backend, None, timed, tmp_path / "run", progress=False)
    parts = sorted((tmp_path / "run" / "shards").glob("part-*.parquet"))
    assert [len(read_parquet(p)) for p in parts] == [4]  # the first batch's chunk survived the kill
    assert not list((tmp_path / "run" / "shards").glob("*.tmp*"))
    del backend.generate  # the process restarts: an unslowed backend
    calls = counting(backend)
    resumed = annotate(items, backend, None, timed.model_copy(update={"chunk_seconds": 600}), tmp_path / "run",
                       progress=False)
    assert resumed == whole and len(calls) == 4  # the 8 questions left, 4 per batch: greedy + samples each
    assert read_parquet(tmp_path / "run" / "records.parquet") == whole


def test_without_a_terminal_progress_is_plain_lines_at_intervals_with_rate_and_eta():
    import io

    from elical.annotate.progress import annotate_progress

    out = io.StringIO()  # not a terminal, as under nohup, Slurm or CI
    with annotate_progress(10, done=2, every=0.2, stream=out) as advance:
        advance(1)
        advance(1)  # within the interval: no line
        time.sleep(0.25)
        advance(2)
        time.sleep(0.25)
        advance(4)  # the last questions: a line whatever the interval
    lines = out.getvalue().splitlines()
    assert lines[0] == "annotating: 2/10 questions done, 8 to go"
    assert len(lines) == 3 and lines[1].startswith("annotating: 6/10 questions (60 %), ")
    assert "questions/s" in lines[1] and "ETA " in lines[1] and "ETA unknown" not in lines[1]
    assert lines[2].startswith("annotating: 10/10 questions (100 %)") and lines[2].endswith(", done")


def test_annotate_prints_progress_lines_when_stdout_is_not_a_terminal(backend, tmp_path, capsys):
    annotate(make_items(5), backend, None, CONFIG, tmp_path, progress=True)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("annotating:")]
    assert lines[0] == "annotating: 0/5 questions done, 5 to go" and lines[-1].startswith("annotating: 5/5 questions")


def test_cli_chunk_seconds_writes_a_shard_per_batch_and_a_rerun_with_another_value_resumes(tiny_tokenizer, tiny_llama,
                                                                                            tmp_path):
    from typer.testing import CliRunner

    from elical.cli import app

    runner = CliRunner()
    args = [*annotate_args(tiny_tokenizer, tiny_llama, tmp_path), "--k", "1", "--batch-size", "1"]
    result = runner.invoke(app, [*args, "--chunk-seconds", "0.001"])
    assert result.exit_code == 0, result.output
    assert len(list((tmp_path / "run" / "shards").glob("part-*.parquet"))) == 3  # one question per batch
    assert "annotating: 3/3 questions (100 %)" in result.output  # plain progress lines: no terminal here
    result = runner.invoke(app, [*args, "--chunk-seconds", "600"])
    assert result.exit_code == 0, result.output
    assert "annotating: 3/3 questions done, 0 to go" in result.output
