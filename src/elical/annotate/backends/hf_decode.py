"""elical's own decoding loop for the HF backend (``fast_decode``), for small models whose decoding
step a GPU finishes faster than Python launches it.

``generate`` spends a small model's decoding step on the host (per-step mask building, logits
processors, stopping checks) and, with grouped-query attention, on copying every key and value once per
query head that shares it (a masked ``sdpa`` call cannot share them; on an H100 these copies were 55 %
of SmolLM2's step at k=20). This loop keeps every tensor of a step at a fixed shape and address: the
prompt's keys and values are held once for its k samples (:class:`SharedPrefix`), the generated ones per
row in a preallocated :class:`SlotCache`, the masks are additive and updated in place, attention reads
each key and value head once per prompt or row (:func:`prefix_attention`), and sampling is sync-free
(top-k, then top-p inside the k candidates, then an exponential race instead of ``multinomial``). On
CUDA one step is captured once as a CUDA graph and then replayed, so a step costs one launch.

Decisions are those of ``generate`` with the same settings: greedy takes the argmax of the raw logits,
sampling draws from the same top-k / top-p distribution (not the same draws: the random numbers are
used differently), and token log-probs are the raw next-token log-softmax. Models whose attention is plain
scaled dot-product (``sdpa`` or ``eager``: no sliding window, no logit soft-capping) are supported.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

SUPPORTED_ATTENTION = ("sdpa", "eager")
FAST_DEVICES = ("cuda", "cpu")  # where auto decodes with this loop: measured faster than generate there
STOP_CHECK_EVERY = 8  # decoding steps between checks whether every row has stopped, on a GPU (one host sync each);
# a CPU has no sync to save and checks after every step (the default run's world answers stop after 2 tokens of 8)
ATTENTION_NAME = "elical_prefix"


@dataclass
class SharedPrefix:
    """The prompts' keys and values, once per prompt (each prompt continues in ``n`` consecutive rows),
    and their additive mask (batch, 1, 1, slots): left padding and unused slots blocked."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    mask: torch.Tensor
    n: int


def _per_prompt(x: torch.Tensor, n: int) -> torch.Tensor:
    """(rows, kv_heads, group, k) -> (prompts, kv_heads, n * group, k): the n rows of a prompt side by side."""
    rows, kv_heads, group, k = x.shape
    return x.view(rows // n, n, kv_heads, group, k).transpose(1, 2).reshape(rows // n, kv_heads, n * group, k)


def _per_row(x: torch.Tensor, n: int) -> torch.Tensor:
    """The inverse of :func:`_per_prompt`."""
    prompts, kv_heads, wide, k = x.shape
    return x.view(prompts, kv_heads, n, wide // n, k).transpose(1, 2).reshape(prompts * n, kv_heads, wide // n, k)


def prefix_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                     elical_prefix: SharedPrefix | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """One decoding step's attention (a transformers attention function) over the prompt's keys and
    values, stored once per prompt (``elical_prefix``), and the row's own generated ones (``key``,
    ``value``: (rows, kv_heads, slots, dim), ``attention_mask`` additive (rows, 1, 1, slots)). The query
    heads that share a key/value head read it together, so nothing is repeated per query head or per
    sample. ``query`` (rows, heads, 1, dim); returns (rows, 1, heads, dim) like transformers' own."""
    if elical_prefix is None:
        raise ValueError("prefix_attention runs inside elical's decoding loop, which passes elical_prefix")
    rows, heads, _, dim = query.shape
    kv_heads, n, layer = key.shape[1], elical_prefix.n, module.layer_idx
    scale = dim ** -0.5 if scaling is None else scaling
    grouped = query.view(rows, kv_heads, heads // kv_heads, dim)  # query head i reads kv head i // group
    prefix_keys, prefix_values = elical_prefix.keys[layer], elical_prefix.values[layer]
    shared = torch.matmul(_per_prompt(grouped, n), prefix_keys.transpose(-1, -2)) * scale + elical_prefix.mask
    own = torch.matmul(grouped, key.transpose(-1, -2)) * scale
    if attention_mask is not None:
        own = own + attention_mask[:, :, 0, None, :]
    probs = torch.softmax(torch.cat([_per_row(shared, n), own], dim=-1).float(), dim=-1).to(value.dtype)
    prefix_slots = prefix_keys.shape[2]
    out = _per_row(torch.matmul(_per_prompt(probs[..., :prefix_slots], n), prefix_values), n) \
        + torch.matmul(probs[..., prefix_slots:], value)
    return out.reshape(rows, 1, heads, dim), None


def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, prefix_attention)


@contextmanager
def _attention(config: Any, name: str) -> Iterator[None]:
    """The model's attention function set to ``name`` for the duration (a captured graph keeps the kernels)."""
    before = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = before


def unsupported(model: Any) -> str | None:
    """Why this loop would decode ``model`` differently from ``generate`` (None: it decodes it alike): an
    attention function that reads no 4D mask, sliding-window layers, soft-capped attention logits."""
    attention = getattr(model.config, "_attn_implementation", None)
    if attention not in SUPPORTED_ATTENTION:
        return (f"fast_decode passes a 4D attention mask, which attention '{attention}' does not read "
                f"(load the model with attn_implementation in {SUPPORTED_ATTENTION})")
    if "sliding_attention" in (getattr(model.config, "layer_types", None) or []):
        return "fast_decode keeps one full-attention mask, and this model has sliding-window layers"
    if getattr(model.config, "attn_logit_softcapping", None):
        return "fast_decode's attention does not soft-cap logits, and this model does"
    return None


def check_supported(model: Any) -> None:
    """Raise ValueError where this loop would decode differently from ``generate`` (:func:`unsupported`)."""
    if (reason := unsupported(model)) is not None:
        raise ValueError(f"{reason}; set fast_decode false (or leave it unset: auto) for this model")


def auto_fast_decode(model: Any, repetition_penalty: float = 1.0, device: str | None = None) -> tuple[bool, str]:
    """Whether ``fast_decode: auto`` decodes ``model`` with this loop, and why: where the model is on a CUDA
    device or a CPU (``device``: its type, by default ``model.device``'s), decodes alike (:func:`unsupported`) and
    no repetition penalty is asked; elsewhere ``generate``."""
    device = device or model.device.type
    if (reason := unmeasured(device)) is not None:
        return False, reason
    return decodes_alike(model, repetition_penalty, f"the model is on {device}")


def unmeasured(device: str) -> str | None:
    """Why auto leaves a model on a device of type ``device`` to ``generate``; None on one of :data:`FAST_DEVICES`."""
    if device in FAST_DEVICES:
        return None
    return f"the model is on {device}, where fast_decode is not measured (it is on {' and '.join(FAST_DEVICES)})"


def decodes_alike(model: Any, repetition_penalty: float, where: str) -> tuple[bool, str]:
    """Whether this loop decodes ``model`` as ``generate`` does with this repetition penalty, wherever it runs (a
    device of :data:`FAST_DEVICES`), and why; ``where`` begins the reason given when it does."""
    if repetition_penalty != 1.0:
        return False, f"repetition_penalty {repetition_penalty}, which fast_decode does not apply"
    if (reason := unsupported(model)) is not None:
        return False, reason
    attention = getattr(model.config, "_attn_implementation", None)
    return True, f"{where} with {attention} attention, which fast_decode decodes as generate does"


class SlotCache:
    """Preallocated keys and values of every layer, written at slot ``slot`` (a device tensor, so a
    replayed step writes where the loop has got to). It has the one method the model's attention calls."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], slot: torch.Tensor) -> None:
        self.keys, self.values, self.slot = keys, values, slot

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        self.keys[layer_idx].index_copy_(2, self.slot, key_states)
        self.values[layer_idx].index_copy_(2, self.slot, value_states)
        return self.keys[layer_idx], self.values[layer_idx]


@dataclass(frozen=True)
class Sampler:
    """Chooses each row's next token from raw logits and returns it with its raw log-prob."""

    do_sample: bool
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __call__(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows' tokens and raw log-probs. The logits stay in the model's dtype: the log-softmax computes
        in float32 as it reads them, and the candidates are ranked on them as on a float32 copy (the
        conversion is exact and keeps the order); only the candidates' probabilities are float32 tensors.
        Vocabulary-wide float32 copies were most of the sampler's memory traffic (SmolLM2, k=20, 4,080 rows)."""
        logprobs = torch.log_softmax(logits, dim=-1, dtype=torch.float32)
        token = self._draw(logits) if self.do_sample else logits.argmax(dim=-1)
        return token, logprobs.gather(1, token[:, None]).squeeze(1)

    def _draw(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.top_k and self.top_p >= 1.0:  # plain sampling: no candidates to rank
            return self._race(torch.softmax(logits.float() / self.temperature, dim=-1))
        if self.top_k:
            values, index = logits.topk(min(self.top_k, logits.shape[-1]), dim=-1)
        else:
            values, index = logits.sort(dim=-1, descending=True)
        probs = torch.softmax(values.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:  # keep a candidate while the mass ranked above it is below top_p
            probs = torch.where(probs.cumsum(-1) - probs < self.top_p, probs, torch.zeros_like(probs))
        return index.gather(1, self._race(probs)[:, None]).squeeze(1)

    @staticmethod
    def _race(probs: torch.Tensor) -> torch.Tensor:
        """Each row's draw from ``probs`` (unnormalised is fine): the argmax of p / E, E ~ Exp(1), is i
        with probability p_i, without the host sync of ``multinomial``."""
        return (probs / torch.empty_like(probs).exponential_(1.0)).argmax(dim=-1)


class Decoder:
    """Decoding buffers for ``prompts`` prompts of up to ``prefix_slots`` tokens, each continued in ``n``
    rows for up to ``max_new`` tokens, reused batch after batch (on CUDA with the step captured once as
    a CUDA graph). The prompts' keys and values are held once per prompt (:class:`SharedPrefix`), the
    generated ones per row (:class:`SlotCache`)."""

    def __init__(self, model: Any, cache_kwarg: str, prompts: int, n: int, prefix_slots: int, max_new: int,
                 sampler: Sampler, stop_ids: list[int], layout: list[tuple[int, int, int]]) -> None:
        device, dtype = model.device, model.dtype
        rows = prompts * n
        self.model, self.cache_kwarg, self.sampler = model, cache_kwarg, sampler
        self.prefix_slots, self.max_new = prefix_slots, max_new
        self.pass_cache_position = "cache_position" in inspect.signature(model.forward).parameters
        self.ids = torch.zeros(rows, 1, dtype=torch.long, device=device)
        self.positions = torch.zeros(rows, 1, dtype=torch.long, device=device)
        self.slot = torch.zeros(1, dtype=torch.long, device=device)
        self.step_index = torch.zeros(1, dtype=torch.long, device=device)
        self.mask = torch.zeros(rows, 1, 1, max_new, dtype=dtype, device=device)
        self.tokens = torch.zeros(rows, max_new, dtype=torch.long, device=device)
        self.logprobs = torch.zeros(rows, max_new, dtype=torch.float32, device=device)
        self.finished = torch.zeros(rows, dtype=torch.bool, device=device)
        self.stops = torch.tensor(stop_ids, dtype=torch.long, device=device)

        def buffers(batch: int, slots: int, which: int) -> list[torch.Tensor]:
            return [torch.zeros(batch, shape[0], slots, shape[which], dtype=dtype, device=device) for shape in layout]

        self.cache = SlotCache(buffers(rows, max_new, 1), buffers(rows, max_new, 2), self.slot)
        self.prefix = SharedPrefix(buffers(prompts, prefix_slots, 1), buffers(prompts, prefix_slots, 2),
                                   torch.zeros(prompts, 1, 1, prefix_slots, dtype=dtype, device=device), n)
        self.blocked = torch.finfo(dtype).min
        _register()
        self.graph = self._capture() if device.type == "cuda" else None

    def _step(self) -> None:
        """One token for every row: attend to the prompt and the filled slots, choose, record, advance."""
        self.mask.index_fill_(-1, self.slot, 0.0)
        extra = {"cache_position": self.slot} if self.pass_cache_position else {}
        with _attention(self.model.config, ATTENTION_NAME):
            out = self.model(input_ids=self.ids, position_ids=self.positions, attention_mask=self.mask,
                             use_cache=True, logits_to_keep=1, elical_prefix=self.prefix,
                             **{self.cache_kwarg: self.cache}, **extra)
        token, logprob = self.sampler(out.logits[:, -1])
        self._record(token, logprob)
        self.positions.add_(1)
        self.slot.add_(1)

    def _record(self, token: torch.Tensor, logprob: torch.Tensor) -> None:
        self.tokens.index_copy_(1, self.step_index, token[:, None])
        self.logprobs.index_copy_(1, self.step_index, logprob[:, None])
        self.ids.copy_(token[:, None])
        self.finished |= (token[:, None] == self.stops).any(dim=-1)
        self.step_index.add_(1)

    def _capture(self) -> torch.cuda.CUDAGraph:
        """Run the step twice on a side stream (allocator and kernels warm), then capture it; the
        buffers are reloaded before each batch, so what these runs wrote does not matter."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.inference_mode(), torch.cuda.stream(stream):
            for _ in range(2):
                self.slot.zero_()
                self.step_index.zero_()
                self._step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # thread_local: the pipelined annotation's judging thread may use the GPU (the answer judge's embeddings)
        # on its own stream meanwhile; only this thread's calls are checked during the capture
        with torch.inference_mode(), torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self._step()
        return graph

    def run(self, prefill: Any, prompt_mask: torch.Tensor, first_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Decode after a prefill: ``prefill`` holds the prompts' keys and values (a transformers cache
        with ``.layers``), ``prompt_mask`` their left-padded mask and ``first_logits`` the last prompt
        position's logits. Returns tokens and log-probs (rows, steps), the n rows of a prompt together."""
        n, prompt_length = self.prefix.n, prompt_mask.shape[1]
        for index, layer in enumerate(prefill.layers):
            self.prefix.keys[index][:, :, :prompt_length].copy_(layer.keys)
            self.prefix.values[index][:, :, :prompt_length].copy_(layer.values)
        self.prefix.mask.fill_(self.blocked)
        self.prefix.mask[:, 0, 0, :prompt_length].masked_fill_(prompt_mask.bool(), 0.0)
        self.mask.fill_(self.blocked)
        self.positions.copy_(prompt_mask.sum(dim=-1, keepdim=True).repeat_interleave(n, dim=0))
        self.slot.zero_()
        self.step_index.zero_()
        self.finished.zero_()
        self._record(*self.sampler(first_logits.repeat_interleave(n, dim=0)))
        steps = 1
        while steps < self.max_new and not self._all_stopped(steps):
            self.graph.replay() if self.graph is not None else self._step()
            steps += 1
        return self.tokens[:, :steps], self.logprobs[:, :steps]

    def _all_stopped(self, steps: int) -> bool:
        """Whether every row has stopped: asked after each step without a CUDA graph (on a CPU it costs no sync), every
        :data:`STOP_CHECK_EVERY` steps with one (each ask waits for the GPU)."""
        every = STOP_CHECK_EVERY if self.graph is not None else 1
        return steps % every == 0 and bool(self.finished.all())
