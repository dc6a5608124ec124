"""Settings fingerprints: a folder refuses a step of other settings, names them, and writes nothing."""

from __future__ import annotations

import pytest

from elical.core.fingerprint import (
    SettingsMismatch,
    check_or_write_settings,
    clear_outputs,
    differences,
    digest,
    path_version,
    recorded_settings,
)


def snapshot(folder):
    """Every file under ``folder`` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_differences_name_nested_settings_old_and_new():
    old = {"k": 5, "judges": {"correctness": "match", "threshold": 0.8}, "verbal": []}
    new = {"k": 2, "judges": {"correctness": "llm", "threshold": 0.8}, "verbal": ["verbal-0"], "extra": 1}
    found = {d.key: str(d) for d in differences(old, new)}
    assert found == {"k": "k 5 → 2", "judges.correctness": 'judges.correctness "match" → "llm"',
                     "verbal": 'verbal [] → ["verbal-0"]', "extra": "extra (unset) → 1"}
    assert differences(old, dict(old)) == []
    assert digest({"a": (1, 2)}) == digest({"a": [1, 2]}) != digest({"a": [2, 1]})


def test_a_changed_setting_is_refused_by_name_and_nothing_is_written(tmp_path):
    out = tmp_path / "step"
    outputs = [out / "shards", out / "records.parquet"]
    check_or_write_settings(out, {"k": 5, "seed": 0}, False, "annotate", outputs)
    (out / "shards").mkdir()
    (out / "shards" / "part-0.parquet").write_bytes(b"k=5 records")
    (out / "records.parquet").write_bytes(b"all k=5 records")
    (out / "notes.txt").write_text("the user's own file")
    before = snapshot(out)
    check_or_write_settings(out, {"k": 5, "seed": 0}, False, "annotate", outputs)  # same settings: resume
    with pytest.raises(SettingsMismatch) as err:
        check_or_write_settings(out, {"k": 2, "seed": 0}, False, "annotate", outputs)
    message = str(err.value)
    assert "annotate: k 5 → 2" in message and "--overwrite" in message and "new folder" in message
    assert "seed" not in message
    assert snapshot(out) == before
    # overwrite deletes exactly the step's outputs and records the new settings
    check_or_write_settings(out, {"k": 2, "seed": 0}, True, "annotate", outputs)
    assert not (out / "shards").exists() and not (out / "records.parquet").exists()
    assert (out / "notes.txt").read_text() == "the user's own file"
    assert recorded_settings(out, "annotate") == {"k": 2, "seed": 0}


def test_outputs_without_a_settings_record_are_refused(tmp_path):
    (tmp_path / "records.parquet").write_bytes(b"made before settings were recorded")
    with pytest.raises(SettingsMismatch, match="without a settings record"):
        check_or_write_settings(tmp_path, {"k": 2}, False, "annotate", [tmp_path / "records.parquet"])
    assert recorded_settings(tmp_path, "annotate") is None


def test_an_upstream_change_is_named_as_the_input_that_changed(tmp_path):
    check_or_write_settings(tmp_path, {"lr": 1e-4, "input": {"annotate": "aaa"}}, False, "train")
    with pytest.raises(SettingsMismatch, match=r"train: its input \(annotate\) changed"):
        check_or_write_settings(tmp_path, {"lr": 1e-4, "input": {"annotate": "bbb"}}, False, "train")


def test_clearing_never_leaves_the_folder(tmp_path):
    (tmp_path / "outside.txt").write_text("keep")
    with pytest.raises(ValueError, match="outside"):
        clear_outputs(tmp_path / "run", "annotate", [tmp_path / "run" / ".." / "outside.txt"])
    assert (tmp_path / "outside.txt").exists()


def test_path_version_follows_content(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"\x00" * 10)
    first = path_version(model)
    assert first == path_version(model) and path_version(tmp_path / "absent") is None
    (model / "weights.bin").write_bytes(b"\x01" * 10)
    assert path_version(model) != first


def test_a_step_that_made_nothing_yet_takes_the_new_settings(tmp_path):
    """A run stopped before a step wrote anything may change that step's settings."""
    check_or_write_settings(tmp_path, {"lr": 1e-4}, False, "train", [tmp_path / "model"])
    check_or_write_settings(tmp_path, {"lr": 1e-3}, False, "train", [tmp_path / "model"])
    assert recorded_settings(tmp_path, "train") == {"lr": 1e-3}
    (tmp_path / "model").mkdir()
    with pytest.raises(SettingsMismatch, match="lr 0.001 → 0.0001"):
        check_or_write_settings(tmp_path, {"lr": 1e-4}, False, "train", [tmp_path / "model"])
