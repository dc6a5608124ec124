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
    report = (run / "report.md").read_text()
    assert "the first of the `uncertainty` order of the pool" in report
    # one strategy: no strategy comparison (the report as before)
    assert not (run / "label_strategies.csv").exists() and "label selection strategy and budget" not in report
    assert not (run / "settings" / "label-strategies.json").exists()
    # another strategy on the same folder is refused before anything is trained again
    other = load_run_config(overrides={**overrides, "train": {**overrides["train"], "label_selection": "diverse"}})
    with pytest.raises(SettingsMismatch, match="label_selection"):
        run_pipeline(other, run, log=lambda _: None)


# The settings digests elical 522c9c8 (before train.label_selection took a list) gives these models: a single
# strategy keeps them, and so do random's models in a list (their folders resume as they are).
HEAD_DIGESTS = {
    "random": {"cal-only-12-s0": "ebb246f1794eae97", "cal-only-all-s0": "7f4db6d204d6331e",
               "elical-12-s0": "8631741634ac9c64", "elical-all-s0": "6918dc19aa37f4f8"},
    "uncertainty": {"cal-only-12-s0": "eecd7145098d7262", "elical-12-s0": "0cff3e22af8fe873"},
}


def test_a_list_of_strategies_plans_one_model_per_strategy_and_keeps_single_strategy_runs():
    from elical.core.fingerprint import digest
    from elical.model.key import ModelKey

    def plan(selection):
        # lens, lens_top and stage2_refit off, stage2 full: the preset's trainer settings as they were at 522c9c8 (all became its
        # defaults later)
        cfg = load_run_config(overrides={"train": {"budgets": [12, "all"], "seeds": [0], "label_selection": selection,
                                                   "settings": {"lens": False, "lens_top": False,
                                                                "stage2_refit": False, "stage2": "full"}}})
        return cfg, {k.name: digest(train_settings(cfg, k, "a")) for k in planned_models(cfg)}

    for strategy, expected in HEAD_DIGESTS.items():
        cfg, digests = plan(strategy)
        assert list(digests) == ["eli-only-0-s0", "cal-only-12-s0", "cal-only-all-s0", "elical-12-s0", "elical-all-s0"]
        assert {name: digests[name] for name in expected} == expected
        assert plan([strategy])[1] == digests  # a one-item list is the same run
    cfg, digests = plan(["uncertainty", "random", "diverse"])
    assert list(digests) == ["eli-only-0-s0", "cal-only-uncertainty-12-s0", "cal-only-12-s0", "cal-only-diverse-12-s0",
                             "cal-only-all-s0", "elical-uncertainty-12-s0", "elical-12-s0", "elical-diverse-12-s0",
                             "elical-all-s0"]
    for name in HEAD_DIGESTS["random"]:  # random's models and the all-labels ones: today's names and settings
        assert digests[name] == HEAD_DIGESTS["random"][name]
    assert digests["cal-only-uncertainty-12-s0"] == HEAD_DIGESTS["uncertainty"]["cal-only-12-s0"]
    key = ModelKey("elical", 12, 0, selection="diverse")
    assert train_settings(cfg, key, "a")["train"]["label_selection"] == "diverse"
    assert ModelKey.from_dict(key.to_dict()) == key and "selection" not in ModelKey("elical", 12, 0).to_dict()
    # every other report section shows the first strategy's models (the all-labels ones are everyone's)
    assert [k.name for k in planned_models(cfg) if cfg.train.reported(k)] == [
        "eli-only-0-s0", "cal-only-uncertainty-12-s0", "cal-only-all-s0", "elical-uncertainty-12-s0", "elical-all-s0"]
    assert cfg.train.strategy_of(ModelKey("elical", 12, 0)) == "random"
    for bad, message in [(["random", "random"], "more than once"), ([], "got an empty list"),
                         (["random", "smart"], "train.label_selection")]:
        with pytest.raises(ValueError, match=message):
            load_run_config(overrides={"train": {"label_selection": bad}})
    with pytest.raises(ValueError, match="one comparison per run"):
        load_run_config(overrides={"train": {"label_selection": ["random", "uncertainty"], "select_on": "ood-holdout",
                                             "select_datasets": ["language"]}})
    for method, budget, selection in [("eli-only", None, "uncertainty"), ("elical", "all", "uncertainty"),
                                      ("elical", 12, "random"), ("elical", 12, "x")]:
        with pytest.raises(ValueError, match="label selection"):
            ModelKey(method, budget, 0, selection=selection)


def test_strategy_lines_in_the_label_figure():
    import pandas as pd

    from elical.report.figures import metric_vs_labels

    rows = []
    for method in ("Cal-Only", "EliCal"):
        for strategy, shift in (("random", 0.0), ("uncertainty", 0.02)):
            for budget, value in ((12, 0.6), (40, 0.7)):
                rows.append({"method": method, "strategy": strategy, "budget": budget, "split": "in-domain",
                             "metric": "auroc", "mean": value + shift, "std": 0.01, "n": 2})
    strategies = pd.DataFrame(rows)
    summary = pd.concat([strategies.drop(columns="strategy"),
                         pd.DataFrame([{"method": "Eli-Only", "budget": 0, "split": "in-domain", "metric": "auroc",
                                        "mean": 0.55, "std": 0.0, "n": 2}])], ignore_index=True)
    fig = metric_vs_labels(summary, "auroc", ["in-domain"], "/dev/null", "AUROC", [], strategies)
    assert fig.axes[0].get_legend() is None  # one legend under the panels, not one over each panel's lines
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert labels[:4] == ["Cal-Only \N{MIDDLE DOT} random", "Cal-Only \N{MIDDLE DOT} uncertainty",
                          "EliCal \N{MIDDLE DOT} random", "EliCal \N{MIDDLE DOT} uncertainty"]
    plain = metric_vs_labels(summary, "auroc", ["in-domain"], "/dev/null", "AUROC", [])
    assert [t.get_text() for t in plain.axes[0].get_legend().get_texts()][:2] == ["Cal-Only", "EliCal"]


def test_a_tiny_run_with_two_strategies(tmp_path):
    import pandas as pd

    from elical.core.fingerprint import SettingsMismatch, digest
    from elical.model.key import ModelKey
    from elical.records import read_parquet
    from elical.run.pipeline import run_pipeline
    from elical.train.label_selection import cached_label_order

    train = {"methods": ["cal-only", "elical"], "budgets": [12], "seeds": [0], "stage2_passes": 24,
             "label_selection": ["random", "uncertainty"], "settings": {"epochs_stage1": 1, "batch_size": 8}}
    overrides = {
        "name": "tiny", "torch_threads": 1,
        "questions": {"max_train": 40, "max_eval_per_dataset": 4},
        "annotate": {"k": 3, "batch_size": 48},
        "train": train,
        "evaluate": {"n_resamples": 10, "alignment_repeats": 2},
        "honesty": None,
    }
    cfg = load_run_config(overrides=overrides)
    run = tmp_path / "run"
    run_pipeline(cfg, run, log=lambda _: None)
    models = run / "models"
    pool = read_parquet(run / "records" / "train.parquet")
    order = cached_label_order(pool, models / "eli-only-0-s0" / "model", strategy="uncertainty", seed=0,
                               cache=models / "eli-only-0-s0" / "selection-uncertainty.json")
    for method in ("cal-only", "elical"):
        saved = json.loads((models / f"{method}-uncertainty-12-s0" / "selection.json").read_text())
        assert saved["strategy"] == "uncertainty" and saved["chosen"] == list(order.ids[:12])
        assert not (models / f"{method}-12-s0" / "selection.json").exists()  # random: today's draw, today's folder
        recorded = json.loads((run / "settings" / f"train-{method}-12-s0.json").read_text())
        single = load_run_config(overrides={**overrides, "train": {**train, "label_selection": "random"}})
        assert recorded["digest"] == digest(train_settings(single, ModelKey(method, 12, 0), recorded["settings"]
                                                           ["input"]["annotate"]))
    # every other section shows the first strategy (random): one Cal-Only and one EliCal model in results.csv
    results = pd.read_csv(run / "results.csv")
    assert len(results[(results.method == "EliCal") & (results.split == "in-domain") & (results.metric == "auroc")]) == 1
    # the strategy table: AUROC per strategy and budget, uncertainty's paired difference against random
    table = pd.read_csv(run / "label_strategies.csv")
    assert set(zip(table.method, table.strategy)) == {(m, s) for m in ("Cal-Only", "EliCal")
                                                      for s in ("random", "uncertainty")}
    assert set(table.split) <= {"in-domain", "ood"} and "in-domain" in set(table.split)
    assert table[table.strategy == "random"]["diff"].isna().all()
    mine = table[table.strategy == "uncertainty"]
    assert mine["diff"].notna().all() and (mine.ci_low <= mine["diff"]).all() and (mine["diff"] <= mine.ci_high).all()
    metrics = pd.read_csv(run / "metrics.csv")  # the random rows are the run's own evaluation's numbers
    at = metrics[(metrics.method == "elical-12-s0") & (metrics.dataset == "average") & (metrics.group == "in-domain")
                 & (metrics.metric == "auroc")]
    mine = table[(table.method == "EliCal") & (table.strategy == "random") & (table.split == "in-domain")]
    assert float(mine.auroc.iloc[0]) == pytest.approx(float(at.value.iloc[0]))
    report = (run / "report.md").read_text()
    assert "AUROC per label selection strategy and budget" in report and "| uncertainty |" in report
    assert "once per label selection strategy of ['random', 'uncertainty']" in report
    # a changed list is refused on resume (as changed stage2_candidates are); --overwrite trains the new one only
    scores = {p.name: p.stat().st_mtime_ns for p in (run / "scores").iterdir()}
    more = load_run_config(overrides={**overrides, "train": {**train,
                                                             "label_selection": ["random", "uncertainty", "diverse"]}})
    with pytest.raises(SettingsMismatch, match="label-strategies"):
        run_pipeline(more, run, log=lambda _: None)
    run_pipeline(more, run, log=lambda _: None, overwrite=True)
    after = {p.name: p.stat().st_mtime_ns for p in (run / "scores").iterdir()}
    assert {name: after[name] for name in scores} == scores  # nothing retrained
    assert {"cal-only-diverse-12-s0.parquet", "elical-diverse-12-s0.parquet"} <= set(after)
    assert set(pd.read_csv(run / "label_strategies.csv").strategy) == {"random", "uncertainty", "diverse"}
