"""Training on tiny real models: learning, two-stage EliCal, errors before training, NaN stop, resume,
head-only with cached features, prediction files and the CLI."""

from __future__ import annotations

import json

import pytest
import torch

from elical.records import write_jsonl
from elical.train.config import TrainConfig
from elical.train.targets import MissingFieldError
from tiny import learnable_records


def config(model_dir, out, **overrides) -> TrainConfig:
    settings = {"model": str(model_dir), "output_dir": str(out), "batch_size": 8, "epochs_stage1": 2,
                "epochs_stage2": 2, "lr": 1e-2, "tokens_per_batch": 512, "row_length": 128, "val_fraction": 0.25,
                "warmup_ratio": 0.0, "save_steps": 0}
    settings.update(overrides)
    return TrainConfig(**settings)


def test_loss_falls_on_a_learnable_target(model_dir, records_file, tmp_path):
    from elical.train.trainer import train

    result = train(config(model_dir, tmp_path, mode="cal-only", epochs_stage2=5), [records_file],
                   show_progress=False)
    history = result.stages[0]["history"]
    assert [h["epoch"] for h in history] == [0, 1, 2, 3, 4, 5]  # epoch 0: before any step
    assert history[0]["train_loss"] is None and history[0]["step"] == 0
    assert history[-1]["train_loss"] < 0.6 * history[1]["train_loss"], history
    assert min(h["val_mse"] for h in history) < 0.2, history
    # calibration validates against greedy correctness; this target separates the classes fully
    assert history[-1]["val_auroc_against"] == "correctness" and history[-1]["val_auroc"] == 1.0
    assert json.loads((tmp_path / "cal-only" / "history.json").read_text()) == history
    assert result.model == tmp_path / "model" and result.is_main_process and result.run["seed"] == result.run["config"]["seed"]
    assert json.loads((tmp_path / "train_summary.json").read_text()) == json.loads(json.dumps(result.summary(), default=str))
    log = (tmp_path / "training_log.csv").read_text().splitlines()
    assert log[0].startswith("stage,epoch,step,lr,train_loss,val_mse,val_auroc") and len(log) == 1 + len(history)
    saved = json.loads((tmp_path / "model" / "elical_model.json").read_text())
    assert saved["train"]["seed"] == 0 and saved["train"]["config"]["mode"] == "cal-only"
    assert saved["train"]["provenance"]["versions"]["torch"]
    assert (tmp_path / "train_config.yaml").exists()


def test_elical_stage2_keeps_training_lora_and_head(model_dir, records_file, tmp_path):
    from safetensors.torch import load_file

    from elical.train.trainer import train

    result = train(config(model_dir, tmp_path, mode="elical", budget=24), [records_file], show_progress=False)
    assert [s["stage"] for s in result.stages] == ["stage1-eli", "stage2-cal"]
    assert result.stages[1]["train_size"] + result.stages[1]["val_size"] == 24
    stage1 = load_file(tmp_path / "stage1-eli" / "best" / "adapter_model.safetensors")
    stage2 = load_file(tmp_path / "stage2-cal" / "best" / "adapter_model.safetensors")
    assert stage1.keys() == stage2.keys()
    lora = [k for k in stage1 if "lora_" in k]
    head = [k for k in stage1 if "score" in k]
    assert lora and head
    assert any(not torch.equal(stage1[k], stage2[k]) for k in lora), "stage 2 left the LoRA weights unchanged"
    assert any(not torch.equal(stage1[k], stage2[k]) for k in head)


def test_stage2_starts_from_stage1_exactly_with_lora_and_head_trainable(model_dir, records_file, tmp_path):
    """ConfidenceModel.load(trainable=True), as stage 2 loads stage 1: every saved LoRA and head tensor
    (head bias included) is restored and trains, and the confidences are stage 1's."""
    from safetensors.torch import load_file

    from elical.model.network import ConfidenceModel
    from elical.records import read_records
    from elical.train.predict import predict_records
    from elical.train.trainer import train

    train(config(model_dir, tmp_path, mode="eli-only", epochs_stage1=2), [records_file], show_progress=False)
    saved = load_file(tmp_path / "model" / "adapter_model.safetensors")
    loaded = ConfidenceModel.load(tmp_path / "model", trainable=True)
    trainable = {n: p for n, p in loaded.named_parameters() if p.requires_grad}
    assert sum("lora_" in n for n in trainable) == sum("lora_" in k for k in saved)
    head = {n.rsplit("default.", 1)[1]: p for n, p in trainable.items() if ".score." in n}
    assert set(head) == {"weight", "bias"}
    assert float(head["bias"].detach()) == float(saved["base_model.model.score.bias"]) != 0.0
    assert torch.equal(head["weight"].detach(), saved["base_model.model.score.weight"])
    records = read_records([records_file])[:6]
    frozen = ConfidenceModel.load(tmp_path / "model")  # inference: LoRA merged
    assert predict_records(loaded, records, show_progress=False) == pytest.approx(
        predict_records(frozen, records, show_progress=False), abs=1e-5)
    (tmp_path / "model" / "adapter_model.safetensors").rename(tmp_path / "model" / "adapter_model.bin")
    with pytest.raises(FileNotFoundError, match="no elical model weights"):
        ConfidenceModel.load(tmp_path / "model")


@pytest.mark.parametrize(
    ("mode", "strip", "message"),
    [("eli-only", "sample_consistent", "consistency_judgement"),
     ("cal-only", "sample_correct", "sampling_correctness"),
     ("elical", "sample_consistent", "consistency_judgement")],
)
def test_missing_fields_stop_before_any_training(tmp_path, mode, strip, message):
    from elical.train.trainer import train

    records = learnable_records(8)
    for rec in records:
        setattr(rec, strip, None)
    write_jsonl(records, tmp_path / "r.jsonl")
    # The model path does not exist: the error must come before any model is loaded.
    cfg = TrainConfig(model=str(tmp_path / "no-such-model"), mode=mode, output_dir=str(tmp_path / "out"))
    with pytest.raises(MissingFieldError, match=message):
        train(cfg, [tmp_path / "r.jsonl"], show_progress=False)
    assert not (tmp_path / "out").exists()


def test_greedy_calibration_target_needs_greedy_correctness(tmp_path):
    from elical.train.trainer import train

    records = learnable_records(8)
    for rec in records:
        rec.greedy_correct = None
    write_jsonl(records, tmp_path / "r.jsonl")
    cfg = TrainConfig(model="unused", mode="cal-only", cal_target="greedy", output_dir=str(tmp_path / "o"))
    with pytest.raises(MissingFieldError, match="greedy_correctness"):
        train(cfg, [tmp_path / "r.jsonl"], show_progress=False)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(model_dir, records_file, tmp_path):
    from elical.train.loop import TrainingError
    from elical.train.trainer import train

    # Warm-up makes the first step's learning rate 0 (a good checkpoint); the second step overflows.
    cfg = config(model_dir, tmp_path, mode="eli-only", lr=1e30, save_steps=1, max_grad_norm=0.0,
                 epochs_stage1=3, warmup_ratio=0.5)
    with pytest.raises(TrainingError, match=r"became (nan|inf|non-finite).*last good checkpoint is"):
        train(cfg, [records_file], show_progress=False)
    from safetensors.torch import load_file

    ckpt = tmp_path / "stage1-eli" / "checkpoint"
    saved = load_file(ckpt / "params.safetensors")
    assert saved and all(torch.isfinite(v).all() for v in saved.values())
    assert json.loads((ckpt / "state.json").read_text())["global_step"] >= 1


def test_killed_run_resumes_with_the_same_command(model_dir, records_file, tmp_path, monkeypatch, capsys):
    from elical.core.fingerprint import SettingsMismatch
    from elical.model.network import ConfidenceModel
    from elical.train import loop
    from elical.train.trainer import train

    straight = train(config(model_dir, tmp_path / "a", mode="eli-only", save_steps=2), [records_file],
                     show_progress=False)
    real_step, calls = loop._train_step, {"n": 0}

    def dying_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 6:  # mid second epoch (4 steps per epoch), after a step-2 checkpoint
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop, "_train_step", dying_step)
    cfg = config(model_dir, tmp_path / "b", mode="eli-only", save_steps=2)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, [records_file], show_progress=False)
    monkeypatch.setattr(loop, "_train_step", real_step)
    with pytest.raises(SettingsMismatch, match="stage1-eli: lr 0.01 → 0.02"):
        train(cfg.model_copy(update={"lr": 2e-2}), [records_file], show_progress=False)
    # speed and bookkeeping settings do not block a resume, nor change the result
    resumed = train(cfg.model_copy(update={"save_steps": 3, "tokens_per_batch": 256}), [records_file],
                    show_progress=False)
    assert "resuming" in capsys.readouterr().out
    assert resumed.stages[0]["steps"] == straight.stages[0]["steps"]
    for key in ("val_mse", "train_loss"):
        assert [h[key] for h in resumed.stages[0]["history"][1:]] == pytest.approx(
            [h[key] for h in straight.stages[0]["history"][1:]], abs=1e-6)
    a = ConfidenceModel.load(tmp_path / "a" / "model", merge=False).lora_parameters()
    b = ConfidenceModel.load(tmp_path / "b" / "model", merge=False).lora_parameters()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_head_only_caches_features_and_learns(model_dir, records_file, tmp_path):
    from elical.train.trainer import train

    cfg = config(model_dir, tmp_path, mode="head-only", head="mlp", epochs_stage2=30, lr_head_only=1e-2)
    first = train(cfg, [records_file], show_progress=False)
    cached = list((tmp_path / "cache").glob("features-*.safetensors"))
    assert len(cached) == 1
    history = first.stages[0]["history"]
    assert history[0]["epoch"] == 0 and history[-1]["train_loss"] < history[1]["train_loss"]
    stamp = cached[0].stat().st_mtime_ns
    train(cfg.model_copy(update={"output_dir": str(tmp_path)}), [records_file], show_progress=False)
    assert cached[0].stat().st_mtime_ns == stamp  # read from the cache, not recomputed


def test_predict_writes_the_prediction_format(model_dir, records_file, tmp_path):
    from elical.model.predictions import read_predictions
    from elical.records import read_records
    from elical.train.predict import predict_files
    from elical.train.trainer import train

    train(config(model_dir, tmp_path, mode="cal-only", epochs_stage2=1), [records_file], show_progress=False)
    qa = tmp_path / "nq_test.jsonl"
    qa.write_text("".join(json.dumps({"question": q, "answer": ["x"]}) + "\n"
                          for q in ["capital France?", "fox dog?", "Nile year?"]))
    assert predict_files(tmp_path / "model", [qa], tmp_path / "p.parquet", method="elical-test") == 3
    preds = read_predictions(tmp_path / "p.parquet")
    assert preds.method == "elical-test"
    assert set(preds.confidence) == {r.id for r in read_records(qa)}
    assert all(0 < c < 1 for c in preds.confidence.values())
    assert preds.meta["train"]["config"]["mode"] == "cal-only"


def test_config_from_yaml_rejects_unknown_keys(tmp_path):
    (tmp_path / "c.yaml").write_text("model: m\nmode: elical\nbudget: 1000\n")
    cfg = TrainConfig.from_yaml(tmp_path / "c.yaml")
    assert cfg.budget == 1000 and cfg.lora_r == 8 and cfg.lora_alpha == 16 and cfg.weight_decay == 0.1
    assert cfg.stage2_epochs(1000) == 50 and cfg.stage2_epochs(20_000) == 15
    (tmp_path / "bad.yaml").write_text("model: m\nlearning_rate: 1\n")
    with pytest.raises(ValueError, match="learning_rate"):
        TrainConfig.from_yaml(tmp_path / "bad.yaml")


def test_cli_train_then_predict(model_dir, records_file, tmp_path):
    from typer.testing import CliRunner

    from elical.cli import app
    from elical.model.predictions import read_predictions

    (tmp_path / "c.yaml").write_text(f"model: {model_dir}\nbatch_size: 8\nepochs_stage2: 1\nrow_length: 128\n")
    runner = CliRunner()
    result = runner.invoke(app, ["train", str(records_file), "-c", str(tmp_path / "c.yaml"), "--mode", "cal-only",
                                 "-o", str(tmp_path / "run"), "--budget", "20", "--set", "lr=1e-3"])
    assert result.exit_code == 0, result.output
    assert "Model saved to" in result.output
    saved = TrainConfig.from_yaml(tmp_path / "run" / "train_config.yaml")
    assert (saved.mode, saved.budget, saved.lr, saved.batch_size) == ("cal-only", 20, 1e-3, 8)
    again = ["train", str(records_file), "-c", str(tmp_path / "c.yaml"), "--mode", "cal-only",
             "-o", str(tmp_path / "run"), "--budget", "24", "--set", "lr=1e-3"]
    refused = runner.invoke(app, again)
    assert refused.exit_code == 2 and "budget 20 → 24" in refused.output and "--overwrite" in refused.output
    assert TrainConfig.from_yaml(tmp_path / "run" / "train_config.yaml").budget == 20
    assert runner.invoke(app, [*again, "--overwrite"]).exit_code == 0
    assert TrainConfig.from_yaml(tmp_path / "run" / "train_config.yaml").budget == 24
    result = runner.invoke(app, ["predict", str(tmp_path / "run" / "model"), str(records_file),
                                 "-o", str(tmp_path / "p.csv"), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert len(read_predictions(tmp_path / "p.csv").confidence) == 40
    bad = runner.invoke(app, ["train", str(records_file), "--model", "m", "--set", "no_such_key=1"])
    assert bad.exit_code == 2 and "no_such_key" in bad.output


def test_budget_over_the_pool_names_the_option_and_one_class_validation_is_said_once(model_dir, records_file,
                                                                                        tmp_path):
    from typer.testing import CliRunner

    from elical.cli import app

    (tmp_path / "c.yaml").write_text(f"model: {model_dir}\nbatch_size: 8\nepochs_stage2: 3\nrow_length: 128\n")
    base = ["train", str(records_file), "-c", str(tmp_path / "c.yaml"), "--mode", "cal-only"]
    runner = CliRunner()
    over = runner.invoke(app, [*base, "-o", str(tmp_path / "over"), "--budget", "1000"])
    assert over.exit_code != 0
    assert "--budget 1000 exceeds the 40 records" in over.output
    assert "lower --budget to at most 40, or drop it" in over.output
    small = runner.invoke(app, [*base, "-o", str(tmp_path / "small"), "--budget", "4"])  # one validation question
    assert small.exit_code == 0, small.output
    assert small.output.count("so there is no validation AUROC") == 1, small.output
    assert "nan" not in small.output.lower() and small.output.count("val MSE") >= 3


def test_one_class_note_says_which_class_and_none_when_both():
    from elical.train.selection import one_class_note

    assert one_class_note([0.9, 0.1], [1.0, 0.0]) is None
    assert "the 2 validation questions are all answered wrongly" in one_class_note([0.9, 0.8], [0.0, 0.0])
    assert "the one validation question has a target >= 0.5" in one_class_note([0.7], None)
