"""A training folder remembers what made it: other settings are refused (nothing written) or, with
overwrite, retrained stage by stage; checkpoints never unpickle; the stage-selection rule."""

from __future__ import annotations

import json
import math
import pickle

import pytest
import torch
from test_train import config

from elical.core.fingerprint import SettingsMismatch
from elical.train.config import TrainConfig


def snapshot(folder) -> dict[str, int]:
    """Every file under ``folder`` with its modification time."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


def test_other_budget_is_refused_then_overwrite_retrains(model_dir, records_file, tmp_path):
    from elical.train.trainer import train

    first = train(config(model_dir, tmp_path, mode="cal-only", budget=20, epochs_stage2=1), [records_file],
                  show_progress=False)
    before = snapshot(tmp_path)
    cfg = config(model_dir, tmp_path, mode="cal-only", budget=24, epochs_stage2=1)
    with pytest.raises(SettingsMismatch, match=r"cal-only: budget 20 → 24; its input \(data\) changed.*--overwrite"):
        train(cfg, [records_file], show_progress=False)
    assert snapshot(tmp_path) == before  # nothing written, train_config.yaml included
    assert TrainConfig.from_yaml(tmp_path / "train_config.yaml").budget == 20
    second = train(cfg, [records_file], show_progress=False, overwrite=True)
    stage = second.stages[0]
    assert stage["train_size"] + stage["val_size"] == 24 != first.stages[0]["train_size"] + first.stages[0]["val_size"]
    assert TrainConfig.from_yaml(tmp_path / "train_config.yaml").budget == 24
    assert json.loads((tmp_path / "cal-only" / "settings" / "cal-only.json").read_text())["settings"]["budget"] == 24


def test_overwrite_keeps_the_stages_whose_settings_match(model_dir, records_file, tmp_path):
    from elical.train.trainer import train

    train(config(model_dir, tmp_path, mode="elical", budget=20, epochs_stage1=1, epochs_stage2=1), [records_file],
          show_progress=False)
    stage1 = snapshot(tmp_path / "stage1-eli")
    cfg = config(model_dir, tmp_path, mode="elical", budget=20, epochs_stage1=1, epochs_stage2=1, lr_stage2=5e-3)
    with pytest.raises(SettingsMismatch) as refused:
        train(cfg, [records_file], show_progress=False)
    assert "stage2-cal: lr 0.01 → 0.005" in str(refused.value) and "stage1-eli" not in str(refused.value)
    result = train(cfg, [records_file], show_progress=False, overwrite=True)
    assert snapshot(tmp_path / "stage1-eli") == stage1  # stage 1 reused as it was
    assert result.stages[1]["stage"] == "stage2-cal"
    # a changed stage 1 also changes the stage 2 built on it
    with pytest.raises(SettingsMismatch, match=r"stage1-eli: epochs 1 → 2.*stage2-cal: its input \(start\) changed"):
        train(cfg.model_copy(update={"epochs_stage1": 2}), [records_file], show_progress=False)


def test_other_mode_in_the_same_folder_is_refused(model_dir, records_file, tmp_path):
    from elical.train.trainer import train

    train(config(model_dir, tmp_path, mode="cal-only", epochs_stage2=1), [records_file], show_progress=False)
    with pytest.raises(SettingsMismatch, match='train: mode "cal-only" → "eli-only"'):
        train(config(model_dir, tmp_path, mode="eli-only", epochs_stage1=1), [records_file], show_progress=False)


def test_every_setting_decides_a_stage_unless_marked_never(model_dir, records_file):
    """Each TrainConfig field, changed, changes the stages' recorded settings, unless its mark says it never
    decides outputs (Output.NEVER: then it never blocks a resume); the marks alone decide which."""
    from test_settings_contract import another_value

    from elical.core.settings_contract import Output, mark
    from elical.records import read_records
    from elical.train.trainer import plan_run, plan_stages

    records = read_records([records_file])

    def stages(cfg: TrainConfig) -> dict:
        return {(m, s2): [s.settings for s in plan_run(c, plan_stages(records, c), records)]
                for m, s2 in [("elical", "full"), ("elical", "mixed"), ("elical", "l2sp"), ("elical", "wise"), ("head-only", "full"),
                              ("cal-only", "full")]
                for c in [cfg.model_copy(update={"mode": m, "stage2": s2})]}

    base = config(model_dir, "out", budget=24)
    reference = stages(base)
    for name in TrainConfig.model_fields:
        if name in ("mode", "stage2"):  # the modes and recipes compared
            continue
        changed = stages(base.model_copy(update={name: another_value(base, name, dtype="bfloat16", mixed_precision="bf16")}))
        assert (changed == reference) == (mark(TrainConfig, name) is Output.NEVER), name


class Planted:
    """A pickle that, when loaded, creates a file (what a malicious checkpoint would do)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("planted", ["trainable.pt", "optimizer.safetensors"])
def test_resume_never_unpickles_a_planted_file(model_dir, records_file, tmp_path, monkeypatch, planted):
    from elical.train import loop
    from elical.train.checkpoint import CheckpointError
    from elical.train.trainer import train

    cfg = config(model_dir, tmp_path / "run", mode="eli-only", save_steps=1, epochs_stage1=1)
    real_step, calls = loop._train_step, {"n": 0}

    def dying_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:  # after the checkpoints of steps 1 and 2
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop, "_train_step", dying_step)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, [records_file], show_progress=False)
    monkeypatch.setattr(loop, "_train_step", real_step)
    ckpt = tmp_path / "run" / "stage1-eli" / "checkpoint"
    assert {"params.safetensors", "optimizer.safetensors", "optimizer.json", "scheduler.json", "rng.safetensors",
            "state.json"} == {p.name for p in ckpt.iterdir()}
    marker = tmp_path / "pwned"
    (ckpt / planted).write_bytes(pickle.dumps(Planted(str(marker))))
    message = "a pickle, which elical does not load" if planted.endswith(".pt") else "cannot resume from"
    with pytest.raises(CheckpointError, match=message):
        train(cfg, [records_file], show_progress=False)
    assert not marker.exists()


def test_checkpoint_tree_round_trips_optimizer_and_scheduler_state():
    from transformers import get_linear_schedule_with_warmup

    from elical.train.checkpoint import from_json_tree, to_json_tree

    param = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.AdamW([param], lr=0.1, betas=(0.8, 0.9))
    scheduler = get_linear_schedule_with_warmup(optimizer, 2, 10)
    param.grad = torch.tensor([1.0, -2.0, 3.0])
    optimizer.step()
    scheduler.step()
    for state in (optimizer.state_dict(), scheduler.state_dict()):
        tensors: dict[str, torch.Tensor] = {}
        tree = json.loads(json.dumps(to_json_tree(state, tensors)))
        back = from_json_tree(tree, tensors)
        assert repr(back) == repr(state)  # same keys (int keys too), tuples, tensors and values
    with pytest.raises(TypeError, match="cannot store a Planted"):
        to_json_tree({"x": Planted("m")}, {})


def test_validation_metrics_known_values():
    from elical.train.selection import validation_metrics

    m = validation_metrics([0.9, 0.2, 0.6, 0.4], [1.0, 0.0, 0.5, 0.5], [1.0, 0.0, 0.0, 1.0])
    assert m["val_mse"] == pytest.approx((0.01 + 0.04 + 0.01 + 0.01) / 4)
    assert m["val_auroc"] == pytest.approx(0.75) and m["val_auroc_against"] == "correctness"
    # no correctness: against target >= 0.5 (positives 0.9, 0.6, 0.4 over negative 0.2)
    m = validation_metrics([0.9, 0.2, 0.6, 0.4], [1.0, 0.0, 0.5, 0.5], [1.0, float("nan"), 0.0, 1.0])
    assert m["val_auroc"] == 1.0 and m["val_auroc_against"] == "target>=0.5"
    assert math.isnan(validation_metrics([0.3, 0.4], [0.0, 0.0])["val_auroc"])  # one class


def test_selector_keeps_the_last_epoch_unless_an_earlier_one_is_clearly_better():
    from elical.train.selection import Selector, paired_gain

    targets = [0.0, 1.0] * 50
    last = [0.3, 0.7] * 50
    slightly = [0.29, 0.71] * 48 + [0.45, 0.55] * 2  # lower MSE, but not clearly: two pairs much worse
    clearly = [0.1, 0.9] * 50
    gain, se = paired_gain(clearly, last, targets)
    assert gain == pytest.approx(0.09 - 0.01) and se == pytest.approx(0.0)
    rule = Selector("noise-aware", warmup_steps=4, patience=2)
    assert not rule.eligible(3) and rule.eligible(4)
    assert rule.final(5, 9, clearly, last, targets)[0] == 5
    assert rule.final(5, 9, slightly, last, targets)[0] == 9
    assert rule.final(-1, 9, [], last, targets) == (9, "last epoch")
    assert Selector("best", 4, 2).final(5, 9, slightly, last, targets)[0] == 5
    assert Selector("last", 4, 2).final(5, 9, clearly, last, targets)[0] == 9
    # patience: noise-aware counts only clearly worse epochs, best any epoch without a new lowest
    assert rule.bad_epochs(1, False, clearly, last, targets) == 2
    assert rule.bad_epochs(1, False, slightly, last, targets) == 0
    assert Selector("best", 4, 2).bad_epochs(1, False, slightly, last, targets) == 2
    assert Selector("last", 4, 2).bad_epochs(1, False, clearly, last, targets) == 0


def test_init_from_gives_the_full_elical_training_stage2(model_dir, records_file, tmp_path):
    """EliCal from another training's finished stage 1 = the same EliCal trained in one folder."""
    from safetensors.torch import load_file

    from elical.core.fingerprint import recorded_settings
    from elical.train.trainer import train

    settings = {"budget": 24, "epochs_stage1": 1, "epochs_stage2": 2}
    full = train(config(model_dir, tmp_path / "full", mode="elical", **settings), [records_file], show_progress=False)
    train(config(model_dir, tmp_path / "eli", mode="eli-only", **settings), [records_file], show_progress=False)
    cfg = config(model_dir, tmp_path / "reused", mode="elical", **settings)
    reused = train(cfg, [records_file], show_progress=False, init_from=tmp_path / "eli")
    assert not (tmp_path / "reused" / "stage1-eli").exists()  # nothing copied
    assert [s["stage"] for s in reused.stages] == ["stage1-eli", "stage2-cal"]
    assert reused.stages[0]["best"] == str(tmp_path / "eli" / "stage1-eli" / "best")
    assert reused.stages[1]["history"] == full.stages[1]["history"]
    weights = [load_file(tmp_path / run / "model" / "adapter_model.safetensors") for run in ("full", "reused")]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    recorded = recorded_settings(tmp_path / "reused", "train")
    assert recorded["init_from"] and recorded["input"] == recorded_settings(tmp_path / "full", "train")["input"]
    assert json.loads((tmp_path / "reused" / "run.json").read_text())["init_from"] == str(tmp_path / "eli" / "stage1-eli")
    before = snapshot(tmp_path / "reused")
    train(cfg, [records_file], show_progress=False, init_from=tmp_path / "eli" / "stage1-eli")  # resumes: done
    assert {k: v for k, v in snapshot(tmp_path / "reused").items() if "stage2-cal" in k} == \
        {k: v for k, v in before.items() if "stage2-cal" in k}


def test_init_from_refuses_a_stage1_of_other_settings(model_dir, records_file, tmp_path):
    from elical.core.inputs import InputError
    from elical.train.trainer import train

    train(config(model_dir, tmp_path / "eli", mode="eli-only", epochs_stage1=1), [records_file], show_progress=False)
    other = config(model_dir, tmp_path / "elical", mode="elical", budget=24, epochs_stage1=1, seed=1)
    with pytest.raises(SettingsMismatch, match=r"stage1-eli: seed 0 → 1; its input \(data\) changed.*leave out init_from"):
        train(other, [records_file], show_progress=False, init_from=tmp_path / "eli")
    assert not (tmp_path / "elical").exists()  # refused before anything is written
    with pytest.raises(InputError, match="only mode elical"):
        train(other.model_copy(update={"mode": "cal-only"}), [records_file], show_progress=False,
              init_from=tmp_path / "eli")
    with pytest.raises(InputError, match="no finished stage 1 there"):
        train(other, [records_file], show_progress=False, init_from=tmp_path)
    from typer.testing import CliRunner

    from elical.cli import app

    refused = CliRunner().invoke(app, ["train", str(records_file), "--model", str(model_dir), "--mode", "cal-only",
                                       "-o", str(tmp_path / "cli"), "--init-from", str(tmp_path / "eli")])
    assert refused.exit_code == 2 and "only mode elical" in refused.output
