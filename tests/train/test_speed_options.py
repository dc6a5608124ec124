"""Speed-only settings (issue 15): they validate and round-trip, and change nothing that is computed:
static-shape padding and bf16 LoRA copies leave a step's loss and gradients as they were, the fused
AdamW makes the same update, and the HF backend's own decoding loop gives generate's greedy tokens."""

from __future__ import annotations

import pytest
import torch
from test_train import config

from elical.core.settings_contract import Output, mark
from elical.train.config import TrainConfig


def test_speed_settings_round_trip_and_never_block_a_resume(tmp_path):
    cfg = TrainConfig(model="m", compile=True, compile_mode="reduce-overhead", lora_dtype="bf16", fused_optimizer=True)
    cfg.to_yaml(tmp_path / "train.yaml")
    assert TrainConfig.from_yaml(tmp_path / "train.yaml") == cfg
    assert all(mark(TrainConfig, name) is Output.NEVER for name in ("compile_mode", "lora_dtype", "fused_optimizer"))
    assert TrainConfig(model="m", compile=True).compile_mode == "layers"  # compile: true is today's layer compile


@pytest.mark.parametrize(("settings", "message"), [
    ({"compile_mode": "reduce-overhead", "packing": False}, "reduce-overhead needs packing"),
    ({"compile_mode": "graphs"}, "compile_mode"),
    ({"lora_dtype": "fp8"}, "lora_dtype"),
    ({"mode": "head-only", "lora_dtype": "bf16"}, "lora_dtype applies to LoRA training"),
])
def test_bad_speed_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(model="m", **settings)


def test_pad_batch_gives_static_shapes():
    from elical.train.batching import packed_batches, pad_batch, static_rows

    batch = packed_batches([[1, 2, 3], [4, 5], [6]], [0, 1, 2], 0, tokens_per_batch=32, row_length=4, trim_tail=False)[0]
    padded = pad_batch(batch, rows=4, questions=5, pad_id=0)
    assert padded.input_ids.shape == (4, 4) and padded.pool_index.shape == (5,) and padded.order == batch.order
    assert padded.position_ids[-1].tolist() == [0, 1, 2, 3]  # a padding row is one segment of its own
    assert [static_rows(r, 8) for r in range(1, 9)] == [1, 2, 4, 4, 8, 8, 8, 8]
    assert static_rows(3, 3) == 3
    with pytest.raises(ValueError, match="cannot pad a batch of 2 rows"):
        pad_batch(batch, rows=1, questions=5, pad_id=0)


def confidence_model(model_dir, dtype: str = "float32"):
    """A ConfidenceModel on the tiny Llama with non-zero LoRA B and head, so every gradient is non-zero."""
    from elical.model.network import ConfidenceModel, ModelConfig

    model = ConfidenceModel.create(ModelConfig(base_model=str(model_dir), dtype=dtype))
    torch.manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            if param.requires_grad:
                param.normal_(0, 0.05)
    return model


def step_grads(model, speed, cfg: TrainConfig) -> tuple[float, dict[str, torch.Tensor]]:
    """Loss and gradients of one training step over 6 questions of different lengths."""
    from accelerate import Accelerator

    from elical.train.loop import StageData, _train_step

    seqs = [list(range(5, 5 + n)) for n in (7, 12, 3, 20, 9, 15)]
    data = StageData(seqs, [0.1, 0.9, 0.4, 0.7, 0.2, 0.5], list(range(6)), [], model.tokenizer.pad_token_id)
    model.zero_grad(set_to_none=True)
    loss = _train_step(model, list(range(6)), 0, 1, data, torch.tensor(data.targets), cfg, Accelerator(cpu=True), speed)
    return loss, {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


def test_static_shapes_leave_loss_and_gradients_unchanged(model_dir):
    from elical.train.speed import StepSpeed

    model = confidence_model(model_dir)
    cfg = TrainConfig(model="m", batch_size=16, tokens_per_batch=256, row_length=32)  # 2 rows -> 8, 6 -> 16 pooled
    loss, grads = step_grads(model, StepSpeed(model), cfg)
    padded_loss, padded_grads = step_grads(model, StepSpeed(model, static=True), cfg)
    assert padded_loss == pytest.approx(loss, rel=1e-6)
    assert grads.keys() == padded_grads.keys() and any(g.abs().sum() > 0 for g in grads.values())
    for name, grad in grads.items():
        torch.testing.assert_close(padded_grads[name], grad, rtol=1e-5, atol=1e-7, msg=name)


def test_bf16_lora_copies_give_autocast_numbers(model_dir):
    from elical.model.network import LORA_COPY_ATTR
    from elical.train.speed import LoraCopies, StepSpeed

    model = confidence_model(model_dir, dtype="bfloat16")
    cfg = TrainConfig(model="m", batch_size=16, tokens_per_batch=64, row_length=32)  # several micro-batches
    loss, grads = step_grads(model, StepSpeed(model), cfg)
    copies = LoraCopies(model)
    copied_loss, copied_grads = step_grads(model, StepSpeed(model, copies), cfg)
    assert copied_loss == loss
    lora = [n for n in grads if "lora_" in n]
    assert lora and all(grads[n].dtype == torch.float32 and grads[n].abs().sum() > 0 for n in lora)
    for name, grad in grads.items():  # the same bf16 products and float32 sums: identical on CPU
        torch.testing.assert_close(copied_grads[name], grad, rtol=0, atol=0, msg=name)
    assert not any(hasattr(m, LORA_COPY_ATTR) for m in model.modules())  # copies only inside a step


def test_bf16_lora_needs_a_bf16_backbone(model_dir):
    from elical.train.speed import LoraCopies

    with pytest.raises(ValueError, match="lora_dtype bf16 needs a bf16 backbone"):
        LoraCopies(confidence_model(model_dir))


def test_fused_adamw_makes_the_same_update(model_dir):
    from elical.train.loop import _optimizer

    updated = []
    for fused in (False, True):
        model = confidence_model(model_dir)
        optimizer = _optimizer(model, 1e-2, 0.1, fused=fused)
        assert optimizer.param_groups[0]["fused"] is (True if fused else None)
        step_grads(model, None, TrainConfig(model="m"))
        optimizer.step()
        updated.append({n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad})
    for name, value in updated[0].items():
        torch.testing.assert_close(updated[1][name], value, rtol=1e-5, atol=1e-6, msg=name)


def test_training_with_every_cpu_speed_option(model_dir, records_file, tmp_path):
    from elical.train.trainer import train

    cfg = config(model_dir, tmp_path, mode="cal-only", epochs_stage2=2, dtype="bfloat16", lora_dtype="bf16",
                 fused_optimizer=True)
    history = train(cfg, [records_file], show_progress=False).stages[0]["history"]
    assert len(history) == 3 and all(h["train_loss"] is None or h["train_loss"] > 0 for h in history)


@pytest.fixture(params=["llama", "qwen2"])
def tiny_lm(request, tiny_llama, tiny_qwen2):
    return {"llama": tiny_llama, "qwen2": tiny_qwen2}[request.param]


def test_fast_decode_gives_generates_greedy_answers(tiny_lm, tiny_tokenizer):
    from test_backends import PROMPTS

    from elical.annotate.backends.base import GenerationSettings
    from elical.annotate.backends.hf import HFBackend

    plain = HFBackend(tiny_lm, tiny_tokenizer, batch_size=16)
    fast = HFBackend(tiny_lm, tiny_tokenizer, batch_size=16, fast_decode=True)
    greedy = GenerationSettings(max_new_tokens=8)
    expected = plain.generate(PROMPTS, greedy)
    got = fast.generate(PROMPTS, greedy)
    assert [g.token_ids for g in got] == [g.token_ids for g in expected] and all(g.token_ids for g in got)
    assert [g.finish_reason for g in got] == [g.finish_reason for g in expected]
    for a, b in zip(got, expected):
        assert a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-4)
    assert fast.describe()["fast_decode"] is True and "fast_decode" not in plain.describe()


def test_fast_decode_samples_carry_their_raw_logprobs_and_reuse_buffers(tiny_llama, tiny_tokenizer):
    from test_backends import PROMPTS, forward_logprobs

    from elical.annotate.backends.base import GenerationSettings
    from elical.annotate.backends.hf import HFBackend

    fast = HFBackend(tiny_llama, tiny_tokenizer, batch_size=6, fast_decode=True)
    settings = GenerationSettings(do_sample=True, n=3, max_new_tokens=6, seed=5)
    out = fast.generate(PROMPTS, settings)  # 2 prompts per call: a full batch of 6 rows, then one of 3
    assert len(out) == 9 and len(fast._decoders) == 2
    for index, answer in enumerate(out):
        assert answer.token_logprobs == pytest.approx(forward_logprobs(fast, PROMPTS[index // 3], answer), abs=1e-4)
    assert [g.token_ids for g in fast.generate(PROMPTS, settings)] == [g.token_ids for g in out]  # seeded, buffers reused
    assert len(fast._decoders) == 2


def test_sampler_draws_from_the_top_k_top_p_distribution():
    from elical.annotate.backends.hf_decode import Sampler

    logits = torch.log(torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]])).repeat(40_000, 1)
    torch.manual_seed(0)
    tokens, logprobs = Sampler(True, top_k=4, top_p=0.8)(logits)  # top 4, then mass above < 0.8: tokens 0, 1, 2
    share = torch.bincount(tokens, minlength=5).float() / len(tokens)
    assert share.tolist() == pytest.approx([0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0.0, 0.0], abs=0.01)
    assert logprobs[tokens == 1] == pytest.approx(torch.log(torch.tensor(0.2)).item(), abs=1e-6)  # raw, not renormalised
    hot = Sampler(True, temperature=0.5)(logits[:20_000])[0]  # p^2 renormalised: 0.25/0.325 for token 0
    assert (hot == 0).float().mean().item() == pytest.approx(0.25 / 0.325, abs=0.01)
    assert Sampler(False)(logits[:3])[0].tolist() == [0, 0, 0]


def test_sampler_decides_on_bf16_logits_as_on_their_float32_copy():
    from elical.annotate.backends.hf_decode import Sampler

    # distinct values that bf16 holds exactly (k/32 for k < 256), shuffled per row
    logits = torch.stack([torch.randperm(256) for _ in range(64)]).float() / 32
    for sampler in (Sampler(False), Sampler(True, top_k=50, top_p=0.95), Sampler(True, temperature=0.7),
                    Sampler(True, top_p=0.9)):
        torch.manual_seed(1)
        low = sampler(logits.bfloat16())
        torch.manual_seed(1)
        full = sampler(logits)
        assert low[0].tolist() == full[0].tolist()
        assert low[1].dtype == torch.float32 and torch.equal(low[1], full[1])
        assert torch.equal(full[1], torch.log_softmax(logits, -1).gather(1, full[0][:, None]).squeeze(1))


def test_fast_decode_refuses_what_it_would_decode_differently(tiny_llama, tiny_tokenizer):
    from test_backends import PROMPTS

    from elical.annotate.backends.base import GenerationSettings
    from elical.annotate.backends.hf import HFBackend
    from elical.annotate.backends.hf_decode import check_supported

    fast = HFBackend(tiny_llama, tiny_tokenizer, fast_decode=True)
    with pytest.raises(ValueError, match="no repetition penalty"):
        fast.generate(PROMPTS, GenerationSettings(repetition_penalty=1.05))

    class Config:
        _attn_implementation = "flash_attention_2"
    class Sliding:
        _attn_implementation = "sdpa"
        layer_types = ["full_attention", "sliding_attention"]
    with pytest.raises(ValueError, match="does not read"):
        check_supported(type("Model", (), {"config": Config()})())
    with pytest.raises(ValueError, match="sliding-window layers"):
        check_supported(type("Model", (), {"config": Sliding()})())


def test_annotate_fast_decode_is_recorded_when_on_and_validates():
    from elical.annotate.config import AnnotateConfig

    fast = AnnotateConfig(fast_decode=True)
    plain = AnnotateConfig().output_settings()
    # off, the fingerprint is as before; on, it is recorded (its samples are other draws than generate's)
    assert "fast_decode" not in plain and fast.output_settings() == {**plain, "fast_decode": True}
    assert AnnotateConfig.model_validate(fast.model_dump()) == fast
    with pytest.raises(ValueError, match="applies to the hf backend, not vllm"):
        AnnotateConfig(backend="vllm", fast_decode=True)
    with pytest.raises(ValueError, match="no repetition penalty"):
        AnnotateConfig(fast_decode=True, repetition_penalty=1.05)
    with pytest.raises(ValueError, match="static_cache was replaced by fast_decode"):
        AnnotateConfig.model_validate({"static_cache": True})


def test_prefix_attention_equals_sdpa_over_the_repeated_prompt_and_heads():
    from elical.annotate.backends.hf_decode import SharedPrefix, prefix_attention

    torch.manual_seed(0)
    prompts, n, heads, kv_heads, dim, prompt_slots, own_slots = 2, 3, 6, 2, 8, 5, 4
    blocked = torch.finfo(torch.float32).min
    prefix = SharedPrefix([torch.randn(prompts, kv_heads, prompt_slots, dim)], [torch.randn(prompts, kv_heads, prompt_slots, dim)],
                          torch.zeros(prompts, 1, 1, prompt_slots), n)
    prefix.mask[1, ..., :2] = blocked  # left padding of the second prompt
    query = torch.randn(prompts * n, heads, 1, dim)
    keys, values = torch.randn(prompts * n, kv_heads, own_slots, dim), torch.randn(prompts * n, kv_heads, own_slots, dim)
    own_mask = torch.zeros(prompts * n, 1, 1, own_slots)
    own_mask[..., 2:] = blocked  # slots not yet written
    got, _ = prefix_attention(type("Layer", (), {"layer_idx": 0})(), query, keys, values, own_mask, scaling=dim ** -0.5,
                              elical_prefix=prefix)

    def full(prompt_part, own_part):  # each row: its prompt's slots, then its own, every kv head repeated
        return torch.cat([prompt_part.repeat_interleave(n, dim=0), own_part], dim=2).repeat_interleave(heads // kv_heads, dim=1)

    mask = torch.cat([prefix.mask.repeat_interleave(n, dim=0), own_mask], dim=-1)
    expected = torch.nn.functional.scaled_dot_product_attention(
        query, full(prefix.keys[0], keys), full(prefix.values[0], values), attn_mask=mask)
    assert got.shape == (prompts * n, 1, heads, dim)
    assert torch.allclose(got.transpose(1, 2), expected, atol=1e-6)


def test_fast_decode_attends_through_prefix_attention(tiny_llama, tiny_tokenizer, monkeypatch):
    from test_backends import PROMPTS

    from elical.annotate.backends import hf_decode
    from elical.annotate.backends.base import GenerationSettings
    from elical.annotate.backends.hf import HFBackend

    calls = []
    original = hf_decode.prefix_attention
    monkeypatch.setattr(hf_decode, "prefix_attention", lambda *a, **k: calls.append(1) or original(*a, **k))
    HFBackend(tiny_llama, tiny_tokenizer, fast_decode=True).generate(PROMPTS, GenerationSettings(max_new_tokens=3))
    assert len(calls) == 2 * tiny_llama.config.num_hidden_layers  # two decoding steps after the prefill
    assert tiny_llama.config._attn_implementation == "sdpa"  # restored
