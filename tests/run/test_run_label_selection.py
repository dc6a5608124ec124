"""`train.label_selection` in a run (issue 26): the plan, the recorded settings, and a tiny world run whose
Cal-Only and EliCal labels are the first of a strategy's order computed with Eli-Only of the same seed."""

from __future__ import annotations

import json

import pytest

from elical.run.config import load_run_config, planned_models
from elical.run.fingerprints import train_settings


def test_random_keeps_the_plan_and_settings_and_a_strategy_is_recorded():
    default = load_run_config(overrides={"train": {"methods": ["cal-only"], "budgets": [12, "all"], "seeds": [0]}})
    assert default.train.label_selection == "random"
    assert [k.name for k in planned_models(default)] == ["cal-only-12-s0", "cal-only-all-s0"]
    for key in planned_models(default):
        assert "label_selection" not in train_settings(default, key, "a")["train"]  # the settings of earlier runs
    chosen = default.model_copy(update={"train": default.train.model_copy(update={"label_selection": "uncertainty"})})
    # Cal-Only's labels now need Eli-Only's order: it is trained first
    assert [k.name for k in planned_models(chosen)] == ["eli-only-0-s0", "cal-only-12-s0", "cal-only-all-s0"]
    settings = {k.name: train_settings(chosen, k, "a")["train"] for k in planned_models(chosen)}
    assert settings["cal-only-12-s0"]["label_selection"] == "uncertainty"
    assert "label_selection" not in settings["cal-only-all-s0"] and "label_selection" not in settings["eli-only-0-s0"]
    with pytest.raises(ValueError, match="train.label_selection"):
        load_run_config(overrides={"train": {"label_selection": "smart"}})


def test_a_tiny_run_labels_what_the_strategy_chose(tmp_path):
    from elical.core.fingerprint import SettingsMismatch
    from elical.records import read_parquet
    from elical.run.pipeline import run_pipeline
    from elical.train.label_selection import cached_label_order

    overrides = {
        "name": "tiny", "torch_threads": 1,
        "questions": {"max_train": 40, "max_eval_per_dataset": 4},
        "annotate": {"k": 3, "batch_size": 48},
        "train": {"methods": ["cal-only", "elical"], "budgets": [12], "seeds": [0], "stage2_passes": 24,
                  "label_selection": "uncertainty", "settings": {"epochs_stage1": 1, "batch_size": 8}},
        "evaluate": {"n_resamples": 10, "alignment_repeats": 2},
        "honesty": None,
    }
    cfg = load_run_config(overrides=overrides)
    run = tmp_path / "run"
    run_pipeline(cfg, run, log=lambda _: None)
    cache = run / "models" / "eli-only-0-s0" / "selection-uncertainty.json"
    pool = read_parquet(run / "records" / "train.parquet")
    order = cached_label_order(pool, run / "models" / "eli-only-0-s0" / "model", strategy="uncertainty", seed=0,
                               cache=cache)
    dataset = {r.id: r.dataset for r in pool}
    # within each dataset the order runs from the least sure question (nearest 0.5) to the surest
    for name in set(dataset.values()):
        distances = [abs(order.confidence[rid] - 0.5) for rid in order.ids if dataset[rid] == name]
        assert distances == sorted(distances) and len(distances) > 1
    for name in ("cal-only-12-s0", "elical-12-s0"):
        saved = json.loads((run / "models" / name / "selection.json").read_text())
        assert saved["strategy"] == "uncertainty" and saved["chosen"] == list(order.ids[:12]), name
    assert "the first of the `uncertainty` order of the pool" in (run / "report.md").read_text()
    # another strategy on the same folder is refused before anything is trained again
    other = load_run_config(overrides={**overrides, "train": {**overrides["train"], "label_selection": "diverse"}})
    with pytest.raises(SettingsMismatch, match="label_selection"):
        run_pipeline(other, run, log=lambda _: None)
