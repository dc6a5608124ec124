"""The ``lens`` head input: the LM's next-token distribution at the pooled token, summarised (largest
log-probability, entropy; with ``lens_top`` its LENS_TOP largest log-probabilities and entropy) beside the hidden
state; known values, agreement with the LM's own logits, padding and packing invariance, save/load, models with an
output layer of their own (and a clear error where their checkpoint lacks it), and training with it."""

from __future__ import annotations

import json
import math

import pytest
import torch

from elical.core.settings_contract import output_settings
from elical.model.network import (
    LENS_FEATURES,
    LENS_TOP,
    ConfidenceModel,
    ModelConfig,
    lens_features,
    qa_prompt,
)
from elical.train.batching import packed_batches, padded_batch, tokenize_prompts

QUESTIONS = ["What is the capital of France?", "Who wrote Hamlet?", "1969?", "Which river flows through Egypt?"]


def saved_llama(tmp_path_factory, tokenizer, tied: bool):
    """A tiny Llama saved to a folder, its output layer tied to its input embedding or its own."""
    from tiny import build_model

    path = tmp_path_factory.mktemp("tied" if tied else "untied")
    build_model(tokenizer, "llama", tied=tied).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tied_dir(tmp_path_factory, tiny_tokenizer):
    """Tied, as SmolLM2 and the world LM are."""
    return saved_llama(tmp_path_factory, tiny_tokenizer, tied=True)


@pytest.fixture(scope="module")
def tiny_dir_untied(tmp_path_factory, tiny_tokenizer):
    """With an lm_head of its own, as Qwen2.5-7B has."""
    return saved_llama(tmp_path_factory, tiny_tokenizer, tied=False)


def lens_model(base, **fields) -> ConfidenceModel:
    model = ConfidenceModel.create(ModelConfig(base_model=str(base), lens=True, **fields))
    torch.manual_seed(1)
    with torch.no_grad():
        for param in model.parameters():
            if param.requires_grad:
                param.normal_(0, 0.2)
    return model.eval()


def encoded(model) -> list[list[int]]:
    prompts = [qa_prompt(model.tokenizer, q, model.config) for q in QUESTIONS]
    return tokenize_prompts(model.tokenizer, prompts, 512)[0]


def features_beside_the_lm(model, base):
    """The questions' left-padded batch, the confidence model's features of it, and the plain LM's (``base``'s)
    next-token log-probs at each question's last token."""
    from transformers import AutoModelForCausalLM

    seqs = encoded(model)
    batch = padded_batch(seqs, list(range(len(seqs))), model.tokenizer.pad_token_id, "left")
    with torch.no_grad():
        features = model.hidden_states(**batch.model_inputs())
        lm = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
        logprobs = lm(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, -1].log_softmax(-1)
    return batch, features, logprobs


def test_lens_features_are_the_top_log_probability_and_the_entropy():
    embedding = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    pooled = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    # row 0: logits (1, 0, 0); row 1: logits (0, 0, 0), the uniform distribution over 3 tokens
    z = math.e + 2
    probs = [math.e / z, 1 / z, 1 / z]
    expected = torch.tensor([[math.log(probs[0]), -sum(p * math.log(p) for p in probs)],
                             [-math.log(3), math.log(3)]])
    torch.testing.assert_close(lens_features(pooled, embedding), expected)


def test_lens_top_adds_the_runner_up_log_probabilities_sorted_before_the_entropy():
    embedding = torch.tensor([[2.0], [0.0], [1.0], [-1.0]])
    pooled = torch.tensor([[1.0], [-1.0]])
    for row, logits in zip(lens_features(pooled, embedding, top=3), ([2.0, 0.0, 1.0, -1.0], [-2.0, 0.0, -1.0, 1.0])):
        logprobs = torch.tensor(logits).log_softmax(-1)
        expected = [*sorted(logprobs.tolist(), reverse=True)[:3], float(-(logprobs.exp() * logprobs).sum())]
        torch.testing.assert_close(row, torch.tensor(expected))
    # top=1 is the two-number summary (largest log-probability, entropy); every summary's first and last agree
    two, five = lens_features(pooled, embedding), lens_features(pooled, torch.cat([embedding, embedding]), top=5)
    assert two.shape == (2, LENS_FEATURES) and torch.equal(two, lens_features(pooled, embedding, top=3)[:, [0, -1]])
    assert (five[:, :-1].diff(dim=-1) <= 0).all()  # largest first
    assert (five[:, :-1].exp().sum(-1) <= 1 + 1e-6).all() and (five[:, -1] >= 0).all()


def test_lens_top_needs_lens_and_is_recorded_only_when_on():
    with pytest.raises(ValueError, match="lens_top changes the lens summary: it needs lens: true"):
        ModelConfig(lens_top=True)
    assert "lens_top" not in output_settings(ModelConfig(lens=True))
    assert output_settings(ModelConfig(lens=True, lens_top=True))["lens_top"] is True


def test_head_with_lens_top_reads_the_lms_top_log_probabilities_and_saves_them(tied_dir, tmp_path):
    model = lens_model(tied_dir, head="mlp", lens_top=True)
    hidden = model.classifier.config.hidden_size
    first = next(m for m in model.head.modules() if isinstance(m, torch.nn.Linear))
    assert first.in_features == hidden + LENS_TOP + 1
    _, features, logprobs = features_beside_the_lm(model, tied_dir)
    expected = torch.cat([logprobs.topk(LENS_TOP, -1).values, -(logprobs.exp() * logprobs).sum(-1, keepdim=True)], -1)
    torch.testing.assert_close(features[:, hidden:], expected, atol=1e-5, rtol=1e-5)
    before = model.confidence(QUESTIONS)
    model.save(tmp_path / "m")
    head = json.loads((tmp_path / "m" / "head_config.json").read_text())
    assert head["sizes"][0] == hidden + LENS_TOP + 1 and f"the {LENS_TOP} largest log-probabilities" in head["inputs"]
    loaded = ConfidenceModel.load(tmp_path / "m")
    assert loaded.config.lens_top and loaded.confidence(QUESTIONS) == pytest.approx(before, abs=1e-6)


def test_head_reads_the_hidden_state_then_the_lms_own_next_token_summary(tied_dir):
    model = lens_model(tied_dir)
    hidden = model.classifier.config.hidden_size
    first = next(m for m in model.head.modules() if isinstance(m, torch.nn.Linear))
    assert first.in_features == hidden + LENS_FEATURES
    batch, features, logprobs = features_beside_the_lm(model, tied_dir)
    assert features.shape == (len(QUESTIONS), hidden + LENS_FEATURES)
    # LoRA (randomized here) changes the hidden state the head reads, but not the answering model's own
    # next-token distribution: the summary is the base LM's
    expected = torch.stack([logprobs.max(-1).values, -(logprobs.exp() * logprobs).sum(-1)], dim=-1)
    torch.testing.assert_close(features[:, -LENS_FEATURES:], expected, atol=1e-5, rtol=1e-5)
    plain = ConfidenceModel.create(ModelConfig(base_model=str(tied_dir), lens=True, lora=False)).eval()
    with torch.no_grad():
        unadapted = plain.hidden_states(**batch.model_inputs())
    torch.testing.assert_close(unadapted[:, -LENS_FEATURES:], expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(features[:, :hidden], unadapted[:, :hidden])  # the hidden state is LoRA's


def test_lens_confidence_does_not_depend_on_padding_side_or_packing(tied_dir):
    model = lens_model(tied_dir, head="mlp")
    seqs = encoded(model)
    pad = model.tokenizer.pad_token_id

    def confidences(batches) -> torch.Tensor:
        out = torch.full((len(seqs),), float("nan"))
        with torch.no_grad():
            for batch in batches:
                out[batch.order] = torch.sigmoid(model(**batch.model_inputs()))
        return out

    alone = confidences([padded_batch(seqs, [i], pad) for i in range(len(seqs))])
    assert alone.std() > 1e-4
    for side in ("left", "right"):
        torch.testing.assert_close(confidences([padded_batch(seqs, list(range(len(seqs))), pad, side)]), alone,
                                   atol=1e-5, rtol=0)
    torch.testing.assert_close(confidences(packed_batches(seqs, range(len(seqs)), pad, 256, 64)), alone,
                               atol=1e-5, rtol=0)


@pytest.mark.parametrize("lora", [True, False])
def test_a_lens_model_saves_and_loads_with_the_same_confidences(tied_dir, tmp_path, lora):
    model = lens_model(tied_dir, head="mlp", lora=lora)
    before = model.confidence(QUESTIONS)
    model.save(tmp_path / "m")
    head = json.loads((tmp_path / "m" / "head_config.json").read_text())
    hidden = model.classifier.config.hidden_size
    assert head["sizes"][0] == hidden + LENS_FEATURES and "entropy" in head["inputs"]
    assert json.loads((tmp_path / "m" / "elical_model.json").read_text())["model"]["lens"] is True
    for merge in (True, False):  # merging would put LoRA into the weights lens reads: a lens model keeps it apart
        after = ConfidenceModel.load(tmp_path / "m", merge=merge).confidence(QUESTIONS)
        assert after == pytest.approx(before, abs=1e-6)


def test_an_untied_model_reads_its_own_output_layer_from_the_checkpoint(tiny_dir_untied, tmp_path):
    model = lens_model(tiny_dir_untied)
    assert "lens_weight" not in dict(model.named_parameters()) and "lens_weight" not in model.state_dict()
    _, features, logprobs = features_beside_the_lm(model, tiny_dir_untied)
    expected = torch.stack([logprobs.max(-1).values, -(logprobs.exp() * logprobs).sum(-1)], dim=-1)
    torch.testing.assert_close(features[:, -LENS_FEATURES:], expected, atol=1e-5, rtol=1e-5)
    # a checkpoint without its output layer is named in a clear error
    stripped = tmp_path / "stripped"
    stripped.mkdir()
    for path in tiny_dir_untied.iterdir():
        if path.suffix != ".safetensors":
            (stripped / path.name).write_bytes(path.read_bytes())
    from safetensors.torch import load_file, save_file

    weights = load_file(str(tiny_dir_untied / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if not k.endswith("lm_head.weight")}, str(stripped / "model.safetensors"))
    with pytest.raises(ValueError, match=r"no lm_head.weight was found in its safetensors files; leave lens off"):
        ConfidenceModel.create(ModelConfig(base_model=str(stripped), lens=True))


def test_lens_is_recorded_only_when_on():
    """Folders trained before the option existed resume: off leaves no trace in the recorded settings."""
    assert "lens" not in output_settings(ModelConfig())
    assert output_settings(ModelConfig(lens=True))["lens"] is True


@pytest.mark.parametrize("mode", ["cal-only", "head-only"])
def test_training_with_lens_learns_and_caches_its_own_features(tied_dir, records_file, tmp_path, mode):
    from elical.train.config import TrainConfig
    from elical.train.trainer import train

    settings = {"model": str(tied_dir), "output_dir": str(tmp_path), "batch_size": 8, "epochs_stage2": 4,
                "lr": 1e-2, "lr_head_only": 1e-2, "tokens_per_batch": 512, "row_length": 128, "val_fraction": 0.25,
                "warmup_ratio": 0.0, "save_steps": 0, "mode": mode, "head": "mlp"}
    result = train(TrainConfig(**settings, lens=True), [records_file], show_progress=False)
    history = result.stages[0]["history"]
    assert history[-1]["train_loss"] < history[1]["train_loss"], history
    first_width = json.loads((result.model / "head_config.json").read_text())["sizes"][0]
    saved = ConfidenceModel.load(result.model)
    assert saved.config.lens and saved.confidence(QUESTIONS).shape == (len(QUESTIONS),)
    if mode == "head-only":  # retrained without lens, the same folder's cache gets a second, narrower entry
        plain = train(TrainConfig(**settings), [records_file], show_progress=False, overwrite=True)
        assert len(list((tmp_path / "cache").glob("features-*.safetensors"))) == 2
        width = json.loads((plain.model / "head_config.json").read_text())["sizes"][0]
        assert width + LENS_FEATURES == first_width
        # and with lens_top, a third, wider one: LENS_TOP largest log-probabilities and the entropy
        top = train(TrainConfig(**settings, lens=True, lens_top=True), [records_file], show_progress=False, overwrite=True)
        assert len(list((tmp_path / "cache").glob("features-*.safetensors"))) == 3
        assert json.loads((top.model / "head_config.json").read_text())["sizes"][0] == width + LENS_TOP + 1
