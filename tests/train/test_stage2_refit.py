"""``stage2_refit``: EliCal's stage 2 starts from stage 1's logit refitted to the labels (a monotone map folded
into the head), so stage 2 need not silence the MLP head's ReLU units to bring confidences down to the accuracy
(benchmarks/results/world_stage2_collapse_cpu.md: on the world, seed 1's stage 2 at 150 labels otherwise piled
most questions onto the head's constant output, in-domain AUROC 0.620 from Eli-Only's 0.779). Tiny real models."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_train import config

from elical.records import Record


def _overconfident_records(n: int = 40, k: int = 4) -> list[Record]:
    """tiny.learnable_records, but the fox questions are answered half consistently (stage 1's target 0.5, the
    capital ones' 1.0) and never right: stage 1 learns confidences far above the accuracy, as on the world."""
    from tiny import learnable_records

    out = []
    for rec in learnable_records(n, k):
        good = bool(rec.greedy_correct)
        consistent = [1] * k if good else [1, 0] * (k // 2)
        rec.sample_consistent = consistent
        out.append(rec)
    return out


@pytest.fixture(scope="module")
def overconfident_file(tmp_path_factory):
    from elical.records import write_jsonl

    path = tmp_path_factory.mktemp("overconfident") / "train.jsonl"
    write_jsonl(_overconfident_records(), path)
    return path


def test_refit_head_folds_an_increasing_map_into_an_mlp_head():
    from elical.model.network import build_head
    from elical.train.loop import refit_head
    from elical.train.platt import fit_platt

    torch.manual_seed(0)
    head = build_head(6, "mlp")
    with torch.no_grad():  # a trained-looking last layer (build_head zero-initialises it)
        head[-1].weight.normal_()
    x = torch.randn(300, 6)
    with torch.no_grad():
        before = head(x).squeeze(-1).double().numpy()
    targets = 1 / (1 + np.exp(-(0.5 * before - 2.0)))  # soft labels far below stage 1's confidences
    refit = refit_head(head, before.tolist(), targets.tolist())
    assert refit is not None and refit["a"] == pytest.approx(0.5, abs=0.02) and refit["b"] == pytest.approx(-2.0, abs=0.02)
    assert (refit["a"], refit["b"]) == pytest.approx(fit_platt(before, targets), rel=1e-6)  # stage2 platt's fit
    with torch.no_grad():
        after = head(x).squeeze(-1).double().numpy()
    assert np.allclose(after, refit["a"] * before + refit["b"], atol=1e-5)
    assert (np.argsort(after, kind="stable") == np.argsort(before, kind="stable")).all()  # the same ranking
    # no increasing map (one kind of target, or a reversed one): the head is left as it is
    for bad in (np.zeros_like(targets), 1 - targets):
        assert refit_head(head, after.tolist(), bad.tolist()) is None
    with torch.no_grad():
        assert torch.equal(head(x).squeeze(-1).double(), torch.from_numpy(after))


def _elical(model_dir, records, out, **overrides):
    from elical.train.trainer import train

    overrides = {"stage2": "full", **overrides}  # wise, the default, always starts from the refit
    return train(config(model_dir, out, mode="elical", budget=24, epochs_stage1=3, epochs_stage2=3, lr_stage2=1e-3,
                        **overrides), [records], show_progress=False)


def test_refit_starts_stage_2_at_the_accuracy_with_stage_1s_ranking(model_dir, overconfident_file, tmp_path):
    from elical.core.fingerprint import recorded_settings

    plain = _elical(model_dir, overconfident_file, tmp_path / "plain")
    refit = _elical(model_dir, overconfident_file, tmp_path / "refit", stage2_refit=True)
    start_plain, start_refit = plain.stages[1]["history"][0], refit.stages[1]["history"][0]
    assert start_refit["val_auroc"] == start_plain["val_auroc"]  # epoch 0: stage 1's ranking, mapped
    assert start_refit["val_mse"] < 0.5 * start_plain["val_mse"]  # and its confidences near the labels
    assert "refit" in refit.stages[1] and "refit" not in plain.stages[1]
    assert refit.stages[1]["refit"]["a"] > 0 and refit.stages[1]["refit"]["b"] < 0  # confidences brought down
    assert plain.stages[0]["history"] == refit.stages[0]["history"]  # stage 1 is the same training
    # recorded when on; absent when off, so folders made before the setting resume unchanged
    assert recorded_settings(tmp_path / "refit" / "stage2-cal", "stage2-cal")["stage2_refit"] is True
    assert "stage2_refit" not in recorded_settings(tmp_path / "plain" / "stage2-cal", "stage2-cal")
    # stage 1 is recorded alike, so an Eli-Only model or stage 1 made without it is reused
    assert (recorded_settings(tmp_path / "refit" / "stage1-eli", "stage1-eli")
            == recorded_settings(tmp_path / "plain" / "stage1-eli", "stage1-eli"))


def test_refit_applies_to_elicals_stage_2_only(model_dir, overconfident_file, tmp_path):
    from elical.train.trainer import train

    cal_only = train(config(model_dir, tmp_path / "cal", mode="cal-only", budget=24, stage2_refit=True),
                     [overconfident_file], show_progress=False)
    assert "refit" not in cal_only.stages[0]  # a fresh head has no stage-1 logit to map
    head = _elical(model_dir, overconfident_file, tmp_path / "head", stage2="head", stage2_refit=True,
                   lr_head_only=1e-3)
    assert head.stages[1]["refit"]["a"] > 0


def test_a_resumed_refit_stage_2_ends_where_an_uninterrupted_one_does(model_dir, overconfident_file, tmp_path,
                                                                       monkeypatch):
    """Killed mid stage 2 and resumed from its checkpoint: the refit is redone on the stage-1 model, then the
    checkpoint's weights replace it, so the training ends as an uninterrupted one does."""
    from safetensors.torch import load_file

    from elical.train import loop

    settings = {"stage2_refit": True, "save_steps": 1}
    straight = _elical(model_dir, overconfident_file, tmp_path / "a", **settings)
    real_step, calls = loop._train_step, {"n": 0}
    stage1_steps = straight.stages[0]["steps"]

    def dying_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == stage1_steps + 4:  # stage 2: 3 steps an epoch, so in its second epoch
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop, "_train_step", dying_step)
    with pytest.raises(KeyboardInterrupt):
        _elical(model_dir, overconfident_file, tmp_path / "b", **settings)
    assert (tmp_path / "b" / "stage2-cal" / "checkpoint").is_dir()
    monkeypatch.setattr(loop, "_train_step", real_step)
    resumed = _elical(model_dir, overconfident_file, tmp_path / "b", **settings)
    assert resumed.stages[1]["refit"] == pytest.approx(straight.stages[1]["refit"])
    assert [h["val_mse"] for h in resumed.stages[1]["history"]] == pytest.approx(
        [h["val_mse"] for h in straight.stages[1]["history"]], abs=1e-6)
    final, again = (load_file(p / "model" / "head.safetensors") for p in (tmp_path / "a", tmp_path / "b"))
    assert all(torch.allclose(final[k], again[k], atol=1e-6) for k in final)
