"""`elical predict` names its predictions after the model it ran: the model folder's ModelKey (method, budget,
seed from its training settings), else the folder's name; `--method` overrides. Two models' predictions
evaluated together never share a name."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from elical.cli import app
from elical.model.key import ModelKey
from elical.model.predictions import read_predictions


@pytest.mark.parametrize(("settings", "name"), [
    ({"mode": "elical", "budget": 1000, "seed": 0}, "elical-1000-s0"),
    ({"mode": "cal-only", "budget": None, "seed": 2}, "cal-only-all-s2"),
    ({"mode": "eli-only", "budget": 50, "seed": 1}, "eli-only-0-s1"),  # Eli-Only reads no labels
    ({"mode": "head-only", "budget": None, "seed": 0, "head_only_target": "eli"}, "head-only-0-s0"),
    ({"mode": "head-only", "budget": 30, "seed": 0, "head_only_target": "cal"}, "head-only-30-s0"),
])
def test_a_models_key_comes_from_its_training_settings(settings, name):
    assert ModelKey.of_training(settings).name == name


def test_predictions_take_the_models_own_name_and_evaluate_together(trained_model_dir, model_dir, records_file,
                                                                    tmp_path):
    from elical.train.config import TrainConfig
    from elical.train.trainer import train

    other = tmp_path / "elical-1k"  # the README's folder name; its key names it (budget 20 here)
    train(TrainConfig(model=str(model_dir), output_dir=str(other), mode="cal-only", budget=20, seed=1, batch_size=8,
                      epochs_stage2=1, tokens_per_batch=512, row_length=128, val_fraction=0.25, save_steps=0),
          [records_file], show_progress=False)
    runner = CliRunner()
    files = []
    for folder, out in ((trained_model_dir, "a.parquet"), (other / "model", "b.parquet")):
        result = runner.invoke(app, ["predict", str(folder), str(records_file), "-o", str(tmp_path / out),
                                     "--device", "cpu"])
        assert result.exit_code == 0, result.output
        files.append(tmp_path / out)
    a, b = (read_predictions(path) for path in files)
    assert (a.method, b.method) == ("cal-only-all-s0", "cal-only-20-s1")
    assert a.key == ModelKey("cal-only", "all", 0) and b.key == ModelKey("cal-only", 20, 1)
    both = runner.invoke(app, ["evaluate", str(records_file), "-p", str(files[0]), "-p", str(files[1]),
                               "--out", str(tmp_path / "eval"), "--resamples", "10", "--alignment-repeats", "2"])
    assert both.exit_code == 0, both.output
    metrics = (tmp_path / "eval" / "metrics.csv").read_text()
    assert "cal-only-all-s0" in metrics and "cal-only-20-s1" in metrics
    named = runner.invoke(app, ["predict", str(other), str(records_file), "-o", str(tmp_path / "c.csv"),
                                "--method", "mine", "--device", "cpu"])
    assert named.exit_code == 0, named.output
    assert read_predictions(tmp_path / "c.csv").method == "mine"  # --method wins; CSV keeps no key


def test_a_folder_without_training_settings_is_named_after_itself(tiny_llama, tiny_tokenizer, tmp_path):
    from elical.model.network import ConfidenceModel, ModelConfig
    from elical.records import Record, write_jsonl
    from elical.train.predict import predict_files

    tiny_llama.save_pretrained(tmp_path / "base")
    tiny_tokenizer.save_pretrained(tmp_path / "base")
    model = ConfidenceModel.create(ModelConfig(base_model=str(tmp_path / "base")))
    model.save(tmp_path / "my-model")
    model.save(tmp_path / "run-7" / "model")  # an `elical train` output's model/: the output's name
    assert "train" not in json.loads((tmp_path / "my-model" / "elical_model.json").read_text())
    write_jsonl([Record(question="Who wrote Hamlet?", answers=["x"], id="q0")], tmp_path / "qa.jsonl")
    predict_files(tmp_path / "my-model", [tmp_path / "qa.jsonl"], tmp_path / "p.parquet", device="cpu")
    predict_files(tmp_path / "run-7" / "model", [tmp_path / "qa.jsonl"], tmp_path / "q.parquet", device="cpu")
    assert read_predictions(tmp_path / "p.parquet").method == "my-model"
    assert read_predictions(tmp_path / "q.parquet").method == "run-7"
    assert read_predictions(tmp_path / "p.parquet").key is None


def test_two_sources_of_one_name_say_how_to_rename(tmp_path):
    from elical.evaluation.evaluate import EvalConfig, collect_scores
    from elical.model.predictions import Predictions
    from tiny import learnable_records

    records = learnable_records(8)
    same = [Predictions("x", {r.id: 0.5 for r in records}) for _ in range(2)]
    with pytest.raises(ValueError, match=r"both called 'x'.*--method NAME"):
        collect_scores(records, same, EvalConfig(methods=[]))
