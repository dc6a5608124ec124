"""ConfidenceModel: pooling, padding/packing invariance, LoRA targets, save/load, peft compatibility."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from elical.model.network import ConfidenceModel, ModelConfig, qa_prompt
from elical.train.batching import pack_rows, packed_batches, padded_batch, tokenize_prompts

QUESTIONS = [
    "What is the capital of France?",
    "Who wrote Hamlet?",
    "Which river flows through Egypt? The quick brown fox jumps over the lazy dog 0 1 2 3 4 5 6 7 8 9.",
    "1969?",
    "In which year did it happen?",
]


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def tiny_dir(request, tmp_path_factory, tiny_tokenizer):
    """A tiny causal LM of each architecture saved to a folder, as a user's model would be."""
    from tiny import build_model

    path = tmp_path_factory.mktemp(request.param)
    build_model(tiny_tokenizer, request.param).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


def randomized(model: ConfidenceModel, seed: int = 1) -> ConfidenceModel:
    """Give LoRA B and the head non-zero weights (fresh ones start at zero)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.requires_grad:
                param.normal_(0, 0.2)
    return model.eval()


def confidences(model, seqs, batches) -> torch.Tensor:
    out = torch.full((len(seqs),), float("nan"))
    with torch.no_grad():
        for batch in batches:
            out[batch.order] = torch.sigmoid(model(**batch.model_inputs()))
    return out


def encode(model):
    prompts = [qa_prompt(model.tokenizer, q, model.config) for q in QUESTIONS]
    seqs, _ = tokenize_prompts(model.tokenizer, prompts, 512)
    return seqs


def test_prompt_is_the_chat_templated_qa_prompt(tiny_tokenizer):
    prompt = qa_prompt(tiny_tokenizer, "Who wrote Hamlet?", ModelConfig())
    assert prompt == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                      "Answer the following question.\nQuestion: Who wrote Hamlet?<|im_end|>\n"
                      "<|im_start|>assistant\n")


def test_pooling_reads_last_real_token_on_either_side():
    seqs = [[5, 6, 7], [8], [9, 10]]
    for side in ("left", "right"):
        batch = padded_batch(seqs, [0, 1, 2], pad_id=0, side=side)
        flat = batch.input_ids.reshape(-1)[batch.pool_index].tolist()
        assert flat == [7, 8, 10]
        assert batch.real_tokens == 6
    packed = packed_batches(seqs, [0, 1, 2], pad_id=0, tokens_per_batch=8, row_length=4)
    pooled = {q: b.input_ids.reshape(-1)[p].item() for b in packed for q, p in zip(b.order, b.pool_index)}
    assert pooled == {0: 7, 1: 8, 2: 10}
    assert sum(b.real_tokens for b in packed) == 6


def test_pack_rows_fits_every_sequence_once():
    lengths = [5, 3, 7, 2, 2, 8, 1]
    rows = pack_rows(lengths, 8)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in row) <= 8 for row in rows)
    assert len(rows) == 4  # 28 tokens need at least 4 rows of 8


def test_packing_cuts_the_rows_it_leaves_half_empty_into_a_short_last_batch():
    from elical.train.batching import TAIL_ROUND

    seqs = [[1] * 90 for _ in range(23)]  # 2,070 tokens: two full rows of 1,024 (11 prompts each) and one of 90
    trimmed = packed_batches(seqs, range(23), 0, tokens_per_batch=2048, row_length=1024)
    plain = packed_batches(seqs, range(23), 0, tokens_per_batch=2048, row_length=1024, trim_tail=False)
    assert [b.input_ids.shape for b in plain] == [(2, 1024), (1, 1024)]
    assert [b.input_ids.shape for b in trimmed] == [(2, 1024), (1, TAIL_ROUND * 2)]  # 90 tokens -> 128
    for batches in (trimmed, plain):
        assert sorted(q for b in batches for q in b.order) == list(range(23))
        assert all(b.input_ids.reshape(-1)[b.pool_index].eq(1).all() for b in batches)  # pooling reads real tokens
        assert sum(b.real_tokens for b in batches) == 2070


def test_lora_on_all_linear_layers_and_not_on_head(tiny_dir):
    model = ConfidenceModel.create(ModelConfig(base_model=str(tiny_dir)))
    adapted = {n.split(".lora_A")[0].rsplit(".", 1)[-1] for n in model.lora_parameters() if ".lora_A" in n}
    assert adapted == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert all("lora_" in n or ".score." in n for n in trainable)
    assert any(".score." in n for n in trainable)
    backbone = [p for n, p in model.named_parameters() if "lora_" not in n and ".score." not in n]
    assert not any(p.requires_grad for p in backbone)
    first = next(iter(model.lora_parameters().values()))
    assert first.shape[0] == 8 or first.shape[1] == 8  # r = 8


def test_confidence_does_not_depend_on_padding_side_batch_or_packing(tiny_dir):
    model = randomized(ConfidenceModel.create(ModelConfig(base_model=str(tiny_dir))))
    seqs = encode(model)
    pad = model.tokenizer.pad_token_id
    alone = confidences(model, seqs, [padded_batch(seqs, [i], pad) for i in range(len(seqs))])
    assert alone.min() > 0.01 and alone.max() < 0.99 and alone.std() > 1e-4  # not degenerate
    for side in ("left", "right"):
        together = confidences(model, seqs, [padded_batch(seqs, list(range(len(seqs))), pad, side)])
        torch.testing.assert_close(together, alone, atol=1e-5, rtol=0)
    other = confidences(model, seqs, [padded_batch(seqs, [3, 0, 4], pad), padded_batch(seqs, [2, 1], pad)])
    torch.testing.assert_close(other, alone, atol=1e-5, rtol=0)
    packed = confidences(model, seqs, packed_batches(seqs, range(len(seqs)), pad, 256, 64))
    torch.testing.assert_close(packed, alone, atol=1e-5, rtol=0)


def test_save_load_gives_identical_predictions_in_standard_peft_format(tiny_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification

    from elical.model.network import build_head

    model = randomized(ConfidenceModel.create(ModelConfig(base_model=str(tiny_dir))))
    seqs = encode(model)
    pad = model.tokenizer.pad_token_id
    before = confidences(model, seqs, [padded_batch(seqs, list(range(len(seqs))), pad)])
    model.save(tmp_path / "m", meta={"note": "test"})
    adapter = json.loads((tmp_path / "m" / "adapter_config.json").read_text())
    assert adapter["task_type"] == "SEQ_CLS" and "score" in adapter["modules_to_save"]
    assert adapter["r"] == 8 and adapter["lora_alpha"] == 16
    for merge in (True, False):
        loaded = ConfidenceModel.load(tmp_path / "m", merge=merge)
        after = confidences(loaded, seqs, [padded_batch(seqs, list(range(len(seqs))), pad)])
        torch.testing.assert_close(after, before, atol=1e-5, rtol=0)
    # The same folder loads with plain transformers + peft, and HF's own last-non-pad pooling agrees.
    hf = AutoModelForSequenceClassification.from_pretrained(tiny_dir, num_labels=1, pad_token_id=pad)
    hf.score = build_head(hf.config.hidden_size, "linear")
    hf = PeftModel.from_pretrained(hf, tmp_path / "m").eval()
    batch = padded_batch(seqs, list(range(len(seqs))), pad, "right")
    with torch.no_grad():
        logits = hf(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits.squeeze(-1)
    torch.testing.assert_close(torch.sigmoid(logits), before, atol=1e-5, rtol=0)


def test_head_only_mlp_model_round_trip(tiny_dir, tmp_path):
    config = ModelConfig(base_model=str(tiny_dir), lora=False, head="mlp")
    model = randomized(ConfidenceModel.create(config))
    assert not model.lora_parameters()
    hidden = model.classifier.config.hidden_size
    sizes = [m.out_features for m in model.head.modules() if isinstance(m, torch.nn.Linear)]
    assert sizes == [hidden // 2, hidden // 4, 1]
    seqs = encode(model)
    pad = model.tokenizer.pad_token_id
    before = confidences(model, seqs, [padded_batch(seqs, list(range(len(seqs))), pad)])
    model.save(tmp_path / "h")
    after = confidences(ConfidenceModel.load(tmp_path / "h"), seqs,
                        [padded_batch(seqs, list(range(len(seqs))), pad)])
    torch.testing.assert_close(after, before, atol=1e-6, rtol=0)


def test_load_names_a_folder_that_is_not_a_model(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a saved elical model folder"):
        ConfidenceModel.load(tmp_path)


def test_fused_lora_matches_peft_forward_and_gradients(tiny_dir):
    from elical.model.network import set_fused_lora

    model = randomized(ConfidenceModel.create(ModelConfig(base_model=str(tiny_dir)))).train()
    seqs = encode(model)
    batch = packed_batches(seqs, range(len(seqs)), model.tokenizer.pad_token_id, 512, 128)[0]
    results = []
    for fused in (True, False):
        assert set_fused_lora(model.net, fused) == 14  # 7 linear layers x 2 decoder layers
        model.zero_grad()
        logits = model(**batch.model_inputs())
        (logits ** 2).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        results.append((logits.detach(), grads))
    torch.testing.assert_close(results[0][0], results[1][0], atol=1e-6, rtol=1e-5)
    for name, grad in results[0][1].items():
        torch.testing.assert_close(grad, results[1][1][name], atol=1e-6, rtol=1e-4)
    assert any(g.abs().sum() > 0 for n, g in results[0][1].items() if "lora_A" in n)


@pytest.mark.parametrize("arch", ["mistral", "gemma"])
def test_other_families_through_auto_classes(arch, tiny_tokenizer, tmp_path):
    from transformers import AutoModelForCausalLM, GemmaConfig, MistralConfig

    config_cls = {"mistral": MistralConfig, "gemma": GemmaConfig}[arch]
    config = config_cls(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=512,
                        pad_token_id=tiny_tokenizer.pad_token_id, tie_word_embeddings=False)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    model = randomized(ConfidenceModel.create(ModelConfig(base_model=str(tmp_path))))
    assert len(model.lora_parameters()) == 2 * 7 * 2  # A and B on 7 linear layers in 2 decoder layers
    seqs = encode(model)
    pad = model.tokenizer.pad_token_id
    alone = confidences(model, seqs, [padded_batch(seqs, [i], pad) for i in range(len(seqs))])
    packed = confidences(model, seqs, packed_batches(seqs, range(len(seqs)), pad, 256, 64))
    left = confidences(model, seqs, [padded_batch(seqs, list(range(len(seqs))), pad, "left")])
    torch.testing.assert_close(packed, alone, atol=1e-5, rtol=0)
    torch.testing.assert_close(left, alone, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_backbone_loads_from_the_packaged_smollm2_alias():
    pytest.importorskip("gguf")
    from elical.model.network import ConfidenceModel, ModelConfig

    model = ConfidenceModel.create(ModelConfig(base_model="smollm2"))
    assert type(model.classifier).__name__ == "LlamaForSequenceClassification"


@pytest.fixture(scope="module")
def saved_model(tiny_dir, tmp_path_factory):
    """A randomized tiny model saved as `elical train` saves its final model (inside a run folder)."""
    run = tmp_path_factory.mktemp("run")
    randomized(ConfidenceModel.create(ModelConfig(base_model=str(tiny_dir)))).save(run / "model")
    return run


def test_python_api_gives_the_numbers_of_elical_predict(saved_model, tmp_path):
    import numpy as np

    import elical
    from elical.model.predictions import read_predictions
    from elical.records import Record, write_jsonl
    from elical.train.predict import predict_files

    records = [Record(question=q, answers=["x"], id=f"q{i}") for i, q in enumerate(QUESTIONS)]
    write_jsonl(records, tmp_path / "qa.jsonl")
    predict_files(saved_model / "model", [tmp_path / "qa.jsonl"], tmp_path / "p.jsonl", device="cpu")
    expected = read_predictions(tmp_path / "p.jsonl").confidence
    model = elical.ConfidenceModel.from_pretrained(saved_model, device="auto")  # a train folder: its model/
    got = model.confidence(QUESTIONS, batch_tokens=64)  # several packed batches
    assert isinstance(got, np.ndarray) and got.shape == (len(QUESTIONS),)
    np.testing.assert_allclose(got, [expected[r.id] for r in records], atol=1e-5, rtol=0)
    assert model.confidence([]).shape == (0,)
    with pytest.raises(TypeError, match="list of questions"):
        model.confidence("Who wrote Hamlet?")


def readme_recipe() -> str:
    """The README's recipe that loads a model folder with transformers + peft + safetensors alone."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    (recipe,) = [block for block in blocks if "PeftModel" in block]
    return recipe


def plain_confidences(folder, base, questions):
    """The README recipe, run as written, on ``folder`` (in place of its ``runs/m/model``) and ``base``."""
    recipe = readme_recipe()
    assert 'folder = Path("runs/m/model")' in recipe
    namespace: dict = {"base": str(base)}
    exec(recipe.replace('Path("runs/m/model")', f"Path({str(folder)!r})"), namespace)  # noqa: S102 (the README's own code)
    return [namespace["confidence"](question) for question in questions]


@pytest.mark.parametrize(("lora", "head"), [(True, "linear"), (True, "mlp"), (False, "mlp")])
def test_saved_model_loads_with_plain_transformers_and_peft(tiny_dir, tmp_path, lora, head):
    import numpy as np

    model = randomized(ConfidenceModel.create(ModelConfig(base_model=str(tiny_dir), lora=lora, head=head)))
    model.save(tmp_path / "m")
    expected = ConfidenceModel.from_pretrained(tmp_path / "m", device="cpu").confidence(QUESTIONS)
    assert expected.std() > 1e-4  # LoRA and head were not left at their zero start
    np.testing.assert_allclose(plain_confidences(tmp_path / "m", tiny_dir, QUESTIONS), expected, atol=1e-5, rtol=0)
    head_config = json.loads((tmp_path / "m" / "head_config.json").read_text())
    hidden = model.classifier.config.hidden_size
    assert head_config["sizes"] == ([hidden, 1] if head == "linear" else [hidden, hidden // 2, hidden // 4, 1])


@pytest.mark.parametrize("base", ["world-lm", "bf16"])
def test_readme_recipe_loads_folders_of_half_precision_base_models(base, tmp_path, tiny_tokenizer):
    """The recipe on the packaged world LM (config dtype float16) and a bfloat16 model: a head of the model's
    dtype, and elical's numbers."""
    import numpy as np

    from tiny import build_model

    if base == "bf16":
        build_model(tiny_tokenizer, "llama").to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
        tiny_tokenizer.save_pretrained(tmp_path / "bf16")
        base = str(tmp_path / "bf16")
    model = randomized(ConfidenceModel.create(ModelConfig(base_model=base, head="mlp")))
    model.save(tmp_path / "m")
    path = json.loads((tmp_path / "m" / "elical_model.json").read_text())["base_model"]["path"]
    assert json.loads((Path(path) / "config.json").read_text())["dtype"] in ("float16", "bfloat16")
    expected = ConfidenceModel.from_pretrained(tmp_path / "m", device="cpu").confidence(QUESTIONS)
    np.testing.assert_allclose(plain_confidences(tmp_path / "m", path, QUESTIONS), expected, atol=1e-5, rtol=0)


def test_saved_model_names_its_base_model_portably(tmp_path, tiny_dir):
    from elical.model.loading import portable_name
    from elical.world import default_lm_path

    assert portable_name("SmolLM2") == "smollm2"
    assert portable_name(str(default_lm_path())) == "world-lm"  # never a path inside the installed package
    cached = tmp_path / "hub" / "models--Org--Name" / "snapshots" / "abc"
    cached.mkdir(parents=True)
    assert portable_name(str(cached)) == "Org/Name"
    assert portable_name(str(tiny_dir)) == str(tiny_dir)  # the user's own folder, as given
    model = ConfidenceModel.create(ModelConfig(base_model=str(tiny_dir)))
    model.save(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "elical_model.json").read_text())
    assert saved["model"]["base_model"] == str(tiny_dir)
    assert saved["base_model"]["version"] and saved["base_model"]["path"] == str(tiny_dir)


def test_missing_base_model_is_a_clear_error_and_base_model_points_elsewhere(tiny_dir, tmp_path):
    import shutil

    moved = tmp_path / "moved"
    shutil.copytree(tiny_dir, tmp_path / "base")
    model = randomized(ConfidenceModel.create(ModelConfig(base_model=str(tmp_path / "base"))))
    model.save(tmp_path / "m")
    expected = ConfidenceModel.from_pretrained(tmp_path / "m", device="cpu").confidence(QUESTIONS[:2])
    (tmp_path / "base").rename(moved)
    with pytest.raises(FileNotFoundError, match=r"trained on base model .*not found here.*base_model="):
        ConfidenceModel.from_pretrained(tmp_path / "m")
    got = ConfidenceModel.from_pretrained(tmp_path / "m", device="cpu", base_model=str(moved)).confidence(QUESTIONS[:2])
    assert got.tolist() == pytest.approx(expected.tolist(), abs=1e-6)
    with open(moved / "config.json", "a") as handle:
        handle.write("\n")  # other files under the name: a warning, not an error
    with pytest.warns(UserWarning, match="is not the one .* was trained on"):
        ConfidenceModel.from_pretrained(tmp_path / "m", device="cpu", base_model=str(moved))


def test_folders_saved_before_the_plain_head_files_still_load(tiny_dir, tmp_path):
    model = randomized(ConfidenceModel.create(ModelConfig(base_model=str(tiny_dir), head="mlp")))
    model.save(tmp_path / "m")
    expected = ConfidenceModel.from_pretrained(tmp_path / "m", device="cpu").confidence(QUESTIONS)
    for name in ("head.safetensors", "head_config.json", "prompt.json"):
        (tmp_path / "m" / name).unlink()
    saved = json.loads((tmp_path / "m" / "elical_model.json").read_text())
    (tmp_path / "m" / "elical_model.json").write_text(json.dumps({"model": saved["model"]}))  # the old layout
    got = ConfidenceModel.from_pretrained(tmp_path / "m", device="cpu").confidence(QUESTIONS)
    assert got.tolist() == pytest.approx(expected.tolist(), abs=1e-6)
    ConfidenceModel.load(tmp_path / "m", merge=False).save(tmp_path / "resaved")  # the README's re-save step
    assert plain_confidences(tmp_path / "resaved", tiny_dir, QUESTIONS) == pytest.approx(expected.tolist(), abs=1e-5)


def test_packed_rows_take_elicals_mask_with_transformers_numbers(tiny_dir, monkeypatch):
    """elical.model.packed_mask builds the mask of packed rows: the confidences are transformers' own, and its
    packed-row detection (a host sync per forward) is not run."""
    import transformers.masking_utils as masking

    found = []
    detect = masking.find_packed_sequence_indices
    monkeypatch.setattr(masking, "find_packed_sequence_indices", lambda *a: found.append(1) or detect(*a))
    model = randomized(ConfidenceModel.create(ModelConfig(base_model=str(tiny_dir))))
    seqs = encode(model)
    batches = packed_batches(seqs, range(len(seqs)), model.tokenizer.pad_token_id, 256, 64)
    own = confidences(model, seqs, batches)
    assert not found
    model.own_packed_mask = False
    theirs = confidences(model, seqs, batches)
    assert found
    torch.testing.assert_close(own, theirs, atol=1e-6, rtol=0)


def test_a_saved_model_folder_has_a_model_card_and_names_its_base_portably(trained_model_dir, records_file):
    import json

    from elical.model.loading import portable_name
    from elical.model.network import ConfidenceModel

    saved = json.loads((trained_model_dir / "elical_model.json").read_text())
    card = (trained_model_dir / "README.md").read_text()
    base = saved["model"]["base_model"]
    assert json.loads((trained_model_dir / "adapter_config.json").read_text())["base_model_name_or_path"] == base
    assert base == portable_name(base)
    assert card.startswith("---\nlibrary_name: peft\n") and "# elical confidence model" in card
    assert f"`{base}`" in card and "Cal-Only: the labelled budget only" in card
    assert "- label budget: all labelled questions" in card and "- seed: 0" in card and f"`{records_file}`" in card
    chosen = saved["selection"]
    assert f"validation MSE {chosen['val_mse']:.4f}" in card and "ECE is not measured at training" in card
    if chosen["val_auroc"] is not None:  # None: one class among the validation questions
        assert f"AUROC {chosen['val_auroc']:.3f} against {chosen['val_auroc_against']}" in card
    assert "ConfidenceModel.from_pretrained(" in card and "PeftModel.from_pretrained(model, folder)" in card
    assert "## Model Card for" not in card  # peft's empty template is replaced
    model = ConfidenceModel.from_pretrained(trained_model_dir, device="cpu")  # still loads from the recorded name
    assert 0.0 <= float(model.confidence(["What is the capital of France?"])[0]) <= 1.0
