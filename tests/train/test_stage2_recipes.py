"""EliCal's calibration-stage recipes (train.stage2): full (the paper), head (LoRA kept from stage 1),
platt (stage 1 kept whole, a monotone map of its logit fitted on the labels), mixed (stage-1 targets for
unlabelled pool questions beside the labels). Tiny real models, seconds each."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from scipy.stats import spearmanr
from test_train import config

from elical.records import read_records
from elical.train.config import TrainConfig
from elical.train.platt import fit_platt, fold_into_head


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


# ------------------------------------------------------------------------------------------ l2sp


def test_l2sp_penalty_and_its_gradient_on_known_values():
    from elical.train.loop import add_l2sp_grad, l2sp_anchor, l2sp_penalty

    layer = torch.nn.Linear(2, 1)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, -2.0]]))
        layer.bias.copy_(torch.tensor([0.5]))
    anchor = l2sp_anchor(layer)
    assert l2sp_penalty(anchor, 3.0).item() == 0.0  # at the anchor
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[2.0, 0.0]]))  # moved by (1, 2)
        layer.bias.copy_(torch.tensor([-0.5]))  # moved by -1
    assert l2sp_penalty(anchor, 3.0).item() == pytest.approx(0.5 * 3.0 * (1 + 4 + 1))  # 9.0
    layer.weight.grad = torch.tensor([[0.25, 0.25]])  # the loss's gradient, to which the penalty's is added
    assert add_l2sp_grad(anchor, 3.0).item() == pytest.approx(9.0)
    assert torch.allclose(layer.weight.grad, torch.tensor([[0.25 + 3.0, 0.25 + 6.0]]))
    assert torch.allclose(layer.bias.grad, torch.tensor([-3.0]))  # a weight without a gradient gets the penalty's
    frozen = torch.nn.Linear(2, 1).requires_grad_(False)
    assert l2sp_anchor(frozen) == [] and l2sp_penalty([], 1.0).item() == 0.0  # only trainable weights count


def test_l2sp_with_alpha_0_is_the_full_update_exactly(model_dir, records_file, tmp_path):
    full, _, full_final = _stage1_and("full", model_dir, records_file, tmp_path / "full")
    l2sp, _, l2sp_final = _stage1_and("l2sp", model_dir, records_file, tmp_path / "l2sp", stage2_l2sp=0.0)
    assert full_final.keys() == l2sp_final.keys()
    assert all(torch.equal(full_final[k], l2sp_final[k]) for k in full_final)  # same seed: bit for bit
    assert full.stages[1]["history"] == l2sp.stages[1]["history"]


def test_l2sp_with_a_huge_alpha_keeps_stage_1_and_its_alpha_is_a_setting(model_dir, records_file, tmp_path):
    from elical.core.fingerprint import SettingsMismatch, recorded_settings
    from elical.model.network import ConfidenceModel
    from elical.train.predict import predict_records
    from elical.train.trainer import train

    def drift(before, after):
        return max(float((after[k] - before[k]).abs().max()) for k in before)

    # AdamW steps each weight by about lr whatever its gradient, so even a huge alpha holds the weights only within
    # about one step of stage 1's (they jitter around them): lr 1e-3 keeps that small against the full update's move
    stage2 = {"epochs_stage2": 5, "lr_stage2": 1e-3}
    plain, stage1, full = _stage1_and("full", model_dir, records_file, tmp_path / "full", **stage2)
    result, stage1_again, held = _stage1_and("l2sp", model_dir, records_file, tmp_path / "l2sp", stage2_l2sp=1e6,
                                             **stage2)
    assert all(torch.equal(stage1[k], stage1_again[k]) for k in stage1)  # the same stage 1 (same seed)
    assert drift(stage1, full) > 5e-3  # the full update moves the weights
    assert drift(stage1, held) < min(2e-3, 0.3 * drift(stage1, full))  # the penalty holds them at stage 1's
    records = read_records([records_file])

    def confidences(folder):
        return np.array(predict_records(ConfidenceModel.load(folder), records, show_progress=False))

    before = confidences(tmp_path / "l2sp" / "stage1-eli" / "best")
    assert np.abs(confidences(tmp_path / "l2sp" / "model") - before).max() < 0.02  # stage 1's confidences
    assert np.abs(confidences(tmp_path / "full" / "model") - before).max() > 0.05  # which the full update leaves
    # the recorded train loss is the labels' MSE plus the penalty, which a huge alpha makes dominate
    assert result.stages[1]["history"][1]["train_loss"] > 10 * plain.stages[1]["history"][1]["train_loss"]
    recorded = recorded_settings(tmp_path / "l2sp" / "stage2-cal", "stage2-cal")
    assert recorded["stage2"] == "l2sp" and recorded["stage2_l2sp"] == 1e6
    assert "stage2_l2sp" not in recorded_settings(tmp_path / "full" / "stage2-cal", "stage2-cal")
    with pytest.raises(SettingsMismatch, match="stage2_l2sp"):  # a changed alpha is refused on resume
        train(config(model_dir, tmp_path / "l2sp", mode="elical", budget=24, stage2="l2sp", stage2_l2sp=0.5,
                     epochs_stage2=5), [records_file], show_progress=False)


@pytest.mark.parametrize(("mix", "mixed_in"), [(0.0, 0), (0.01, 0), (0.25, 4), (0.5, 9), (0.75, 14), (5.0, 16)])
def test_stage2_mix_below_1_mixes_in_a_rounded_count(records_file, tmp_path, mix, mixed_in):
    """18 labelled training questions: 0.25 x 18 = 4.5 rounds to 4 (to even), 0.75 x 18 = 13.5 to 14; the 16
    unlabelled pool questions (40 - 24 labelled) cap a large mix; 0.01 x 18 rounds to none."""
    from elical.train.trainer import plan_stages

    records = read_records([records_file])
    plan = plan_stages(records, config("m", tmp_path, mode="elical", budget=24, stage2="mixed", stage2_mix=mix))["cal"]
    plain = plan_stages(records, config("m", tmp_path, mode="elical", budget=24))["cal"]  # no model is loaded
    assert len(plain.train) == 18 and plan.train[:18] == plain.train and plan.val == plain.val
    assert len(plan.train) - 18 == mixed_in and len(set(plan.train)) == len(plan.train)


def test_stage2_mix_is_a_share_from_0_and_decides_outputs_only_for_mixed():
    from elical.core.inputs import InputError
    from elical.run.config import load_run_config
    from elical.train.config import TrainSettings, stage2_settings

    assert TrainSettings(stage2="mixed", stage2_mix=0.25).stage2_mix == 0.25
    cfg = load_run_config(overrides={"train": {"settings": {"stage2": "mixed", "stage2_mix": 0.5}}})
    assert cfg.train.settings.stage2_mix == 0.5
    with pytest.raises(InputError, match="stage2_mix"):
        load_run_config(overrides={"train": {"settings": {"stage2_mix": -0.5}}})
    assert stage2_settings("elical", "mixed", 0.25, 0.1) == {"stage2": "mixed", "stage2_mix": 0.25}
    assert stage2_settings("elical", "l2sp", 0.25, 0.1) == {"stage2": "l2sp", "stage2_l2sp": 0.1}
    assert stage2_settings("elical", "full", 0.25, 0.1) == {} == stage2_settings("cal-only", "l2sp", 0.25, 0.1)


def test_a_resumed_l2sp_stage_2_still_pulls_toward_stage_1(model_dir, records_file, tmp_path, monkeypatch):
    """Killed mid stage 2 and resumed from its checkpoint, l2sp ends where an uninterrupted training does: the
    penalty's centre is stage 1's weights, not the checkpoint's."""
    from elical.train import loop

    settings = {"stage2_l2sp": 50.0, "save_steps": 1, "epochs_stage2": 3}
    straight, _, final = _stage1_and("l2sp", model_dir, records_file, tmp_path / "a", **settings)
    real_step, calls = loop._train_step, {"n": 0}

    def dying_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 13:  # stage 1: 8 steps; stage 2: 3 a epoch, so mid its second epoch
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop, "_train_step", dying_step)
    with pytest.raises(KeyboardInterrupt):
        _stage1_and("l2sp", model_dir, records_file, tmp_path / "b", **settings)
    assert (tmp_path / "b" / "stage2-cal" / "checkpoint").is_dir()
    monkeypatch.setattr(loop, "_train_step", real_step)
    resumed, _, again = _stage1_and("l2sp", model_dir, records_file, tmp_path / "b", **settings)
    assert [h["train_loss"] for h in resumed.stages[1]["history"]] == pytest.approx(
        [h["train_loss"] for h in straight.stages[1]["history"]], abs=1e-6)
    assert all(torch.allclose(final[k], again[k], atol=1e-6) for k in final)


# ------------------------------------------------------------------------------------------ wise


def test_interpolated_weights_on_known_values():
    from elical.train.wise import interpolate_weights, trainable_weights

    layer = torch.nn.Linear(2, 1)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, -2.0]]))
        layer.bias.copy_(torch.tensor([0.5]))
    start = trainable_weights(layer)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[3.0, 2.0]]))
        layer.bias.copy_(torch.tensor([-0.5]))
    interpolate_weights(layer, start, 0.25)  # a quarter of the way from the start to the trained weights
    assert torch.equal(layer.weight, torch.tensor([[1.5, -1.0]])) and torch.equal(layer.bias, torch.tensor([0.25]))
    with pytest.raises(ValueError, match="different trainable weights"):
        interpolate_weights(layer, {"weight": start["weight"]}, 0.5)


def test_wise_keeps_the_weights_part_way_from_platts_model_to_the_trained_stage_2(model_dir, records_file, tmp_path):
    """stage2_wise 1 is full with stage2_refit bit for bit, 0 is platt's model (same confidences), and 0.3 sets
    every trainable weight 30 % of the way from the refitted stage 1 to the trained stage 2, which stays in best/."""
    from elical.model.network import ConfidenceModel
    from elical.train.predict import predict_records

    stage2 = {"epochs_stage2": 4, "lr_stage2": 1e-2}
    refit, stage1, refit_final = _stage1_and("full", model_dir, records_file, tmp_path / "refit", stage2_refit=True,
                                             **stage2)
    one, _, one_final = _stage1_and("wise", model_dir, records_file, tmp_path / "one", stage2_wise=1.0, **stage2)
    assert all(torch.equal(refit_final[k], one_final[k]) for k in refit_final)
    assert one.stages[1]["history"] == refit.stages[1]["history"]

    result, _, final = _stage1_and("wise", model_dir, records_file, tmp_path / "wise", stage2_wise=0.3, **stage2)
    trained = load_file(tmp_path / "wise" / "stage2-cal" / "best" / "adapter_model.safetensors")
    assert all(torch.equal(trained[k], refit_final[k]) for k in trained)  # the trained stage 2, kept
    lora = [k for k in final if "lora_" in k]
    assert lora and all(torch.allclose(final[k], 0.7 * stage1[k] + 0.3 * trained[k], atol=1e-6) for k in lora)
    assert any(not torch.allclose(final[k], trained[k]) for k in lora)
    wise = result.stages[1]["wise"]
    assert wise["alpha"] == 0.3 and 0 <= wise["val_mse"] <= 1 and result.stages[1]["best"].endswith("wise")

    zero, _, _ = _stage1_and("wise", model_dir, records_file, tmp_path / "zero", stage2_wise=0.0, **stage2)
    _stage1_and("platt", model_dir, records_file, tmp_path / "platt")
    records = read_records([records_file])

    def confidences(folder):
        return np.array(predict_records(ConfidenceModel.load(folder), records, show_progress=False))

    assert np.allclose(confidences(tmp_path / "zero" / "model"), confidences(tmp_path / "platt" / "model"), atol=1e-4)
    a, b = zero.stages[1]["refit"]["a"], zero.stages[1]["refit"]["b"]
    assert (a, b) == pytest.approx((result.stages[1]["refit"]["a"], result.stages[1]["refit"]["b"]))


def test_wise_records_its_alpha_and_a_finished_stage_resumes_as_it_is(model_dir, records_file, tmp_path):
    from elical.core.fingerprint import SettingsMismatch, recorded_settings
    from elical.train.trainer import train

    settings = {"stage2_wise": 0.4, "epochs_stage2": 2}
    first, _, final = _stage1_and("wise", model_dir, records_file, tmp_path, **settings)
    recorded = recorded_settings(tmp_path / "stage2-cal", "stage2-cal")
    assert recorded["stage2"] == "wise" and recorded["stage2_wise"] == 0.4 and "stage2_refit" not in recorded
    again, _, final_again = _stage1_and("wise", model_dir, records_file, tmp_path, **settings)
    assert again.stages[1] == first.stages[1] and all(torch.equal(final[k], final_again[k]) for k in final)
    with pytest.raises(SettingsMismatch, match="stage2_wise"):  # another alpha is another model
        train(config(model_dir, tmp_path, mode="elical", budget=24, stage2="wise", stage2_wise=0.6, epochs_stage2=2),
              [records_file], show_progress=False)
    assert not (tmp_path / "stage2-cal" / "wise.partial").exists()


def test_a_folder_of_the_earlier_default_full_is_refused_by_the_default_wise_and_resumes_with_full(
        model_dir, records_file, tmp_path):
    from elical.core.fingerprint import SettingsMismatch
    from elical.train.trainer import train

    first, _, final = _stage1_and("full", model_dir, records_file, tmp_path)
    assert TrainConfig(model="m", mode="elical").stage2 == "wise"
    with pytest.raises(SettingsMismatch, match="stage2"):  # the default now: another stage 2, named
        train(config(model_dir, tmp_path, mode="elical", budget=24), [records_file], show_progress=False)
    again, _, final_again = _stage1_and("full", model_dir, records_file, tmp_path)
    assert again.stages == first.stages and all(torch.equal(final[k], final_again[k]) for k in final)
