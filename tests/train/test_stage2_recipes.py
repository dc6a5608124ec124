"""EliCal's calibration-stage recipes (train.stage2): full (the paper), head (LoRA kept from stage 1),
platt (stage 1 kept whole, a monotone map of its logit fitted on the labels), mixed (stage-1 targets for
unlabelled pool questions beside the labels). Tiny real models, seconds each."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from scipy.stats import spearmanr

from elical.records import read_records
from elical.train.config import TrainConfig
from elical.train.recalibrate import fit_platt, fold_into_head
from test_train import config


def _stage1_and(recipe: str, model_dir, records_file, out, **overrides) -> tuple[dict, dict, dict]:
    from elical.train.trainer import train

    result = train(config(model_dir, out, mode="elical", budget=24, stage2=recipe, **overrides), [records_file],
                   show_progress=False)
    stage1 = load_file(out / "stage1-eli" / "best" / "adapter_model.safetensors")
    final = load_file(out / "model" / "adapter_model.safetensors")
    return result, stage1, final


def test_head_keeps_stage_1_lora_and_trains_the_head(model_dir, records_file, tmp_path):
    result, stage1, final = _stage1_and("head", model_dir, records_file, tmp_path, lr_head_only=1e-2,
                                        epochs_stage2=5)
    lora = [k for k in stage1 if "lora_" in k]
    assert lora and all(torch.equal(stage1[k], final[k]) for k in lora)
    assert any(not torch.equal(stage1[k], final[k]) for k in stage1 if "score" in k)
    assert result.stages[1]["stage"] == "stage2-cal" and (tmp_path / "stage2-cal" / "cache").is_dir()


def test_platt_keeps_the_ranking_of_stage_1_and_fits_the_labels(model_dir, records_file, tmp_path):
    from elical.model.network import ConfidenceModel
    from elical.train.predict import predict_records

    result, stage1, final = _stage1_and("platt", model_dir, records_file, tmp_path)
    assert all(torch.equal(stage1[k], final[k]) for k in stage1 if "lora_" in k)
    records = read_records([records_file])
    before = predict_records(ConfidenceModel.load(tmp_path / "stage1-eli" / "best"), records, show_progress=False)
    after = predict_records(ConfidenceModel.load(tmp_path / "model"), records, show_progress=False)
    assert spearmanr(before, after).statistic == pytest.approx(1.0)  # an increasing map: same order
    a, b = result.stages[1]["platt"]["a"], result.stages[1]["platt"]["b"]
    logit = np.log(np.array(before) / (1 - np.array(before)))
    assert np.allclose(after, 1 / (1 + np.exp(-(a * logit + b))), atol=1e-4)
    assert [h["epoch"] for h in result.stages[1]["history"]] == [0, 1]


def test_mixed_trains_on_unlabelled_pool_questions_with_stage_1_targets(model_dir, records_file, tmp_path):
    from elical.train.trainer import plan_stages

    records = read_records([records_file])
    plain = plan_stages(records, config(model_dir, tmp_path, mode="elical", budget=24))["cal"]
    mixed = plan_stages(records, config(model_dir, tmp_path, mode="elical", budget=24, stage2="mixed",
                                        stage2_mix=0.5))["cal"]
    assert mixed.val == plain.val and mixed.train[: len(plain.train)] == plain.train
    extra = mixed.train[len(plain.train) :]
    assert len(extra) == round(0.5 * len(plain.train)) and not set(extra) & set(plain.train + plain.val)
    for i in extra:  # stage 1's target: the share of samples consistent with the greedy answer
        assert mixed.targets[i] == sum(records[i].sample_consistent) / len(records[i].sample_consistent)
    again = plan_stages(records, config(model_dir, tmp_path, mode="elical", budget=24, stage2="mixed", stage2_mix=0.5))
    assert again["cal"].train == mixed.train  # seeded


def test_a_recipe_is_part_of_stage_2s_settings_and_needs_mode_elical(model_dir, records_file, tmp_path):
    from elical.core.fingerprint import SettingsMismatch
    from elical.train.trainer import train

    _stage1_and("platt", model_dir, records_file, tmp_path)
    with pytest.raises(SettingsMismatch, match='stage2 "platt" → "head"'):
        train(config(model_dir, tmp_path, mode="elical", budget=24, stage2="head"), [records_file], show_progress=False)
    with pytest.raises(ValueError, match="stage2 head applies to mode elical"):
        TrainConfig(model="m", mode="cal-only", stage2="head")


def test_platt_fit_on_known_values():
    logits = np.linspace(-3, 3, 200)
    labels = 1 / (1 + np.exp(-(2.0 * logits - 1.0)))  # soft labels from a known map
    a, b = fit_platt(logits, labels)
    assert a == pytest.approx(2.0, abs=0.05) and b == pytest.approx(-1.0, abs=0.05)
    assert fit_platt(logits, 1 - labels)[0] == 0.0  # never a reversing map
    with pytest.raises(ValueError, match="labels of both kinds"):
        fit_platt(logits, np.zeros(200))
    head = torch.nn.Linear(4, 1)
    x = torch.randn(5, 4)
    before = head(x)
    fold_into_head(head, 2.0, -1.0)
    assert torch.allclose(head(x), 2.0 * before - 1.0, atol=1e-6)
