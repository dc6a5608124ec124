"""Hugging Face transformers backend: batched, left-padded, chat-templated generation.

The k samples of a prompt share one prefill: the prompt (all but its last token) runs through the
model once, its KV cache is repeated k times, and ``generate`` continues from it. Token log-probs
come from the model's raw next-token distribution (recorded before any repetition penalty,
temperature or top-k/top-p), so they equal one forward pass over prompt + answer.

``fast_decode`` replaces ``generate`` by elical's own decoding loop (:mod:`.hf_decode`: fixed-shape
buffers, the prompt's keys and values held once for its k samples, sync-free sampling, each step one
CUDA graph on a GPU), for small models whose ``generate`` steps a GPU leaves waiting on the host and on
copies. Greedy answers are the same in float32 (in bf16 they differ as batch effects make them differ, see
elical.annotate.decoding); samples come from the same distribution but are other draws.
An annotation decides which of the two a run uses (``fast_decode``: auto, true or false) and switches
the backend to it (:meth:`HFBackend.set_fast_decode`).

An annotation asks for the greedy answers and then the samples of the same prompts: the backend keeps the
last batch's token ids (and, for elical's loop, its prefill) for the next call, which reuses them when its
prompts are the same (:class:`_Batch`), so a batch is tokenized and prefilled once. The model's weights are
assumed not to change between two such calls.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from elical.annotate.backends.base import GREEDY, Backend, Generation, GenerationSettings, Prompt, token_usage
from elical.annotate.backends.hf_decode import Decoder, Sampler, check_supported


class _RawLogprobs:
    """Logits processor placed first: keeps log-softmax of the raw scores, gathers the chosen token
    at the next step (whose input ids end with it), so only one step's distribution is held."""

    def __init__(self) -> None:
        self.previous = None
        self.steps: list[Any] = []

    def __call__(self, input_ids, scores):
        import torch

        if self.previous is not None:
            self.steps.append(self.previous.gather(1, input_ids[:, -1:]).squeeze(1))
        self.previous = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, last_tokens):
        """Gather the last step with the last generated tokens; returns (batch, steps) or None."""
        import torch

        if self.previous is not None:
            self.steps.append(self.previous.gather(1, last_tokens[:, None]).squeeze(1))
            self.previous = None
        return torch.stack(self.steps, dim=1) if self.steps else None


@dataclass
class _Batch:
    """A batch of rendered prompts, left-padded token ids and mask, and (once elical's loop has run on it) its
    prefill: the KV cache and last logits of the whole prompts."""

    texts: tuple[str, ...]
    input_ids: Any
    attention_mask: Any
    prefill: tuple[Any, Any] | None = None


CLEANUP_PROBE = "a . b ? c ! d , e ' f n't g 'm h 's i 've j 're k"
"""A text with every pattern transformers' space clean-up (``clean_up_tokenization``) changes."""


def fast_batch_decode(tokenizer: Any) -> Callable[[list[list[int]], bool], list[str]] | None:
    """A function equal to ``tokenizer.batch_decode(sequences, skip_special_tokens=...)`` that decodes the batch
    in one call of the Rust tokenizer (``decode_batch``) instead of one Python call per sequence, then cleans up
    spaces where the tokenizer's own decoding does (whether it does depends on the tokenizer's settings and on
    the transformers version, so it is probed once, on :data:`CLEANUP_PROBE`); None for a tokenizer that is
    not a fast tokenizer with transformers' own decoding, or whose probe matches neither."""
    from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

    kind = type(tokenizer)
    rust = getattr(tokenizer, "_tokenizer", None)
    if not (isinstance(tokenizer, PreTrainedTokenizerFast) and rust is not None
            and kind._decode is PreTrainedTokenizerFast._decode and kind.decode is PreTrainedTokenizerBase.decode
            and kind.batch_decode is PreTrainedTokenizerBase.batch_decode):
        return None
    ids = tokenizer(CLEANUP_PROBE, add_special_tokens=False)["input_ids"]
    plain, own = rust.decode(ids, skip_special_tokens=True), tokenizer.decode(ids, skip_special_tokens=True)
    cleaned = tokenizer.clean_up_tokenization(plain)
    if own == plain and (cleaned != plain or not getattr(tokenizer, "clean_up_tokenization_spaces", True)):
        return lambda sequences, skip: list(rust.decode_batch(sequences, skip_special_tokens=skip))
    if own == cleaned != plain:
        return lambda sequences, skip: [tokenizer.clean_up_tokenization(text)
                                        for text in rust.decode_batch(sequences, skip_special_tokens=skip)]
    return None


@contextmanager
def prefill_attention() -> Iterator[None]:
    """The prefill's attention kernels without cuDNN's: for left-padded batches whose length changes from batch
    to batch, cuDNN's attention builds a plan per new shape on the host (37 ms per layer call for SmolLM2 on an
    H200, more than the prefill's GPU time; benchmarks/results/decode_step_profile_h200.txt). In bf16 another
    kernel rounds otherwise, so greedy answers differ from generate's prefill as batch effects make them differ
    (31 % of SmolLM2's; bench_annotate_whole_after2_h200.txt)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        yield


class HFBackend(Backend):
    """Generate with an in-memory transformers model (or load one by path/alias)."""

    name = "hf"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        batch_size: int = 64,
        shared_prefix: bool = True,
        system_prompt_supported: bool = True,
        model_name: str | None = None,
        fast_decode: bool = False,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.shared_prefix = shared_prefix
        self.fast_decode = False
        self.set_fast_decode(fast_decode)
        self._decoders: dict[tuple, Decoder] = {}
        self._last: _Batch | None = None  # the last batch, for a next call with the same prompts
        self._batch_decode = fast_batch_decode(tokenizer)  # None: tokenizer.batch_decode
        self._pieces: dict[int, str] = {}  # each token id's own text (its record's tokens), decoded once per backend
        self._side_decode: Callable[[list[list[int]], bool], list[str]] | None = None  # another thread's (start_generate)
        self.model_name = model_name or getattr(model.config, "_name_or_path", "") or type(model).__name__
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        eos = {tokenizer.eos_token_id}
        config_eos = getattr(model.generation_config, "eos_token_id", None)
        eos.update(config_eos if isinstance(config_eos, list) else [config_eos])
        self.stop_ids = sorted(int(e) for e in eos if e is not None)
        # transformers >= 5.2x names the KV-cache argument `cache`; older 5.x call it `past_key_values`.
        params = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"

    @classmethod
    def from_pretrained(cls, spec: str, dtype: str = "auto", device: str = "auto", **kwargs: Any) -> HFBackend:
        """Load a model by alias (``smollm2``), GGUF path, folder or cached name."""
        from elical.model.loading import load_model

        model, tokenizer, source = load_model(spec, dtype=dtype, device=device)
        return cls(model, tokenizer, model_name=source.name, **kwargs)

    def set_fast_decode(self, on: bool) -> None:
        """Decode with elical's loop (``on``) or with ``generate`` from now on; a model the loop would decode
        differently is refused (:func:`~.hf_decode.check_supported`)."""
        if on:
            check_supported(self.model)
        self.fast_decode = on

    @contextmanager
    def decoding(self, fast: bool) -> Iterator[None]:
        """Decode with elical's loop (``fast``) or ``generate`` inside the block, as before after it."""
        before = self.fast_decode
        self.set_fast_decode(fast)
        try:
            yield
        finally:
            self.fast_decode = before

    # ------------------------------------------------------------------ prompts

    def render(self, prompt: Prompt) -> str:
        if isinstance(prompt, str):
            return prompt
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)
        return super().render(prompt) + "\nassistant: "

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.model_name,
            "dtype": str(self.model.dtype).replace("torch.", ""),
            "shared_prefix": self.shared_prefix,
            **({"fast_decode": True} if self.fast_decode else {}),
        }

    def encode(self, prompts: Sequence[Prompt], texts: Sequence[str] | None = None):
        """Left-padded token ids and mask for a batch of prompts (on the model's device); ``texts``:
        their renderings, where the caller has them already."""
        texts = [self.render(p) for p in prompts] if texts is None else texts
        templated = not all(isinstance(p, str) for p in prompts)
        side = self.tokenizer.padding_side
        self.tokenizer.padding_side = "left"
        try:
            batch = self.tokenizer(list(texts), return_tensors="pt", padding=True, add_special_tokens=not templated)
        finally:
            self.tokenizer.padding_side = side
        return batch["input_ids"].to(self.model.device), batch["attention_mask"].to(self.model.device)

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: Sequence[Prompt], settings: GenerationSettings = GREEDY) -> list[Generation]:
        out: list[Generation] = []
        per_call = self._prompts_per_call(settings)
        for start in range(0, len(prompts), per_call):
            out.extend(self._generate_batch(prompts[start : start + per_call], settings))
        return out

    def _prompts_per_call(self, settings: GenerationSettings) -> int:
        """Prompts per model call: ``batch_size`` sequences hold this many prompts' n answers."""
        return max(1, self.batch_size // settings.n)

    def _processors(self, settings: GenerationSettings, recorder: _RawLogprobs):
        from transformers import LogitsProcessorList
        from transformers.generation.logits_process import (
            RepetitionPenaltyLogitsProcessor,
            TemperatureLogitsWarper,
            TopKLogitsWarper,
            TopPLogitsWarper,
        )

        processors: list[Any] = [recorder]
        if settings.repetition_penalty != 1.0:
            processors.append(RepetitionPenaltyLogitsProcessor(settings.repetition_penalty))
        if settings.do_sample:
            if settings.temperature != 1.0:
                processors.append(TemperatureLogitsWarper(settings.temperature))
            if settings.top_k:
                processors.append(TopKLogitsWarper(settings.top_k))
            if settings.top_p < 1.0:
                processors.append(TopPLogitsWarper(settings.top_p))
        return LogitsProcessorList(processors)

    def _batch(self, prompts: Sequence[Prompt]) -> _Batch:
        """The prompts rendered and tokenized, or the last call's batch where its prompts were the same."""
        texts = tuple(self.render(p) for p in prompts)
        batch = self._last  # read once: a call from another thread may replace it meanwhile
        if batch is None or batch.texts != texts:
            self._last = None  # no earlier batch held while this one is made
            batch = self._last = _Batch(texts, *self.encode(prompts, texts))
        return batch

    def start_generate(self, prompts: Sequence[Prompt], settings: GenerationSettings = GREEDY) -> Callable[[], list[Generation]]:
        """One batch's model work now; its decoding into texts when the returned function is called, with a copy
        of the Rust tokenizer of its own, so another thread may decode while this one tokenizes the next batch.
        Everything now for more prompts than a batch, a tokenizer without a Rust decoding, and where a subclass
        or the instance replaces ``generate`` (its ``generate`` is called)."""
        own = type(self).generate is HFBackend.generate and "generate" not in vars(self)
        if own and self._side_decode is None and self._batch_decode is not None:
            self._side_decode = fast_batch_decode(copy.deepcopy(self.tokenizer))
        decode = self._side_decode
        if not own or decode is None or len(prompts) > self._prompts_per_call(settings):
            return super().start_generate(prompts, settings)
        tokens, logprobs, prompt_tokens = self._model_part(prompts, settings)
        return lambda: self._to_generations(tokens, logprobs, settings.logprobs, prompt_tokens, decode)

    def _generate_batch(self, prompts: Sequence[Prompt], settings: GenerationSettings) -> list[Generation]:
        tokens, logprobs, prompt_tokens = self._model_part(prompts, settings)
        return self._to_generations(tokens, logprobs, settings.logprobs, prompt_tokens, self._decode)

    def _model_part(self, prompts: Sequence[Prompt], settings: GenerationSettings) -> tuple[list[list[int]], list[list[float]], list[int]]:
        """A batch's new token ids and their raw log-probs (n rows per prompt), and each row's prompt length."""
        import torch

        batch = self._batch(prompts)
        with torch.inference_mode():
            seed_text = "\x1e".join(batch.texts)
            torch.manual_seed(settings.seed + int(hashlib.sha1(seed_text.encode()).hexdigest()[:8], 16))
            if self.fast_decode:
                tokens, logprobs = self._fast_decode(batch, settings)
            else:
                tokens, logprobs = self._hf_generate(batch.input_ids, batch.attention_mask, settings)
        prompt_tokens = [int(n) for n in batch.attention_mask.sum(dim=1).tolist() for _ in range(settings.n)]
        return tokens, logprobs, prompt_tokens

    def _hf_generate(self, input_ids, attention_mask, settings: GenerationSettings) -> tuple[list[list[int]], list[list[float]]]:
        """New tokens and their raw log-probs from transformers' ``generate`` (n rows per prompt)."""
        from transformers import GenerationConfig

        n = settings.n
        recorder = _RawLogprobs()
        # Everything decoding-related is set here and in our processors, never taken from the model's
        # own generation_config (Qwen's ships temperature 0.7 and repetition penalty 1.05).
        neutral = {"temperature": 1.0, "top_k": 0, "top_p": 1.0} if settings.do_sample else {}
        config = GenerationConfig(
            do_sample=settings.do_sample,
            max_new_tokens=settings.max_new_tokens,
            repetition_penalty=1.0,
            num_return_sequences=1,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.stop_ids,
            disable_compile=True,
            **neutral,
        )
        kwargs: dict[str, Any] = {}
        if n > 1 and self.shared_prefix and input_ids.shape[1] > 1:
            cache, _ = self._prefill(input_ids[:, :-1], attention_mask[:, :-1])
            cache.batch_repeat_interleave(n)
            kwargs[self._cache_kwarg] = cache
        if n > 1:
            input_ids = input_ids.repeat_interleave(n, dim=0)
            attention_mask = attention_mask.repeat_interleave(n, dim=0)
        sequences = self.model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            generation_config=config,
            logits_processor=self._processors(settings, recorder),
            **kwargs,
        )
        logprobs = recorder.finish(sequences[:, -1]) if sequences.shape[1] > input_ids.shape[1] else None
        new_tokens = sequences[:, input_ids.shape[1] :].tolist()
        return new_tokens, logprobs.tolist() if logprobs is not None else [[] for _ in new_tokens]

    def _fast_decode(self, batch: _Batch, settings: GenerationSettings) -> tuple[list[list[int]], list[list[float]]]:
        """New tokens and their raw log-probs from elical's decoding loop (:mod:`.hf_decode`): one prefill
        of the whole prompts (the batch's own, where an earlier call made it), then n rows per prompt
        decoded in reused buffers, the prompt's keys and values held once."""
        if settings.repetition_penalty != 1.0:
            raise ValueError("fast_decode applies no repetition penalty; leave fast_decode off to use one")
        input_ids, attention_mask = batch.input_ids, batch.attention_mask
        if batch.prefill is None:
            with prefill_attention():
                batch.prefill = self._prefill(input_ids, attention_mask)
        cache, logits = batch.prefill
        layout = [(layer.keys.shape[1], layer.keys.shape[-1], layer.values.shape[-1]) for layer in cache.layers]
        prefix_slots = -(-input_ids.shape[1] // 64) * 64  # a few buffer shapes serve every batch
        sampler = Sampler(settings.do_sample, settings.temperature, settings.top_k, settings.top_p) if settings.do_sample \
            else Sampler(False)
        key = (input_ids.shape[0], settings.n, sampler, settings.max_new_tokens, tuple(layout))
        decoder = self._decoders.get(key)
        if decoder is None or decoder.prefix_slots < prefix_slots:
            decoder = self._decoders[key] = Decoder(self.model, self._cache_kwarg, input_ids.shape[0], settings.n,
                                                    prefix_slots, settings.max_new_tokens, sampler, self.stop_ids, layout)
        tokens, logprobs = decoder.run(cache, attention_mask, logits[:, -1])
        return tokens.tolist(), logprobs.tolist()

    def _prefill(self, input_ids, attention_mask):
        """Run left-padded prompts once: their KV cache (transformers' DynamicCache) and last logits."""
        from transformers import DynamicCache

        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=self.model.config)
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=True,
            **{self._cache_kwarg: cache},
            logits_to_keep=1,
        )
        return cache, out.logits

    def _to_generations(self, sequences: list[list[int]], logprobs: list[list[float]], keep_logprobs: bool,
                        prompt_tokens: list[int], decode: Callable[[list[list[int]], bool], list[str]]) -> list[Generation]:
        """Cut each sequence at its first stop token and decode it with ``decode`` (each distinct answer once,
        each token once per backend); its ``usage`` counts the prompt's tokens (``prompt_tokens``, one per
        sequence) and the answer's, its stop token included."""
        kept: list[list[int]] = []
        finished: list[bool] = []
        for ids in sequences:
            end = min((ids.index(s) for s in self.stop_ids if s in ids), default=None)
            kept.append(ids[:end] if end is not None else list(ids))
            finished.append(end is not None)
        piece = self._pieces  # shared by the threads that decode: a piece decoded twice is the same text
        unseen = sorted(t for t in {t for ids in kept for t in ids} if t not in piece)
        if unseen:
            piece.update(zip(unseen, decode([[t] for t in unseen], False)))
        distinct_answers = list(dict.fromkeys(map(tuple, kept)))  # k samples often repeat: each decoded once
        text_of = dict(zip(distinct_answers, decode([list(ids) for ids in distinct_answers], True)))
        texts = [text_of[tuple(ids)] for ids in kept]
        return [
            Generation(
                text=text.strip(),
                tokens=[piece[t] for t in ids],
                token_logprobs=lps[: len(ids)] if keep_logprobs else None,  # floats already (tolist)
                finish_reason="stop" if done else "length",
                token_ids=ids,
                usage=token_usage(prompt, len(ids) + done),
            )
            for ids, lps, done, text, prompt in zip(kept, logprobs, finished, texts, prompt_tokens)
        ]

    def _decode(self, sequences: list[list[int]], skip_special_tokens: bool) -> list[str]:
        """``tokenizer.batch_decode``, in one call of the Rust tokenizer where that is the same (:func:`fast_batch_decode`)."""
        if self._batch_decode is not None:
            return self._batch_decode(sequences, skip_special_tokens)
        return self.tokenizer.batch_decode(sequences, skip_special_tokens=skip_special_tokens)
