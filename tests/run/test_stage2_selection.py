"""`train.select_on: ood-holdout` (issue 23, item 2): EliCal trained once per stage-2 recipe, the recipe
chosen on held-out datasets that are neither the pool nor reported, and the report on the other sets."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from elical.core.fingerprint import SettingsMismatch
from elical.core.inputs import InputError
from elical.model.key import ModelKey
from elical.records import Record
from elical.run.config import deep_merge, load_run_config, planned_models
from elical.run.stage2_selection import (
    AUROC_COLUMNS,
    SECTION,
    check_selection_datasets,
    choose_recipe,
    model_aurocs,
    selection_blocks,
)

SELECT = {"select_on": "ood-holdout", "select_datasets": ["language", "sport"]}
SMALL = {"questions": {"max_train": 30, "max_eval_per_dataset": 3}, "annotate": {"k": 4},
         "train": {"methods": ["eli-only", "cal-only", "elical"], "budgets": [10, "all"], "seeds": [0]},
         "honesty": {"budget": 10}}


def config(**train):
    return load_run_config(overrides=deep_merge(SMALL, {"train": train}))


# ------------------------------------------------------------------------------------------ config


@pytest.mark.parametrize(("train", "message"), [
    ({"select_on": "ood-holdout"}, "select_on ood-holdout needs select_datasets"),
    ({"select_datasets": ["language"]}, "select_datasets applies with select_on: ood-holdout"),
    ({"stage2_candidates": ["full", "platt"]}, "stage2_candidates applies with select_on: ood-holdout"),
    ({**SELECT, "settings": {"stage2": "platt"}}, "settings.stage2 platt sets one recipe"),
    ({**SELECT, "methods": ["eli-only", "cal-only"]}, "add 'elical' to methods"),
    ({**SELECT, "stage2_candidates": ["platt"]}, "must list at least 2 values"),
    ({**SELECT, "stage2_candidates": ["platt", "platt"]}, "lists 'platt' more than once"),
    ({**SELECT, "stage2_candidates": ["full", "ewc"]}, "train.stage2_candidates"),
    ({"settings": {"stage2": "l2sp", "stage2_l2sp": -1}}, "stage2_l2sp"),
    ({"select_on": "in-domain"}, "train.select_on"),
])
def test_bad_selection_settings_are_one_line_errors(train, message):
    with pytest.raises(InputError) as err:
        config(**train)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_selection_datasets_must_be_evaluated_and_outside_the_pool():
    cfg = config(**SELECT)
    evaluated = ["birth_city", "language", "sport", "multihop"]
    check_selection_datasets(cfg, pool=["birth_city"], evaluated=evaluated)  # fine
    with pytest.raises(InputError, match=r"\['sport'\] are not evaluated datasets of this run.*\['language'\]"):
        check_selection_datasets(cfg, pool=["birth_city"], evaluated=["birth_city", "language"])
    with pytest.raises(InputError, match=r"\['language'\] have questions in the calibration pool"):
        check_selection_datasets(cfg, pool=["birth_city", "language"], evaluated=evaluated)
    with pytest.raises(InputError, match="every evaluated dataset; keep at least one to report on"):
        check_selection_datasets(cfg, pool=[], evaluated=["language", "sport"])


def test_the_world_subject_refuses_a_pool_relation_before_anything_is_written(tmp_path):
    from elical.run.pipeline import run_pipeline

    cfg = load_run_config(overrides=deep_merge(SMALL, {"train": {**SELECT, "select_datasets": ["profession"]}}))
    with pytest.raises(InputError, match=r"\['profession'\] have questions in the calibration pool, so they are not "
                                         r"held out; choose among \['language', 'mc', 'multihop', 'paraphrase', 'sport'\]"):
        run_pipeline(cfg, tmp_path / "run", log=lambda _: None)
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------ keys


def test_a_recipe_candidate_is_its_own_model_and_old_names_stay():
    key = ModelKey("elical", 100, 0, "platt")
    assert key.name == "elical-platt-100-s0" and ModelKey("elical", 100, 0).name == "elical-100-s0"
    assert key.display(1500) == "EliCal (100)"
    assert ModelKey("elical", 100, 0).to_dict() == {"method": "elical", "budget": 100, "seed": 0}  # as before
    assert ModelKey.from_dict(json.loads(json.dumps(key.to_dict()))) == key
    assert ModelKey.from_dict({"method": "elical", "budget": "all", "seed": 1}) == ModelKey("elical", "all", 1)
    assert sorted([key, ModelKey("elical", 100, 0, "full"), ModelKey("elical", 100, 0)]) == [
        ModelKey("elical", 100, 0), ModelKey("elical", 100, 0, "full"), key]
    with pytest.raises(ValueError, match="belongs to EliCal, not to cal-only"):
        ModelKey("cal-only", 100, 0, "platt")
    with pytest.raises(ValueError, match="unknown stage-2 recipe 'ewc'"):
        ModelKey("elical", 100, 0, "ewc")
    assert ModelKey("elical", 100, 0, "l2sp").name == "elical-l2sp-100-s0"


def test_a_recipe_key_round_trips_through_a_prediction_file(tmp_path):
    from elical.model.predictions import read_predictions, write_predictions

    key = ModelKey("elical", "all", 2, "mixed")
    write_predictions(tmp_path / "p.parquet", ["a", "b"], [0.2, 0.9], key.name, {}, key=key)
    back = read_predictions(tmp_path / "p.parquet")
    assert back.key == key and back.method == "elical-mixed-all-s2"


def test_the_plan_trains_elical_once_per_candidate_from_one_stage_1():
    from elical.run.folder import RunFolder
    from elical.run.steps.training_step import stage1_source

    cfg = config(**SELECT, stage2_candidates=["platt", "full"])
    assert [k.name for k in planned_models(cfg)] == [
        "eli-only-0-s0", "cal-only-10-s0", "cal-only-all-s0", "elical-platt-10-s0", "elical-full-10-s0",
        "elical-platt-all-s0", "elical-full-all-s0"]
    folder = RunFolder("run")
    assert {stage1_source(folder, k) for k in planned_models(cfg) if k.method == "elical"} == {
        folder.model(ModelKey("eli-only", None, 0))}


def test_l2sp_is_a_candidate_by_name_with_its_alpha_in_the_models_settings(tmp_path, subject):
    from elical.core.fingerprint import digest
    from elical.run.fingerprints import train_settings
    from elical.run.folder import RunFolder
    from elical.run.steps.sequence import check_run_folder
    from elical.run.steps.training_step import train_config

    assert config(**SELECT).train.stage2_candidates == ["full", "head", "platt", "mixed"]  # the default, as before
    cfg = config(**SELECT, stage2_candidates=["full", "l2sp"], settings={"stage2_l2sp": 0.5})
    key = ModelKey("elical", 10, 0, "l2sp")
    assert [k.name for k in planned_models(cfg) if k.method == "elical"] == [
        "elical-full-10-s0", "elical-l2sp-10-s0", "elical-full-all-s0", "elical-l2sp-all-s0"]
    trainer = train_config(cfg, subject, RunFolder(tmp_path), key, 30)
    assert (trainer.stage2, trainer.stage2_l2sp) == ("l2sp", 0.5)
    assert train_settings(cfg, key, "A")["train"]["settings"]["stage2_l2sp"] == 0.5
    one = config(settings={"stage2": "l2sp", "stage2_l2sp": 0.5})  # the candidate is the run of that one recipe
    assert train_settings(cfg, key, "A") == train_settings(one, ModelKey("elical", 10, 0), "A")
    assert "stage2_l2sp" not in train_settings(cfg, ModelKey("elical", 10, 0, "full"), "A")["train"]["settings"]
    other = config(**SELECT, stage2_candidates=["full", "l2sp"], settings={"stage2_l2sp": 2.0})
    assert digest(train_settings(other, key, "A")) != digest(train_settings(cfg, key, "A"))
    assert (digest(train_settings(other, ModelKey("elical", 10, 0, "full"), "A"))
            == digest(train_settings(cfg, ModelKey("elical", 10, 0, "full"), "A")))  # alpha decides l2sp's only
    # a changed alpha is refused on resume, naming the l2sp models
    check_run_folder(one, subject, tmp_path)
    RunFolder(tmp_path).model(ModelKey("elical", 10, 0)).mkdir(parents=True)  # the model's output
    with pytest.raises(SettingsMismatch, match=r"train-elical-10-s0: .*stage2_l2sp 0\.5 → 2\.0"):
        check_run_folder(config(settings={"stage2": "l2sp", "stage2_l2sp": 2.0}), subject, tmp_path)


# ------------------------------------------------------------------------------------------ the rule


def aurocs(values: dict[tuple[str, object, int], dict[str, float]]) -> pd.DataFrame:
    """Rows of model_aurocs from {(recipe, budget, seed): {dataset: auroc}}."""
    return pd.DataFrame([{"recipe": r, "budget": b, "seed": s, "dataset": d, "group": "ood", "questions": 50,
                          "auroc": v} for (r, b, s), per in values.items() for d, v in per.items()],
                        columns=AUROC_COLUMNS)


def test_the_recipe_of_highest_mean_over_datasets_budgets_and_seeds_wins():
    # full wins at 100 labels (0.80 vs 0.70) but loses on average: one choice for every budget
    table = aurocs({
        ("full", 100, 0): {"a": 0.80, "b": 0.80, "r": 0.99}, ("full", "all", 0): {"a": 0.60, "b": 0.50, "r": 0.99},
        ("platt", 100, 0): {"a": 0.70, "b": 0.70, "r": 0.10}, ("platt", "all", 0): {"a": 0.72, "b": 0.70, "r": 0.10},
        ("eli-only", None, 0): {"a": 0.90, "b": 0.90, "r": 0.50},
    })
    chosen = choose_recipe(table, ["full", "platt"], ["a", "b"])
    assert chosen.winner == "platt"  # r, a reported set, is never read: full would win there
    assert chosen.scores == pytest.approx({"full": 0.675, "platt": 0.705})
    assert chosen.per_budget().loc["full", "100"] == pytest.approx(0.80)
    assert chosen.per_dataset().loc["eli-only", "a"] == pytest.approx(0.90)
    assert chosen.key(100, 0) == ModelKey("elical", 100, 0, "platt")
    assert chosen.reported().loc["full", "ood"] == pytest.approx(0.99)


def test_a_tie_goes_to_the_earlier_candidate_and_undefined_datasets_are_left_out():
    table = aurocs({("head", 10, 0): {"a": 0.7, "flat": math.nan}, ("mixed", 10, 0): {"a": 0.7, "flat": math.nan}})
    assert choose_recipe(table, ["mixed", "head"], ["a", "flat"]).winner == "mixed"
    chosen = choose_recipe(table, ["head", "mixed"], ["a", "flat"])
    assert chosen.winner == "head" and chosen.used == ["a"]
    with pytest.raises(ValueError, match=r"train.select_datasets \['flat'\]: no candidate AUROC is defined"):
        choose_recipe(table, ["head", "mixed"], ["flat"])


def _record(i: int, dataset: str, correct: bool) -> Record:
    return Record(id=f"{dataset}{i}", question=f"q{i}", answers=["a"], dataset=dataset, split="test",
                  greedy_correct=int(correct))


def test_aurocs_are_measured_per_model_and_dataset_from_predictions():
    from elical.model.predictions import Predictions

    records = [_record(i, d, i % 2 == 0) for d in ("a", "b") for i in range(4)]
    right = {r.id: (0.9 if r.greedy_correct else 0.1) for r in records}  # a perfect ranking
    flipped = {i: 1 - c for i, c in right.items()}
    keys = {ModelKey("elical", 5, 0, "full"): right, ModelKey("elical", 5, 0, "platt"): flipped,
            ModelKey("eli-only", None, 0): right, ModelKey("cal-only", 5, 0): right}
    preds = {k: Predictions(k.name, conf, key=k) for k, conf in keys.items()}
    table = model_aurocs(records, preds, {"a": "ood", "b": "ood"})
    assert set(table.recipe) == {"full", "platt", "eli-only"}  # Cal-Only is not a candidate
    got = table.set_index(["recipe", "dataset"]).auroc
    assert got[("full", "a")] == 1.0 and got[("platt", "b")] == 0.0 and set(table.questions) == {4}
    assert choose_recipe(table, ["platt", "full"], ["a"]).winner == "full"


def test_the_report_section_shows_the_candidates_the_winner_and_a_sentence():
    from elical.report.document import Document, to_markdown

    table = aurocs({("full", 10, 0): {"language": 0.61, "sport": 0.63, "multihop": 0.7},
                    ("platt", 10, 0): {"language": 0.66, "sport": 0.70, "multihop": 0.6},
                    ("eli-only", None, 0): {"language": 0.65, "sport": 0.69, "multihop": 0.6}})
    md = to_markdown(Document("t", selection_blocks(choose_recipe(table, ["full", "platt"], ["language", "sport"]))))
    assert f"## {SECTION}" in md
    assert "| platt (chosen) | 0.660 | 0.700 | 0.680 | 0.600 |" in md
    assert "| Eli-Only (stage 1, reference) | 0.650 | 0.690 | 0.670 | 0.600 |" in md
    assert "**platt** was chosen (score 0.680, +0.060 over full)" in md
    assert "neither in the calibration pool nor in any other table" in md


# ------------------------------------------------------------------------------------------ resume


# The settings digests of tests/run/test_run_resume.py's small plan computed by the code before select_on
# (1c1592e), with the annotate step's digest given as "A" (that one holds the world LM's absolute path)
HEAD = {"eli-only-0-s0": "97524122fe3f5e3a", "cal-only-10-s0": "2f93b9025009262b",
        "cal-only-all-s0": "98c510f7f9686151", "elical-10-s0": "e987c28b726aacc3",
        "elical-all-s0": "ac40766b45bfb607", "honesty": "8ed42b0b221daf52"}


@pytest.fixture(scope="module")
def subject():
    from elical.run.subjects.by_name import build_subject

    return build_subject(config())


def test_select_on_none_keeps_every_digest_of_before():
    from elical.core.fingerprint import digest
    from elical.run.fingerprints import honesty_settings, train_settings
    from elical.run.steps.honesty_step import gate_choice

    # HEAD's digests: the preset before lens, lens_top and stage2_refit were on and before stage2 wise was the default
    lens_off = {"settings": {"lens": False, "lens_top": False, "stage2_refit": False, "stage2": "full"}}
    cfg = config(**lens_off)
    now = {k.name: digest(train_settings(cfg, k, "A")) for k in planned_models(cfg)}
    gate = digest(train_settings(cfg, ModelKey("elical", *gate_choice(cfg)), "A"))
    assert {**now, "honesty": digest(honesty_settings(cfg, "A", gate))} == HEAD
    # the full candidate is the paper's model, the platt one a run with settings.stage2 platt
    chosen = config(**SELECT, **lens_off)
    assert digest(train_settings(chosen, ModelKey("elical", 10, 0, "full"), "A")) == HEAD["elical-10-s0"]
    platt = load_run_config(overrides=deep_merge(SMALL, {"train": {"settings": {"stage2": "platt", "lens": False, "lens_top": False,
                                                                                   "stage2_refit": False}}}))
    assert (train_settings(chosen, ModelKey("elical", 10, 0, "platt"), "A")
            == train_settings(platt, ModelKey("elical", 10, 0), "A"))


@pytest.mark.parametrize(("before", "after", "named"), [
    ({}, SELECT, "train.select_on"),
    (SELECT, {}, "train.select_on"),
    (SELECT, {**SELECT, "select_datasets": ["language"]}, "train.select_datasets"),
    (SELECT, {**SELECT, "stage2_candidates": ["full", "platt"]}, "train.stage2_candidates"),
])
def test_a_changed_choice_is_refused_on_resume(tmp_path, subject, before, after, named):
    from elical.run.steps.sequence import check_run_folder

    check_run_folder(config(**before), subject, tmp_path)
    (tmp_path / "honesty").mkdir()
    (tmp_path / "honesty" / "run_honesty.json").write_text("{}")  # the honesty step's output
    with pytest.raises(SettingsMismatch) as err:
        check_run_folder(config(**after), subject, tmp_path)
    assert "(select-stage2: " in str(err.value) and named in str(err.value)
    assert "honesty: its input (gate) changed" in str(err.value)  # the gate is the chosen recipe's model
    assert check_run_folder(config(**after), subject, tmp_path, overwrite=True)


def test_the_choice_is_a_step_between_training_and_evaluation_and_the_gate_reads_it(tmp_path, subject):
    from elical.run.folder import RunFolder
    from elical.run.steps.sequence import RunContext, run_steps

    steps = run_steps(RunContext(config(**SELECT), subject, RunFolder(tmp_path), log=lambda _: None))
    assert [s.name for s in steps.loop()] == ["annotate", "train", "select-stage2", "evaluate", "honesty", "report"]
    assert [i.name for i in steps.honesty.inputs] == ["annotate", "select-stage2"]
    assert "select-stage2" in {i.name for i in steps.evaluate.inputs}
    assert "select-stage2" in {i.name for i in steps.report.inputs}
    assert [i.name for i in steps.select.inputs] == ["annotate", *(f"train-elical-{r}-{b}-s0" for b in (10, "all")
                                                                   for r in ("full", "head", "platt", "mixed"))]


# ------------------------------------------------------------------------------------------ a run


def test_a_tiny_world_run_chooses_on_held_out_relations_and_reports_on_the_others(tmp_path):
    """The default preset at a tiny size: two candidates, one budget, one seed (about 30 s of CPU)."""
    from elical.run.pipeline import run_pipeline

    overrides = {
        "name": "tiny-select", "torch_threads": 1, "honesty": None,
        "questions": {"max_train": 40, "max_eval_per_dataset": 10},
        "annotate": {"k": 3, "batch_size": 48},
        "train": {**SELECT, "stage2_candidates": ["full", "platt"], "budgets": [12], "seeds": [0],
                  "stage2_passes": 24, "settings": {"epochs_stage1": 1, "batch_size": 8}},
        "evaluate": {"n_resamples": 10, "alignment_repeats": 2},
    }
    cfg = load_run_config(overrides=overrides)
    out = run_pipeline(cfg, tmp_path / "run", log=lambda _: None)
    run = tmp_path / "run"
    assert {p.name for p in (run / "scores").iterdir()} == {
        "eli-only-0-s0.parquet", "cal-only-12-s0.parquet", "elical-full-12-s0.parquet", "elical-platt-12-s0.parquet"}
    assert not any((run / "models" / m / "stage1-eli").exists() for m in ("elical-full-12-s0", "elical-platt-12-s0"))
    chosen = json.loads((run / "stage2_selection.json").read_text())
    assert chosen["winner"] in ("full", "platt") and chosen["datasets"] == ["language", "sport"]
    assert chosen["config"]["train"]["select_on"] == "ood-holdout" and chosen["rule"].startswith("highest mean AUROC")
    assert {row["dataset"] for row in chosen["aurocs"]} >= {"language", "sport", "multihop"}
    results = pd.read_csv(run / "results.csv")
    assert not results.split.str.contains("language|sport").any()  # held out: not reported
    assert {"ood/multihop", "ood/paraphrase"} <= set(results.split)
    assert set(results[results.method == "EliCal"].budget) == {12}
    assert len(results[(results.method == "EliCal") & (results.split == "ood") & (results.metric == "auroc")]) == 1
    md = (run / "report.md").read_text()
    assert f"## {SECTION}" in md and f"**{chosen['winner']}** was chosen" in md
    other = next(r for r in ("full", "platt") if r != chosen["winner"])  # "Where it transfers": both candidates
    assert f"| EliCal (12) {chosen['winner']} (chosen) | " in md and f"| EliCal (12) {other} | " in md
    # the choice's AUROCs are the evaluation's: the winner's on a reported dataset is results.csv's EliCal one
    winner = next(a["auroc"] for a in chosen["aurocs"]
                  if a["recipe"] == chosen["winner"] and a["dataset"] == "multihop")
    assert results[(results.method == "EliCal") & (results.split == "ood/multihop")
                   & (results.metric == "auroc")].value.item() == pytest.approx(winner)
    assert "select-stage2" in out.timings
    again = run_pipeline(cfg, run, log=lambda _: None)  # resumes: nothing trained again, the same choice
    assert again.timings["train"] == out.timings["train"]
    assert json.loads((run / "stage2_selection.json").read_text())["winner"] == chosen["winner"]
