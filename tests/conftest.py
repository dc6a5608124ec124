"""Shared fixtures: the real QA data beside the project, and tiny real models built from a config."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (real public QA sets); tests that need it skip when it is absent."""
    if not (SHARED_DATA / "qa").is_dir():
        pytest.skip(f"real QA data not found at {SHARED_DATA} (only present beside the project checkout)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A word-level tokenizer built locally with `tokenizers`, ChatML template, pad token set."""
    from tiny import build_tokenizer

    return build_tokenizer()


@pytest.fixture(scope="session")
def tiny_llama(tiny_tokenizer):
    """A tiny LlamaForCausalLM with random weights, in eval mode."""
    from tiny import build_model

    return build_model(tiny_tokenizer, "llama")


@pytest.fixture(scope="session")
def tiny_qwen2(tiny_tokenizer):
    """A tiny Qwen2ForCausalLM with random weights, in eval mode."""
    from tiny import build_model

    return build_model(tiny_tokenizer, "qwen2")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, tiny_tokenizer):
    """A tiny Llama whose tokenizer has no chat template: the prompt ends with the question's last
    word, which a random 2-layer model carries to the pooled token strongly enough to learn from
    in a few steps (the chat template's fixed tail would need many epochs)."""
    import copy

    from tiny import build_model

    path = tmp_path_factory.mktemp("llama")
    build_model(tiny_tokenizer, "llama").save_pretrained(path)
    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.chat_template = None
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def records_file(tmp_path_factory):
    """Records of tiny.learnable_records (training tests)."""
    from elical.records import write_jsonl
    from tiny import learnable_records

    path = tmp_path_factory.mktemp("records") / "train.jsonl"
    write_jsonl(learnable_records(), path)
    return path


@pytest.fixture(scope="session")
def trained_model_dir(tmp_path_factory, model_dir, records_file):
    """A confidence model trained for a few seconds on tiny.learnable_records (capital questions
    high, fox questions low); its folder (gate and serve tests; copy it before writing into it)."""
    from elical.train.config import TrainConfig
    from elical.train.trainer import train

    out = tmp_path_factory.mktemp("trained")
    cfg = TrainConfig(model=str(model_dir), output_dir=str(out), mode="cal-only", batch_size=8, epochs_stage2=3,
                      lr=1e-2, tokens_per_batch=512, row_length=128, val_fraction=0.25, warmup_ratio=0.0,
                      save_steps=0)
    train(cfg, [records_file], show_progress=False)
    return out / "model"
