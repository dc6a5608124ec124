"""Attention over packed rows of short prompts, forward + backward, by implementation, side by side.

The 7B trainer packs prompts of 30-80 tokens into rows (``elical.train.batching``); attention must stay
inside each prompt. Compared on one micro-batch of Qwen2.5-7B's attention shape (28 query heads, 4
key/value heads, head dim 128), causal inside each prompt:

* ``sdpa``: a dense (rows, 1, len, len) boolean mask, block-diagonal (what the ``sdpa`` backbone uses);
* ``flex``: FlexAttention with a block mask built from the prompts' ids (``flex_attention``), compiled;
* ``varlen``: ``torch.nn.attention.varlen.varlen_attn`` (FlashAttention's variable-length kernel) over
  the cumulative prompt lengths: no mask, no work outside the prompts.

Prints each one's median time over ``--repeats`` alternating rounds, its ratio to ``flex``, the largest
difference of its output from ``sdpa``'s, and the machine. GPU only.

    python benchmarks/bench_attention.py [--tokens 16384] [--row-length 1024]
"""

from __future__ import annotations

import argparse
import inspect
import random
import statistics
import time

import torch
import torch.nn.functional as F


def prompt_lengths(tokens: int, row_length: int, lo: int, hi: int, seed: int = 0) -> list[list[int]]:
    """Rows of prompt lengths (uniform in [lo, hi]) packed first-fit to ``row_length``, the last prompt of a
    row padded by one more segment to the row's end (as the trainer pads)."""
    rng = random.Random(seed)
    rows: list[list[int]] = []
    for _ in range(tokens // row_length):
        row: list[int] = []
        while sum(row) + hi <= row_length:
            row.append(rng.randint(lo, hi))
        if sum(row) < row_length:
            row.append(row_length - sum(row))
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--row-length", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iters", type=int, default=10, help="forward + backward passes per timing")
    args = parser.parse_args()
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    from torch.nn.attention.varlen import varlen_attn

    device, dtype = torch.device("cuda"), torch.bfloat16
    heads, kv_heads, dim = 28, 4, 128
    rows = prompt_lengths(args.tokens, args.row_length, 30, 80)
    n_rows, length = len(rows), args.row_length
    ids = torch.tensor([i for row in rows for i, n in enumerate(row) for _ in range(n)], device=device).view(n_rows, length)
    flat = [n for row in rows for n in row]
    cu = torch.tensor([0, *torch.tensor(flat).cumsum(0).tolist()], device=device, dtype=torch.int32)
    longest = max(flat)
    q = torch.randn(n_rows, heads, length, dim, device=device, dtype=dtype, requires_grad=True)
    k = torch.randn(n_rows, kv_heads, length, dim, device=device, dtype=dtype, requires_grad=True)
    v = torch.randn(n_rows, kv_heads, length, dim, device=device, dtype=dtype, requires_grad=True)
    grad = torch.randn(n_rows, heads, length, dim, device=device, dtype=dtype)
    causal = torch.tril(torch.ones(length, length, dtype=torch.bool, device=device))
    dense = (ids[:, :, None] == ids[:, None, :]) & causal  # (rows, len, len)

    def same_prompt(b, h, qi, ki):
        return (ids[b, qi] == ids[b, ki]) & (qi >= ki)

    block = create_block_mask(same_prompt, n_rows, None, length, length, device=device)
    flex = torch.compile(flex_attention)
    params = inspect.signature(varlen_attn).parameters
    causal_kw = {"window_size": (-1, 0)} if "window_size" in params else {"is_causal": True}
    gqa_kw = {"enable_gqa": True} if "enable_gqa" in params else {}
    print(f"varlen_attn parameters: {list(params)}")

    def run_sdpa():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=dense[:, None], enable_gqa=True)

    def run_flex():
        return flex(q, k, v, block_mask=block, enable_gqa=True)

    def run_varlen():
        def packed(t):
            return t.transpose(1, 2).reshape(n_rows * length, t.shape[1], dim)
        kk, vv = packed(k), packed(v)
        if repeat_kv:  # a varlen_attn without grouped-query support: one key/value head per query head
            kk, vv = kk.repeat_interleave(heads // kv_heads, 1), vv.repeat_interleave(heads // kv_heads, 1)
        out = varlen_attn(packed(q), kk, vv, cu, cu, longest, longest, **causal_kw, **gqa_kw)
        return out.view(n_rows, length, heads, dim).transpose(1, 2)

    repeat_kv = False
    try:
        run_varlen()
    except (RuntimeError, ValueError) as error:
        print(f"varlen_attn with {kv_heads} key/value heads for {heads} query heads: {error}; repeating them")
        repeat_kv = True
    runs = {"sdpa": run_sdpa, "flex": run_flex, "varlen": run_varlen}
    reference = run_sdpa().detach().float()
    error = {name: (run().detach().float() - reference).abs().max().item() for name, run in runs.items()}

    def timed(run) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.iters):
            run().backward(grad)
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / args.iters

    for run in runs.values():
        timed(run)  # warm-up, compilation
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            seconds[name].append(timed(run))
    flex_s = statistics.median(seconds["flex"])
    print(f"{args.tokens} tokens in {n_rows} rows of {length}, {len(flat)} segments (prompts 30-80 tokens), "
          f"heads {heads}/{kv_heads}, dim {dim}, bf16; forward + backward, median of {args.repeats} rounds x {args.iters}")
    print("| attention | ms per forward + backward | x flex | max abs diff from sdpa |\n|---|---|---|---|")
    for name in runs:
        ms = statistics.median(seconds[name]) * 1000
        print(f"| {name} | {ms:.3f} | {flex_s * 1000 / ms:.2f} | {error[name]:.2e} |")
    print(f"machine: {torch.cuda.get_device_name()}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
