"""The one config tree: typed sections checked at load, one rule per setting, one home per prompt text."""

import json

import pytest

from elical.annotate.backends.base import PAPER_SAMPLING, GenerationSettings
from elical.annotate.config import AnnotateConfig
from elical.annotate.prompts import PromptConfig
from elical.core import wordings as prompts
from elical.core.inputs import InputError
from elical.evaluation.evaluate import EvalConfig
from elical.honesty.config import HonestyConfig
from elical.model.network import ModelConfig
from elical.records import Record
from elical.run.config import RunConfig, load_run_config
from elical.train.budgets import split_records, split_validation
from elical.train.config import TrainConfig, TrainSettings, stage2_epochs
from elical.world import default_lm_path
from elical.world.config import LMConfig, WorldConfig

PAPER_QA = "Answer the following question.\nQuestion: {question}"
PAPER_SYSTEM = "You are a helpful assistant."


@pytest.mark.parametrize("section, key", [
    ({"world": {"n_peple": 500}}, "world.n_peple"),
    ({"train": {"settings": {"learning_rate": 1e-3}}}, "train.settings.learning_rate"),
    ({"train": {"settings": {"model": "other"}}}, "train.settings.model"),  # the run sets it per model
    ({"evaluate": {"n_resample": 10}}, "evaluate.n_resample"),
])
def test_unknown_keys_fail_at_load_naming_the_key(section, key):
    with pytest.raises(InputError, match=rf"preset 'default': {key}: unknown setting"):
        load_run_config(overrides=section)


def test_bad_values_fail_at_load_naming_the_setting(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("train:\n  settings: {lr: -1}\nworld: {n_people: 5}\nevaluate: {ece_strategy: bogus}\n")
    with pytest.raises(InputError) as err:
        load_run_config(path=path)
    message = str(err.value)
    assert message.startswith(f"{path} (over preset 'default'): ")
    assert "line 2: train.settings.lr: must be greater than 0 (got -1.0)" in message
    assert "line 3: world.n_people: must be at least 10 (got 5)" in message
    assert "evaluate.ece_strategy: Input should be 'uniform' or 'quantile'" in message


def test_sections_are_typed_with_the_trainers_and_evaluations_own_classes():
    cfg = load_run_config()
    assert isinstance(cfg.world, WorldConfig) and isinstance(cfg.train.settings, TrainSettings)
    assert isinstance(cfg.evaluate, EvalConfig) and cfg.evaluate.n_resamples == 100
    assert cfg.train.settings.head == "mlp" and cfg.train.settings.mixed_precision == "no"
    # the run fills these per model: they are not train.settings
    assert not {"model", "mode", "seed", "budget", "output_dir", "qa_template", "system_prompt"} & set(TrainSettings.model_fields)
    assert set(TrainConfig.model_fields) - set(TrainSettings.model_fields) == {
        "model", "mode", "seed", "budget", "output_dir", "qa_template", "system_prompt"}
    assert load_run_config(overrides={"evaluate": {"methods": ["Prob"], "level": 0.9}}).evaluate == EvalConfig(
        methods=["Prob"], n_resamples=100, level=0.9)


def test_a_saved_run_config_keeps_the_world_as_stated(tmp_path):
    """World settings a run does not state are the world LM's own; saving must not state them all."""
    assert load_run_config().world_overrides() == {}
    cfg = load_run_config(overrides={"world": {"n_people": 500, "contested_wrong_ratio": [2, 3]}})
    assert cfg.world_overrides() == {"n_people": 500, "contested_wrong_ratio": [2.0, 3.0]}
    cfg.to_yaml(tmp_path / "config.yaml")
    again = load_run_config(path=tmp_path / "config.yaml")
    assert again.world_overrides() == cfg.world_overrides() and again == cfg


def test_stage2_epochs_rule():
    assert stage2_epochs(1000) == 50 and stage2_epochs(10_000) == 50 and stage2_epochs(10_001) == 15  # authors
    assert stage2_epochs(20_000, epochs=7) == 7 and stage2_epochs(10, epochs=7, passes=1000) == 7  # explicit wins
    assert [stage2_epochs(n, passes=1000, min_epochs=3, max_epochs=20) for n in (10, 100, 900)] == [20, 10, 3]
    assert TrainConfig().stage2_epochs(20_000) == 15 and TrainConfig(epochs_stage2=4).stage2_epochs(100) == 4
    plan = load_run_config().train  # default preset: 1500 passes, clipped to [2, 15]
    assert [plan.stage2_epochs(n) for n in (100, 300, 1000, 1200)] == [15, 5, 2, 2]
    assert load_run_config(overrides={"train": {"stage2_passes": None}}).train.stage2_epochs(100) is None


def test_stage2_epochs_are_set_one_way_only():
    with pytest.raises(InputError, match="set stage2_passes or settings.epochs_stage2, not both"):
        load_run_config(overrides={"train": {"settings": {"epochs_stage2": 5}}})
    with pytest.raises(InputError, match="min_epochs 9 exceeds max_epochs 4"):
        load_run_config(overrides={"train": {"min_epochs": 9, "max_epochs": 4}})
    plan = load_run_config(overrides={"train": {"stage2_passes": None, "settings": {"epochs_stage2": 5}}}).train
    assert plan.stage2_epochs(100) is None and plan.settings.epochs_stage2 == 5  # the trainer applies it


def test_prompt_texts_are_the_papers_everywhere():
    lm = json.loads((default_lm_path() / "world_lm.json").read_text())["lm"]
    qa = {prompts.QA_TEMPLATE, PromptConfig().qa, ModelConfig().qa_template, TrainConfig().qa_template,
          LMConfig().qa_template, HonestyConfig().prompt, lm["qa_template"]}
    assert qa == {PAPER_QA}
    system = {prompts.SYSTEM_PROMPT, PromptConfig().system, ModelConfig().system_prompt, TrainConfig().system_prompt,
              HonestyConfig().system}
    assert system == {PAPER_SYSTEM}
    assert PromptConfig().mmlu == LMConfig().mc_template == lm["mc_template"] == prompts.MC_TEMPLATE
    assert LMConfig().system_prompt is None and lm["system_prompt"] is None  # the world LM has none


def test_generation_defaults_are_the_papers_once():
    cfg = AnnotateConfig()
    assert (cfg.k, cfg.temperature, cfg.top_p, cfg.top_k, cfg.max_new_tokens) == (20, 1.0, 0.95, 50, 64)
    assert cfg.sample_settings() == PAPER_SAMPLING
    assert cfg.greedy_settings() == GenerationSettings()


def test_honesty_validation_split_is_the_trainers_stratified_split():
    records = [Record(question=f"q{i}", answers=["a"], dataset="ab"[i % 4 == 0]) for i in range(40)]
    tune, val = split_records(records, 0.2, seed=3)
    _, val_index = split_validation(range(40), records, 0.2, seed=3)
    assert [r.id for r in val] == [records[i].id for i in val_index] and len(val) == 8
    assert sorted(r.dataset for r in val) == ["a"] * 6 + ["b"] * 2  # stratified: 30 a, 10 b
    assert {r.id for r in tune} | {r.id for r in val} == {r.id for r in records} and len(tune) == 32
    assert split_records(records, 0.2, seed=3) == (tune, val) and split_records(records, 0.2, seed=4)[1] != val


def test_direct_construction_of_the_run_config_checks_types():
    with pytest.raises(ValueError, match="world.seed"):
        RunConfig.model_validate({"world": {"seed": "zero"}})


def test_a_renamed_run_key_names_its_new_name(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("evaluate: {baselines: [Prob]}\n")
    with pytest.raises(InputError, match="evaluate.baselines is now evaluate.methods"):
        load_run_config(path=path)
