"""`elical run` over a folder of other settings: each step compares the settings that decide its outputs,
a change is refused by step and setting, --overwrite redoes exactly the changed steps; names are names."""

from __future__ import annotations

import pytest
from test_fingerprint import snapshot

from elical.core.fingerprint import SettingsMismatch
from elical.run.config import load_run_config
from elical.run.steps.sequence import check_run_folder
from elical.run.subjects.by_name import build_subject

SMALL = {"questions": {"max_train": 30, "max_eval_per_dataset": 3}, "annotate": {"k": 4},
         "train": {"methods": ["eli-only", "cal-only", "elical"], "budgets": [10, "all"], "seeds": [0]},
         "honesty": {"budget": 10}}


def config(**changes):
    """The small run config with nested ``changes`` merged over it."""
    from elical.run.config import deep_merge

    return load_run_config(overrides=deep_merge(SMALL, changes))


MODELS = ("eli-only-0-s0", "cal-only-10-s0", "cal-only-all-s0", "elical-10-s0", "elical-all-s0")


def fake_outputs(out):
    """Files where each step puts its outputs (the check looks at settings, never at their contents)."""
    for path in ("records/train.parquet", "records/eval.parquet", "annotate/records.parquet", "honesty/run_honesty.json",
                 *(f"scores/{m}.parquet" for m in MODELS), *(f"models/{m}/model/x" for m in MODELS)):
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text("made with k=4")


@pytest.fixture(scope="module")
def subject():
    return build_subject(config())


def test_another_k_is_refused_naming_the_step_and_what_follows(tmp_path, subject):
    check_run_folder(config(), subject, tmp_path)
    fake_outputs(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(SettingsMismatch) as err:
        check_run_folder(config(annotate={"k": 2}), subject, tmp_path)
    message = str(err.value)
    assert "annotate: annotate.k 4 → 2" in message
    assert "train (5 models): its input (annotate) changed" in message and "honesty: its input" in message
    assert "--overwrite" in message and "new run name" in message
    assert snapshot(tmp_path) == before


def test_settings_that_do_not_change_outputs_resume(tmp_path, subject):
    check_run_folder(config(), subject, tmp_path)
    fake_outputs(tmp_path)
    before = snapshot(tmp_path)
    how = config(annotate={"batch_size": 7, "device": "cpu", "chunk_size": 3}, torch_threads=1,
                 train={"settings": {"micro_batch_size": 4, "packing": False, "save_steps": 5}},
                 evaluate={"n_resamples": 7, "alignment_repeats": 1},  # evaluation is recomputed every run
                 honesty={"settings": {"batch_size": 3, "tune": {"device": "cpu"}}})
    assert check_run_folder(how, subject, tmp_path) == []
    assert snapshot(tmp_path) == before


def test_overwrite_redoes_the_changed_steps_only(tmp_path, subject):
    check_run_folder(config(), subject, tmp_path)
    fake_outputs(tmp_path)
    faster = config(train={"settings": {"lr": 1e-3}})
    with pytest.raises(SettingsMismatch) as err:
        check_run_folder(faster, subject, tmp_path)
    message = str(err.value)
    lr = load_run_config().train.settings.lr
    assert "annotate: " not in message and f"train (5 models): train.settings.lr {lr} → 0.001" in message
    assert "honesty: its input (gate) changed" in message
    redone = check_run_folder(faster, subject, tmp_path, overwrite=True)
    assert set(redone) == {*(f"train-{m}" for m in MODELS), "honesty"}
    assert (tmp_path / "records" / "train.parquet").exists() and (tmp_path / "annotate").exists()
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())
    assert not list((tmp_path / "scores").glob("*.parquet")) and not (tmp_path / "honesty").exists()
    assert check_run_folder(faster, subject, tmp_path) == []  # the new settings are the folder's now


def test_outputs_of_a_run_without_settings_are_refused(tmp_path, subject):
    fake_outputs(tmp_path)
    with pytest.raises(SettingsMismatch, match="annotate: its outputs were written without a settings record"):
        check_run_folder(config(), subject, tmp_path)


@pytest.mark.parametrize("name", ["../../x", "a/b", ".hidden", "", "x\\y", "..", "/abs"])
def test_run_and_preset_names_must_be_names(name):
    with pytest.raises(ValueError, match="is not a name"):
        load_run_config(overrides={"name": name})
    with pytest.raises(ValueError, match="is not a name"):
        load_run_config(preset=name)


def test_cli_rejects_a_path_for_a_name_with_exit_2(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from elical.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil.yaml").write_text("name: ../../x\n")
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--config", str(tmp_path / "evil.yaml")])
    assert result.exit_code == 2 and "run name '../../x' is not a name" in result.output
    result = runner.invoke(app, ["run", "--preset", "../../any/file"])
    assert result.exit_code == 2 and "preset '../../any/file' is not a name" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.yaml"]


def test_run_pipeline_refuses_before_writing_anything(tmp_path, subject):
    """`elical run` over a k=4 run with k: 2: refused by the pipeline itself, the folder left as it was."""
    from elical.run.pipeline import run_pipeline

    check_run_folder(config(), subject, tmp_path)
    fake_outputs(tmp_path)
    config().to_yaml(tmp_path / "config.yaml")
    before = snapshot(tmp_path)
    with pytest.raises(SettingsMismatch, match="annotate.k 4 → 2"):
        run_pipeline(config(annotate={"k": 2}), tmp_path, log=lambda _: None)
    assert snapshot(tmp_path) == before
