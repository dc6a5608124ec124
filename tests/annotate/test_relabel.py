"""`elical relabel`: a finished annotation judged again into a new folder, with the tiny real model's generations.
The new folder holds the records `elical annotate` makes with those judges, and resumes as finished."""

from __future__ import annotations

import json

import pytest
from test_annotate_resume import annotate_args
from test_fingerprint import snapshot
from typer.testing import CliRunner

from elical.cli import app
from elical.records import read_parquet

JUDGED_BY_MATCH = ["--k", "3", "--judge", "match", "--consistency-judge", "match"]
JUDGED_EXACTLY = ["--judge", "exact", "--consistency-judge", "exact"]


@pytest.fixture
def annotated(tiny_tokenizer, tiny_llama, tmp_path):
    """The annotate arguments (their --out last) and a finished annotation judged by match in tmp_path/run."""
    args = [*annotate_args(tiny_tokenizer, tiny_llama, tmp_path), *JUDGED_BY_MATCH]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return args


def with_out(args: list[str], out) -> list[str]:
    at = args.index("--out")
    return [*args[:at], "--out", str(out), *args[at + 2 :]]


def test_relabelled_records_are_those_annotate_makes_with_the_new_judges(annotated, tmp_path):
    runner = CliRunner()
    source = tmp_path / "run"
    before = snapshot(source)
    result = runner.invoke(app, ["relabel", str(source), "--out", str(tmp_path / "relabelled"), *JUDGED_EXACTLY])
    assert result.exit_code == 0, result.output
    assert snapshot(source) == before  # the source folder is left as it is
    result = runner.invoke(app, [*with_out(annotated, tmp_path / "direct"), *JUDGED_EXACTLY])
    assert result.exit_code == 0, result.output
    relabelled = read_parquet(tmp_path / "relabelled" / "records.parquet")
    assert relabelled == read_parquet(tmp_path / "direct" / "records.parquet")  # labels and generation notes too
    assert {r.generation["judges"]["consistency"] for r in relabelled} == {"exact@5"}
    settings = json.loads((tmp_path / "relabelled" / "settings" / "annotate.json").read_text())
    assert settings == json.loads((tmp_path / "direct" / "settings" / "annotate.json").read_text())
    meta = json.loads((tmp_path / "relabelled" / "meta-0of1.json").read_text())
    assert meta["relabelled_from"] == str(source) and meta["annotated_now"] == 0
    old = read_parquet(source / "records.parquet")
    changed = sum(x != y for a, b in zip(old, relabelled) for x, y in zip(a.sample_consistent, b.sample_consistent))
    assert meta["labels_changed"]["sample_consistent"] == changed


def test_annotate_with_the_new_judges_finds_the_relabelled_folder_finished(annotated, tmp_path):
    runner = CliRunner()
    out = tmp_path / "relabelled"
    assert runner.invoke(app, ["relabel", str(tmp_path / "run"), "--out", str(out), *JUDGED_EXACTLY]).exit_code == 0
    records = read_parquet(out / "records.parquet")
    result = runner.invoke(app, [*with_out(annotated, out), *JUDGED_EXACTLY])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "meta-0of1.json").read_text())["annotated_now"] == 0  # nothing generated again
    assert read_parquet(out / "records.parquet") == records
    result = runner.invoke(app, with_out(annotated, out))  # the old judges: refused, as for any other settings
    assert result.exit_code == 2 and "judges" in result.output


def test_same_judges_in_a_new_folder_give_the_same_labels(annotated, tmp_path):
    result = CliRunner().invoke(app, ["relabel", str(tmp_path / "run"), "--out", str(tmp_path / "again")])
    assert result.exit_code == 0, result.output
    old, new = read_parquet(tmp_path / "run" / "records.parquet"), read_parquet(tmp_path / "again" / "records.parquet")
    assert new == old
    assert json.loads((tmp_path / "again" / "meta-0of1.json").read_text())["labels_changed"] == {
        "greedy_correct": 0, "sample_correct": 0, "sample_consistent": 0}


def test_bad_sources_and_targets_are_refused_in_one_line(annotated, tmp_path):
    runner = CliRunner()
    source = tmp_path / "run"
    result = runner.invoke(app, ["relabel", str(source), "--out", str(source)])
    assert result.exit_code == 2 and "another folder than the source" in result.output
    result = runner.invoke(app, ["relabel", str(tmp_path / "model"), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "not an annotation folder" in result.output
    result = runner.invoke(app, ["relabel", str(source), "--out", str(tmp_path / "x"), "--judge", "llm"])
    assert result.exit_code == 2 and "--judge-model" in result.output and not (tmp_path / "x").exists()
    (source / "records.parquet").rename(tmp_path / "kept.parquet")  # as a killed run leaves it
    result = runner.invoke(app, ["relabel", str(source), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "not finished" in result.output
    (tmp_path / "kept.parquet").rename(source / "records.parquet")
    out = tmp_path / "relabelled"
    assert runner.invoke(app, ["relabel", str(source), "--out", str(out), *JUDGED_EXACTLY]).exit_code == 0
    result = runner.invoke(app, ["relabel", str(source), "--out", str(out)])  # other judges than out's: refused
    assert result.exit_code == 2 and "--overwrite" in result.output
    result = runner.invoke(app, ["relabel", str(source), "--out", str(out), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert read_parquet(out / "records.parquet") == read_parquet(source / "records.parquet")



def test_labels_of_older_rules_are_judged_again_and_counted(annotated, tmp_path):
    """A folder whose labels an older rule made (here: every greedy answer labelled correct and every sample consistent,
    which the tiny model's answers are not) gets today's labels, and the meta file counts the labels that changed."""
    from elical.records import write_parquet

    source = tmp_path / "run"
    today = read_parquet(source / "records.parquet")
    older = read_parquet(source / "records.parquet")
    for rec in older:
        rec.greedy_correct, rec.sample_consistent = 1, [1] * rec.k
    write_parquet(older, source / "records.parquet")
    result = CliRunner().invoke(app, ["relabel", str(source), "--out", str(tmp_path / "relabelled")])
    assert result.exit_code == 0, result.output
    assert read_parquet(tmp_path / "relabelled" / "records.parquet") == today
    changed = json.loads((tmp_path / "relabelled" / "meta-0of1.json").read_text())["labels_changed"]
    assert changed == {"greedy_correct": sum(r.greedy_correct != 1 for r in today), "sample_correct": 0,
                       "sample_consistent": sum(c != 1 for r in today for c in r.sample_consistent)}
    assert changed["greedy_correct"] == 3  # the tiny model answers no question right
