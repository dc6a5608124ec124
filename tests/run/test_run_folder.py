"""The run folder's paths (RunFolder) and `elical run` as a loop over steps (run/steps/sequence.py): each step's
outputs lie in the folder and are listed once, its inputs come before it, and 'done' reads the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from elical.core.fingerprint import SETTINGS_DIR
from elical.model.key import ModelKey
from elical.run.config import deep_merge, load_run_config, planned_models
from elical.run.fingerprints import annotate_settings, honesty_settings, train_settings
from elical.run.folder import AUDIT_DIR, RunFolder
from elical.run.steps.sequence import RunContext, run_steps
from elical.run.subjects.by_name import build_subject

SMALL = {"questions": {"max_train": 30, "max_eval_per_dataset": 3}, "annotate": {"k": 4},
         "train": {"methods": ["eli-only", "cal-only", "elical"], "budgets": [10, "all"], "seeds": [0]},
         "honesty": {"budget": 10}, "retrieval": {"k": 1}}


def test_run_folder_names_every_path_of_the_layout(tmp_path):
    folder = RunFolder(str(tmp_path))  # a str is taken as a path
    key = ModelKey("elical", 10, 0)
    shown = {name: getattr(folder, name).relative_to(tmp_path).as_posix() for name in (
        "config", "annotate", "records", "pool", "evaluation_records", "models", "scores", "settings", "honesty",
        "honesty_info", "honesty_table", "retrieval", "retrieval_summary", "audit", "figures", "metrics_csv",
        "results_csv", "summary_csv", "differences_csv", "table2", "exposure_csv", "findings", "report_md",
        "report_html", "timings")}
    assert shown == {
        "config": "config.yaml", "annotate": "annotate", "records": "records", "pool": "records/train.parquet",
        "evaluation_records": "records/eval.parquet", "models": "models", "scores": "scores", "settings": SETTINGS_DIR,
        "honesty": "honesty", "honesty_info": "honesty/run_honesty.json",
        "honesty_table": "honesty/honesty_comparison.csv", "retrieval": "retrieval",
        "retrieval_summary": "retrieval/summary.json", "audit": AUDIT_DIR, "figures": "figures",
        "metrics_csv": "metrics.csv", "results_csv": "results.csv", "summary_csv": "summary.csv",
        "differences_csv": "differences.csv", "table2": "table2.md", "exposure_csv": "consistency_by_exposure.csv",
        "findings": "findings.json", "report_md": "report.md", "report_html": "report.html", "timings": "timings.json"}
    assert folder.model(key) == tmp_path / "models" / "elical-10-s0"
    assert folder.weights(key) == tmp_path / "models" / "elical-10-s0" / "model"
    assert folder.score_file(key) == tmp_path / "scores" / "elical-10-s0.parquet"
    assert folder.dataset_records("capital", "test") == tmp_path / "records" / "capital_test.parquet"
    assert not any(tmp_path.iterdir())  # naming a path creates nothing


@pytest.fixture(scope="module")
def plan():
    cfg = load_run_config(overrides=SMALL)
    return cfg, build_subject(cfg)


def steps_in(cfg, subject, root: Path):
    return run_steps(RunContext(cfg, subject, RunFolder(root), log=lambda _: None))


def test_the_run_is_a_loop_over_steps_whose_outputs_are_listed_once(plan, tmp_path):
    cfg, subject = plan
    steps = steps_in(cfg, subject, tmp_path)
    assert [s.name for s in steps.loop()] == ["annotate", "train", "evaluate", "honesty", "retrieval", "report"]
    models = [f"train-{key.name}" for key in planned_models(cfg)]
    assert [s.name for s in steps.recorded()] == ["annotate", *models, "select-stage2", "honesty", "retrieval"]
    seen: list[Path] = []
    for step in steps.recorded():  # select-stage2: settings only (select_on none here), so a switch is refused
        assert step.settings() is not None and (step.outputs() or step.name == "select-stage2")
        for path in step.outputs():
            assert path.is_relative_to(tmp_path) and not any(path.is_relative_to(p) or p.is_relative_to(path)
                                                              for p in seen), path
        seen += step.outputs()
    # what a step reads was made before it, so the loop hands it values, never files
    order = {s.name: i for i, s in enumerate(steps.loop())}
    placed = {**order, **{name: order["train"] for name in models}}
    for step in steps.loop():
        assert all(placed[i.name] < placed[step.name] for i in step.inputs), step.name
    assert {i.name for i in steps.report.inputs} == {"annotate", "evaluate", "honesty", "retrieval"}
    assert [i.name for i in steps.honesty.inputs] == ["annotate", "train-elical-10-s0"]
    # evaluation and the report are recomputed on every run: no settings, never done
    assert steps.evaluate.settings() is None and steps.report.settings() is None
    assert not steps.evaluate.done() and not steps.report.done()


def test_step_settings_are_the_fingerprints(plan, tmp_path):
    """The settings recorded in settings/<step>.json are run/fingerprints.py's, wired by digest."""
    from elical.core.fingerprint import digest

    cfg, subject = plan
    steps = steps_in(cfg, subject, tmp_path)
    annotate = annotate_settings(cfg, subject)
    assert steps.annotate.settings() == annotate
    gate = ModelKey("elical", 10, 0)
    assert steps.train.models[gate].settings() == train_settings(cfg, gate, digest(annotate))
    assert steps.honesty is not None
    assert steps.honesty.settings() == honesty_settings(cfg, digest(annotate), digest(train_settings(cfg, gate, digest(annotate))))


def test_done_is_read_from_the_folder_and_values_only_after_a_run(plan, tmp_path):
    cfg, subject = plan
    steps = steps_in(cfg, subject, tmp_path)
    assert not any(s.done() for s in steps.loop())
    with pytest.raises(RuntimeError, match="annotate: its value is read before the step ran"):
        steps.annotate.value  # noqa: B018
    folder = RunFolder(tmp_path)
    for path in (folder.pool, folder.evaluation_records, folder.honesty_info, folder.honesty_table,
                 folder.retrieval_summary, *(folder.score_file(k) for k in planned_models(cfg)[:-1])):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    assert steps.annotate.done() and steps.honesty.done() and steps.retrieval.done()
    assert [m.done() for m in steps.train.models.values()] == [True] * (len(steps.train.models) - 1) + [False]
    assert not steps.train.done()  # one model still to train
    folder.score_file(planned_models(cfg)[-1]).write_text("")
    assert steps.train.done()


def test_another_setting_is_refused_through_the_step_list(plan, tmp_path):
    """check_run_folder checks the steps' own settings and outputs (tests/run/test_run_resume.py covers more)."""
    from elical.core.fingerprint import SettingsMismatch
    from elical.run.steps.sequence import check_run_folder

    cfg, subject = plan
    assert check_run_folder(cfg, subject, tmp_path) == []
    assert sorted(p.name for p in RunFolder(tmp_path).settings.iterdir()) == sorted(
        f"{s.name}.json" for s in steps_in(cfg, subject, tmp_path).recorded())
    RunFolder(tmp_path).retrieval.mkdir()  # an output made with k=1
    RunFolder(tmp_path).retrieval_summary.write_text("{}")
    with pytest.raises(SettingsMismatch, match="retrieval: retrieval.answers.k 1 → 2"):
        check_run_folder(load_run_config(overrides=deep_merge(SMALL, {"retrieval": {"k": 2}})), subject, tmp_path)
