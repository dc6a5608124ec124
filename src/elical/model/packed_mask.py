"""The attention mask of packed rows, built on the device from their position ids.

A packed row holds several prompts back to back, its position ids restarting at each (see
:mod:`elical.train.batching`). Given no mask, transformers finds the prompts itself, and to know whether a
row is packed at all it reads a flag back from the GPU on every forward: a host sync that drains the
queue before each micro-batch, leaving the GPU idle while the CPU launches the next one's first kernels
(3-5 ms per micro-batch on the 7B, and all of a short last micro-batch's launches:
``benchmarks/results/profile_train_7b_flex_h200.txt``). Built here, the mask costs no sync:

- ``sdpa``: a boolean (rows, 1, length, length) mask, causal inside each prompt, as transformers builds it;
- ``flex_attention``: the same as a FlexAttention block mask;
- any other attention, or a sliding window shorter than the row: None (transformers' own path).
"""

from __future__ import annotations

from typing import Any

import torch


def segment_ids(position_ids: torch.Tensor) -> torch.Tensor:
    """Each token's prompt within its row: a new prompt wherever the position does not follow the one
    before (transformers' rule, so a padding run whose positions restart is a segment of its own)."""
    starts = torch.ones_like(position_ids, dtype=torch.bool)
    starts[:, 1:] = position_ids[:, 1:] != position_ids[:, :-1] + 1
    return starts.cumsum(-1)


def sliding_window(config: Any) -> int | None:
    """The attention window of a backbone config (None: every layer attends to the whole row)."""
    window = getattr(config, "sliding_window", None)
    slides = "sliding_attention" in (getattr(config, "layer_types", None) or ()) or getattr(config, "use_sliding_window", True)
    return window if window and slides else None


def packed_attention_mask(position_ids: torch.Tensor, config: Any) -> Any:
    """The mask that keeps attention causal inside each packed prompt, for the backbone's attention
    implementation (see the module docstring); None where transformers should build it."""
    rows, length = position_ids.shape
    implementation = getattr(config, "_attn_implementation", None)
    window = sliding_window(config)
    if implementation not in ("sdpa", "flex_attention") or (window is not None and window < length):
        return None
    segments = segment_ids(position_ids)
    if implementation == "sdpa":
        causal = torch.ones(length, length, dtype=torch.bool, device=position_ids.device).tril()
        return ((segments[:, :, None] == segments[:, None, :]) & causal)[:, None]
    from torch.nn.attention.flex_attention import create_block_mask  # flex_attention

    def same_prompt(batch: torch.Tensor, head: torch.Tensor, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        return (segments[batch, query] == segments[batch, key]) & (query >= key)

    return create_block_mask(same_prompt, rows, None, length, length, device=position_ids.device,
                             _compile=position_ids.device.type == "cuda")
