"""Turning tokenized prompts into model batches: padding-free packed rows (default) or padded batches.

Packed rows hold several prompts back to back; ``position_ids`` restart at 0 for each prompt, which is
how Hugging Face models recognise packed sequences (``attention_mask=None``): attention stays inside
each prompt (block-diagonal causal mask for sdpa/eager, varlen for flash-attention). The tail of a row
is padding that forms its own segment and is never pooled. Every batch records the flat position of
each prompt's last real token, so pooling never reads a pad (reference.md 7.1).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

TAIL_ROUND = 64  # a trimmed last batch's row length is a multiple of this (a few shapes for compiled layers)


@dataclass
class Batch:
    """Model inputs for a group of questions; ``order[i]`` is the question pooled at ``pool_index[i]``."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    pool_index: torch.Tensor
    order: list[int]
    real_tokens: int  # tokens that belong to a question (what model FLOPs are counted on)
    attention_mask: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> Batch:
        """The same batch on another device."""
        def move(t: torch.Tensor) -> torch.Tensor:
            return t.to(device, non_blocking=True)

        mask = None if self.attention_mask is None else move(self.attention_mask)
        return Batch(move(self.input_ids), move(self.position_ids), move(self.pool_index), self.order,
                     self.real_tokens, mask)

    def model_inputs(self) -> dict[str, torch.Tensor | None]:
        """Keyword arguments for ConfidenceModel.forward."""
        return {"input_ids": self.input_ids, "position_ids": self.position_ids,
                "pool_index": self.pool_index, "attention_mask": self.attention_mask}


def tokenize_prompts(tokenizer, prompts: Sequence[str], max_length: int) -> tuple[list[list[int]], int]:
    """Token ids of each prompt (no extra special tokens: the chat template has them).

    Prompts longer than ``max_length`` keep their last ``max_length`` tokens (the end of the prompt,
    where the answer would start, is what the head reads); returns (ids, number truncated).
    """
    encoded = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    truncated = sum(len(ids) > max_length for ids in encoded)
    return [ids[-max_length:] for ids in encoded], truncated


def pack_rows(lengths: Sequence[int], row_length: int) -> list[list[int]]:
    """First-fit-decreasing assignment of sequences (by index) to rows of ``row_length`` tokens."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    rows: list[list[int]] = []
    space: list[int] = []
    for i in order:
        need = lengths[i]
        for r, free in enumerate(space):
            if free >= need:
                rows[r].append(i)
                space[r] -= need
                break
        else:
            rows.append([i])
            space.append(row_length - need)
    return rows


def packed_batches(
    seqs: Sequence[Sequence[int]],
    indices: Sequence[int],
    pad_id: int,
    tokens_per_batch: int,
    row_length: int = 1024,
    trim_tail: bool = True,
) -> list[Batch]:
    """Pack the sequences ``seqs[i] for i in indices`` into batches of rows of ``row_length`` tokens.

    A batch holds ``max(1, tokens_per_batch // row_length)`` rows; ``row_length`` grows to the longest
    sequence if needed. With ``trim_tail``, the rows packing leaves at most half full (the last one or
    few) form a last batch of their own, cut to their longest rounded up to ``TAIL_ROUND`` tokens, so
    the padding of a whole last row is not computed (static shapes need ``trim_tail=False``).
    """
    if not indices:
        return []
    lengths = [len(seqs[i]) for i in indices]
    row_length = max(row_length, max(lengths))
    rows = pack_rows(lengths, row_length)
    used = [sum(lengths[i] for i in row) for row in rows]
    in_tail = [trim_tail and 2 * u <= row_length for u in used]
    full = [r for r, t in zip(rows, in_tail) if not t]
    rows_per_batch = max(1, tokens_per_batch // row_length)
    batches = [_packed(seqs, indices, full[start:start + rows_per_batch], row_length, pad_id)
               for start in range(0, len(full), rows_per_batch)]
    if any(in_tail):
        longest = max(u for u, t in zip(used, in_tail) if t)
        tail = [r for r, t in zip(rows, in_tail) if t]
        batches.append(_packed(seqs, indices, tail, min(row_length, -(-longest // TAIL_ROUND) * TAIL_ROUND), pad_id))
    return batches


def _packed(seqs: Sequence[Sequence[int]], indices: Sequence[int], group: list[list[int]], row_length: int,
            pad_id: int) -> Batch:
    """One batch of packed rows (each a list of positions in ``indices``) of ``row_length`` tokens.
    Built as flat lists and made tensors once: it runs on the host between a step's micro-batches."""
    ids: list[int] = []
    pos: list[int] = []
    pool, order, real = [], [], 0
    for r, row in enumerate(group):
        for local in row:
            seq = seqs[indices[local]]
            ids.extend(seq)
            pos.extend(range(len(seq)))
            pool.append(len(ids) - 1)
            order.append(indices[local])
            real += len(seq)
        pad = (r + 1) * row_length - len(ids)
        ids.extend([pad_id] * pad)
        pos.extend(range(pad))  # tail padding: its own segment
    shape = (len(group), row_length)
    return Batch(torch.tensor(ids, dtype=torch.long).view(shape), torch.tensor(pos, dtype=torch.long).view(shape),
                 torch.tensor(pool, dtype=torch.long), order, real)


def pad_batch(batch: Batch, rows: int, questions: int, pad_id: int) -> Batch:
    """A packed ``batch`` grown to ``rows`` rows and ``questions`` pooled positions, so that micro-batches
    share static shapes (what CUDA graphs replay). Added rows are padding in one segment of their own;
    added pooled positions read position 0 and their logits are dropped (``order`` lists the real
    questions, which come first), so the loss and its gradients are those of ``batch``."""
    have, length = batch.input_ids.shape
    n = len(batch.order)
    if batch.attention_mask is not None or rows < have or questions < n:
        raise ValueError(f"cannot pad a batch of {have} rows and {n} questions to {rows} rows and {questions} "
                         "questions (packed batches only)")
    extra = rows - have
    ids = torch.cat([batch.input_ids, torch.full((extra, length), pad_id, dtype=torch.long)])
    pos = torch.cat([batch.position_ids, torch.arange(length).repeat(extra, 1)])
    pool = torch.cat([batch.pool_index, torch.zeros(questions - n, dtype=torch.long)])
    return Batch(ids, pos, pool, batch.order, batch.real_tokens)


def static_rows(rows: int, most: int) -> int:
    """Rows a packed batch of ``rows`` is padded to: the next power of two, at most ``most`` (so a few
    shapes, each captured once, serve every micro-batch)."""
    return min(max(most, rows), 1 << (rows - 1).bit_length())


def padded_batch(seqs: Sequence[Sequence[int]], indices: Sequence[int], pad_id: int,
                 side: str = "right") -> Batch:
    """One batch padded to its longest sequence, on either side, with matching position ids."""
    if side not in ("left", "right"):
        raise ValueError(f"padding side must be 'left' or 'right', got {side!r}")
    longest = max(len(seqs[i]) for i in indices)
    ids = torch.full((len(indices), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(indices), longest), dtype=torch.long)
    for r, i in enumerate(indices):
        seq = torch.tensor(seqs[i], dtype=torch.long)
        if side == "right":
            ids[r, :len(seq)], mask[r, :len(seq)] = seq, 1
        else:
            ids[r, longest - len(seq):], mask[r, longest - len(seq):] = seq, 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    last = (mask * torch.arange(longest)).argmax(-1)  # last real token, whatever the padding side
    pool = torch.arange(len(indices)) * longest + last
    return Batch(ids, pos, pool, list(indices), int(mask.sum()), mask)


def padded_batches(seqs: Sequence[Sequence[int]], indices: Sequence[int], pad_id: int, batch_size: int,
                   side: str = "right") -> Iterator[Batch]:
    """Consecutive batches of ``batch_size`` questions, each padded to its longest (no length grouping)."""
    for start in range(0, len(indices), batch_size):
        yield padded_batch(seqs, indices[start:start + batch_size], pad_id, side)


def make_batches(seqs: Sequence[Sequence[int]], indices: Sequence[int], pad_id: int, *, packing: bool,
                 tokens_per_batch: int, row_length: int, batch_size: int, trim_tail: bool = True) -> list[Batch]:
    """Packed batches by token budget, or padded batches of ``batch_size`` questions."""
    if packing:
        return packed_batches(seqs, indices, pad_id, tokens_per_batch, row_length, trim_tail)
    return list(padded_batches(seqs, indices, pad_id, batch_size))
