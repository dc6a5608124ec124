"""Alignment for Honesty on tiny real models: LoRA tuning, evaluation, the comparison table and the CLI."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from elical.honesty import (
    REFUSAL,
    HonestyConfig,
    TuneConfig,
    build_examples,
    evaluate_adapter,
    run_honesty_comparison,
    tune,
)
from elical.honesty.compare import GATE_METHOD
from elical.honesty.scoring import items_from_records
from elical.honesty.tune import IGNORE, encode_examples, render_prompt
from elical.records import Record, write_records
from extras import SMOLLM2, needs


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run ~30x faster on one thread than on two busy shared cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _records(n: int = 8, prefix: str = "") -> list[Record]:
    known = [Record(f"{prefix}What is the capital of France {i}?", ["Paris"], dataset="d", split="train",
                    samples=["Paris", "Nile"], sample_correct=[1, 0], greedy_response="Paris", greedy_correct=1)
             for i in range(n)]
    unknown = [Record(f"{prefix}Who wrote Hamlet {i}?", ["Shakespeare"], dataset="d", split="train",
                      samples=["Nile", "1969"], sample_correct=[0, 0], greedy_response="Nile", greedy_correct=0)
               for i in range(n)]
    return known + unknown


def _config(steps: int, **kw) -> HonestyConfig:
    tune_cfg = TuneConfig(max_steps=steps, batch_size=8, learning_rate=2e-2, lora_r=16, lora_alpha=32, device="cpu")
    return HonestyConfig(tune=tune_cfg, max_new_tokens=24, **kw)


def _fresh(tokenizer):
    from tiny import build_model

    return build_model(tokenizer, "llama")


def test_loss_covers_the_answer_tokens_only(tiny_tokenizer, tiny_qwen2):
    config = HonestyConfig()
    examples = build_examples(_records(1), "absolute", config)
    ([(ids, labels)], skipped) = encode_examples(examples[1:], tiny_qwen2, tiny_tokenizer, config)
    assert skipped == 0
    prompt = render_prompt(tiny_qwen2, tiny_tokenizer, config.messages(examples[1].question))
    assert prompt.endswith("<|im_start|>assistant\n")
    n_prompt = sum(1 for v in labels if v == IGNORE)
    assert tiny_tokenizer.decode(ids[:n_prompt]) == prompt
    assert tiny_tokenizer.decode(labels[n_prompt:]) == REFUSAL + tiny_tokenizer.eos_token
    # too long examples are left out and counted, never silently
    shorter = HonestyConfig(tune=TuneConfig(max_length=len(ids) - 1))
    with pytest.warns(UserWarning, match="left out 1 of 2 training examples longer than max_length"):
        kept, skipped = encode_examples(examples, tiny_qwen2, tiny_tokenizer, shorter)
    assert skipped == 1 and tiny_tokenizer.decode([v for v in kept[0][1] if v != IGNORE]) == "Paris" + tiny_tokenizer.eos_token
    with pytest.warns(UserWarning, match="left out 2 of 2"), pytest.raises(ValueError, match="no training example fits"):
        encode_examples(examples, tiny_qwen2, tiny_tokenizer, HonestyConfig(tune=TuneConfig(max_length=8)))


def test_absolute_tuning_learns_to_refuse_unknown_and_answer_known(tiny_tokenizer, tmp_path):
    records = _records()
    config = _config(100, method="absolute")
    result = tune(build_examples(records, "absolute", config), _fresh(tiny_tokenizer), tiny_tokenizer, config,
                  tmp_path / "absolute", progress=False)
    assert result.steps == 100 and result.losses[-1] < result.losses[0]
    assert (tmp_path / "absolute" / "adapter" / "adapter_config.json").exists()
    meta = json.loads((tmp_path / "absolute" / "tune_meta.json").read_text())
    assert meta["method"] == "absolute" and meta["data"] == {"examples": 16, "questions": 16, "refusals": 8,
                                                             "skipped_too_long": 0}
    items = items_from_records(records)
    table, answers = evaluate_adapter(result.model, tiny_tokenizer, None, items, config, method="absolute", progress=False)
    row = table.set_index("method").loc["absolute"]
    # the random tiny model knows nothing; tuned, it answers the 8 known questions and refuses the 8 unknown
    assert row["prudence"] == 1.0 and row["accuracy"] == 0.5 and row["refusal_rate"] == 0.5
    assert table.set_index("method").loc["unaligned", "refusal_rate"] == 0.0
    # the saved adapter on a fresh copy of the base model answers the same
    reloaded, again = evaluate_adapter(_fresh(tiny_tokenizer), tiny_tokenizer, tmp_path / "absolute" / "adapter", items,
                                       config, tmp_path / "eval", method="absolute", progress=False)
    pd.testing.assert_frame_equal(reloaded, table)
    assert list(again["answer"]) == list(answers["answer"])
    assert (tmp_path / "eval" / "honesty.md").exists() and (tmp_path / "eval" / "answers.parquet").exists()


def test_comparison_table_with_the_gate_and_resume(tiny_tokenizer, tmp_path):
    train, val, evaluated = _records(4), _records(2, "val "), _records(2, "eval ")
    confidences = {r.id: (0.8 if r.greedy_correct else 0.3) for r in val}
    confidences.update({r.id: c for r, c in zip(evaluated, [0.9, 0.2, 0.5, 0.6])})
    config = _config(4)
    model = _fresh(tiny_tokenizer)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    table = run_honesty_comparison(train, evaluated, confidences, model, tiny_tokenizer, config, tmp_path,
                                   methods=["confidence-verb", "multisample"], val_records=val, progress=False)
    assert list(table["method"]) == ["unaligned", "confidence-verb", "multisample", GATE_METHOD]
    gate = table.set_index("method").loc[GATE_METHOD]
    # tau is chosen on the validation records (right ones at 0.8, wrong at 0.3): tau = 0.8
    assert gate["tau"] == 0.8 and gate["refusal_rate"] == 0.75 and gate["n"] == 4
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the base model is untouched
    assert json.loads((tmp_path / "gate.json").read_text())["n_validation"] == 4
    written = pd.read_csv(tmp_path / "honesty_comparison.csv")
    assert list(written["method"]) == list(table["method"])
    # a rerun loads the saved adapters instead of training again, and scores the same
    for method in ("confidence-verb", "multisample"):
        (tmp_path / method / "examples.jsonl").unlink()
    again = run_honesty_comparison(train, evaluated, confidences, model, tiny_tokenizer, config, tmp_path,
                                   methods=["confidence-verb", "multisample"], val_records=val, progress=False)
    pd.testing.assert_frame_equal(again, table)
    assert not (tmp_path / "multisample" / "examples.jsonl").exists()
    with pytest.raises(ValueError, match="overlap"):
        run_honesty_comparison(train, evaluated, confidences, model, tiny_tokenizer, config, None,
                               methods=[], val_records=evaluated, progress=False)


def test_cli_tune_then_eval_with_the_gate(tiny_tokenizer, tmp_path):
    from typer.testing import CliRunner

    from elical.cli import app
    from elical.model.predictions import write_predictions

    model_dir = tmp_path / "tiny"
    _fresh(tiny_tokenizer).save_pretrained(model_dir)
    tiny_tokenizer.save_pretrained(model_dir)
    write_records(_records(4), tmp_path / "train.jsonl")
    val, evaluated = _records(2, "val "), _records(2, "eval ")
    write_records(val, tmp_path / "val.jsonl")
    write_records(evaluated, tmp_path / "eval.jsonl")
    write_predictions(tmp_path / "elical.parquet", [r.id for r in val + evaluated],
                      [0.8, 0.8, 0.3, 0.3, 0.9, 0.2, 0.5, 0.6], "elical")
    runner = CliRunner()
    tuned = runner.invoke(app, ["honesty-tune", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "run"),
                                "--model", str(model_dir), "--method", "absolute", "--steps", "3", "--device", "cpu"])
    assert tuned.exit_code == 0, tuned.output
    assert "absolute: 8 examples (4 refusals)" in tuned.output
    evaluated_run = runner.invoke(app, ["honesty-eval", "--adapter", str(tmp_path / "run" / "adapter"),
                                        "--out", str(tmp_path / "eval"), "--model", str(model_dir),
                                        "--records", str(tmp_path / "eval.jsonl"), "--max-new-tokens", "8",
                                        "--predictions", str(tmp_path / "elical.parquet"),
                                        "--val-records", str(tmp_path / "val.jsonl"), "--device", "cpu"])
    assert evaluated_run.exit_code == 0, evaluated_run.output
    table = pd.read_csv(tmp_path / "eval" / "honesty.csv")
    assert list(table["method"]) == ["unaligned", "absolute", GATE_METHOD]
    assert table.set_index("method").loc[GATE_METHOD, "refusal_rate"] == 0.75
    assert json.loads((tmp_path / "eval" / "honesty.json").read_text())["gate"]["tau"] == 0.8


def test_cli_stops_on_records_without_samples(tiny_tokenizer, tmp_path):
    from typer.testing import CliRunner

    from elical.cli import app

    write_records([Record("Q?", ["a"], greedy_response="a", greedy_correct=1)], tmp_path / "bare.jsonl")
    (tmp_path / "never-loaded").mkdir()  # a model folder, so the records are what stops the command
    (tmp_path / "never-loaded" / "config.json").write_text("{}")
    result = CliRunner().invoke(app, ["honesty-tune", str(tmp_path / "bare.jsonl"), "--out", str(tmp_path / "run"),
                                      "--model", str(tmp_path / "never-loaded")])
    assert result.exit_code == 2
    assert "no sampled answers ('sampling_response')" in result.output
    assert not (tmp_path / "run").exists()


def test_a_closed_vocabulary_tokenizer_must_spell_the_wordings(tiny_qwen2):
    from elical.honesty.builders import honesty_texts
    from elical.honesty.refusal import is_refusal
    from elical.world.tokenizer import build_tokenizer

    config = HonestyConfig()
    examples = build_examples(_records(1), "absolute", config)
    texts = [ex.question for ex in examples] + ["Paris", "Answer the following question . Question :"]
    with pytest.raises(ValueError, match=r"cannot spell the training completion .*'apologize,'"):
        encode_examples(examples, tiny_qwen2, build_tokenizer(texts), config)
    words = build_tokenizer(texts + honesty_texts(config))
    [_, (_ids, labels)], _ = encode_examples(examples, tiny_qwen2, words, config)
    refusal = words.decode([v for v in labels if v != IGNORE], skip_special_tokens=True)
    assert refusal != REFUSAL and is_refusal(examples[1].question, refusal)  # spaced out, still detected


def test_run_plan_adds_puqa_and_caps_tuning_questions(tiny_tokenizer, tmp_path):
    from elical.honesty import HonestyPlan, run_honesty_plan
    from elical.records import record_id

    data = tmp_path / "data"
    data.mkdir()
    questions = [f"Who wrote the paper 'P{i}'?" for i in range(3)]
    (data / "puqa.jsonl").write_text("".join(json.dumps({"question": q, "label": "unknown"}) + "\n" for q in questions))
    val, evaluated = _records(2, "val "), _records(1, "eval ")
    confidences = {r.id: (0.8 if r.greedy_correct else 0.3) for r in val}
    confidences.update({r.id: 0.9 for r in evaluated})
    confidences.update({record_id("puqa", q): c for q, c in zip(questions, [0.1, 0.2, 0.95])})
    plan = HonestyPlan(methods=["absolute"], honesty_data=str(data), honesty_limit=2, max_tune_records=3,
                       settings=_config(2))
    compared = run_honesty_plan(plan, _records(4), evaluated, confidences, _fresh(tiny_tokenizer), tiny_tokenizer,
                                tmp_path / "out", val_records=val, progress=False)
    assert compared.gate is not None and json.loads((tmp_path / "out" / "gate.json").read_text())["tau"] == compared.gate.tau
    rows = compared.table.set_index(["method", "dataset"])
    assert rows.loc[(GATE_METHOD, "puqa"), "prudence"] == 1.0 and rows.loc[(GATE_METHOD, "puqa"), "n"] == 2
    assert rows.loc[(GATE_METHOD, "d"), "refusal_rate"] == 0.0
    assert json.loads((tmp_path / "out" / "absolute" / "tune_meta.json").read_text())["data"]["questions"] == 3


@needs(*SMOLLM2)
def test_honesty_eval_refuses_a_pickled_adapter_before_loading_anything(tmp_path):
    """An adapter_model.bin is a pickle: refused with the conversion named, nothing written."""
    from typer.testing import CliRunner

    from elical.cli import app

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "adapter_model.bin").write_bytes(b"\x80\x04not loaded")
    write_records(_records(2), tmp_path / "eval.jsonl")
    result = CliRunner().invoke(app, ["honesty-eval", "--adapter", str(adapter), "--out", str(tmp_path / "out"),
                                      "--model", "smollm2", "--records", str(tmp_path / "eval.jsonl")])
    assert result.exit_code == 2, result.output
    assert "adapter_model.bin" in result.output and "safe_serialization=True" in result.output
    assert not (tmp_path / "out").exists()
