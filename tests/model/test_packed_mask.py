"""The attention mask of packed rows (elical.model.packed_mask): prompts found from the position ids, the same
mask transformers builds, without its host sync, and transformers' own path where a window is short."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from elical.model.packed_mask import packed_attention_mask, segment_ids, sliding_window

POSITIONS = torch.tensor([[0, 1, 2, 0, 1, 0, 0, 1], [0, 1, 2, 3, 0, 1, 2, 0]])


def expected_mask(positions: torch.Tensor) -> torch.Tensor:
    """Token i attends to token j of its row: j <= i and no restart of the positions between them."""
    rows, length = positions.shape
    mask = torch.zeros(rows, 1, length, length, dtype=torch.bool)
    for b in range(rows):
        for i in range(length):
            j = i
            while j >= 0:
                mask[b, 0, i, j] = True
                if j == 0 or positions[b, j] != positions[b, j - 1] + 1:
                    break
                j -= 1
    return mask


def test_segments_start_where_the_positions_restart():
    assert segment_ids(POSITIONS).tolist() == [[1, 1, 1, 2, 2, 3, 4, 4], [1, 1, 1, 1, 2, 2, 2, 3]]


def test_sdpa_mask_is_causal_inside_each_prompt():
    config = SimpleNamespace(_attn_implementation="sdpa")
    assert torch.equal(packed_attention_mask(POSITIONS, config), expected_mask(POSITIONS))


def test_flex_block_mask_keeps_the_same_pairs():
    pytest.importorskip("torch.nn.attention.flex_attention")
    config = SimpleNamespace(_attn_implementation="flex_attention")
    block = packed_attention_mask(POSITIONS, config)
    rows, length = POSITIONS.shape
    b, q, k = torch.meshgrid(torch.arange(rows), torch.arange(length), torch.arange(length), indexing="ij")
    allowed = block.mask_mod(b, torch.zeros_like(b), q, k)
    assert torch.equal(allowed[:, None], expected_mask(POSITIONS))


@pytest.mark.parametrize("config, expected", [
    (SimpleNamespace(sliding_window=4, use_sliding_window=False), None),  # Qwen2 with its window off
    (SimpleNamespace(sliding_window=4), 4),  # Mistral: on when set
    (SimpleNamespace(sliding_window=4, layer_types=["full_attention", "sliding_attention"]), 4),
    (SimpleNamespace(sliding_window=None), None),
])
def test_sliding_window_of_a_config(config, expected):
    assert sliding_window(config) == expected


def test_other_attention_and_short_windows_are_left_to_transformers():
    assert packed_attention_mask(POSITIONS, SimpleNamespace(_attn_implementation="eager")) is None
    assert packed_attention_mask(POSITIONS, SimpleNamespace(_attn_implementation="sdpa", sliding_window=4)) is None
    assert packed_attention_mask(POSITIONS, SimpleNamespace(_attn_implementation="sdpa", sliding_window=8)) is not None
