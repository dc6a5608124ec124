"""Where a training step's time goes: torch.profiler over elical's packed trainer step.

Uses bench_train's random-weight architectures (``--size smollm2`` / ``7b`` / ``tiny``) and prints the
operators with the most self CPU time and self device time, then the device time by kind of kernel
(GEMMs, attention templates, fused elementwise, copies: what a fused step could still remove) against
the wall time, then the machine. ``--variant`` profiles one of bench_train's speed options (e.g.
``flex-layers``) as the benchmark runs it. Use it when bench_train shows a model far from the card's peak."""

from __future__ import annotations

import argparse
from collections import defaultdict

from bench_train import (
    SPEED_VARIANTS,
    architecture,
    build_model,
    compile_switch,
    machine,
    make_questions,
    run_packed,
    speed_variant,
)
from torch.profiler import ProfilerActivity, profile

# Kernel kinds by name, first match wins (cuBLAS/CUTLASS GEMM kernel names vary by card and version).
KINDS = (
    ("GEMM", ("gemm", "xmma", "cutlass", "nvjet", "wgmma", "s16816", "splitk")),
    ("attention (flex / flash templates)", ("triton_tem", "flash", "fmha", "attention")),
    ("fused elementwise (Triton)", ("triton_",)),
    ("copies and fills", ("memcpy", "memset", "copy", "fill", "cat")),
    ("reductions", ("reduce",)),
)


def kernel_kind(name: str) -> str:
    lowered = name.lower()
    return next((kind for kind, keys in KINDS if any(k in lowered for k in keys)), "other elementwise")


def kernel_time_by_kind(prof) -> dict[str, float]:
    """Seconds of device time per kernel kind (the profiler's rows with self device time are kernels)."""
    totals: dict[str, float] = defaultdict(float)
    for row in prof.key_averages():
        # CPU-side rows (operators, launches) also carry their kernels' time, and "## ..." rows are the
        # device-side spans of compiled regions around their kernels: neither is a kernel
        launched_here = row.self_cpu_time_total > 0 or row.key.startswith("## ")
        if row.self_device_time_total > 0 and not launched_here:
            totals[kernel_kind(row.key)] += row.self_device_time_total / 1e6
    return dict(totals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["7b", "smollm2", "tiny"], default="smollm2")
    parser.add_argument("--questions", type=int, default=256, help="profiled questions (one pass)")
    parser.add_argument("--batch-size", type=int, default=32, help="questions per optimizer step")
    parser.add_argument("--tokens-per-batch", type=int, default=4096)
    parser.add_argument("--variant", choices=SPEED_VARIANTS, default=None,
                        help="one of bench_train's speed options (default: the plain packed step)")
    parser.add_argument("--rows", type=int, default=25, help="operators listed per table")
    parser.add_argument("--trace", default=None, help="also write the profile as a Chrome trace (JSON) to this path")
    parser.add_argument("--shapes", action="store_true",
                        help="also list the operators by input shapes (which GEMM, which copy), by device time")
    args = parser.parse_args()

    from accelerate import Accelerator

    from elical.train.loop import _optimizer

    accelerator = Accelerator()
    device = accelerator.device
    model, _ = build_model(args.size, device, "sdpa")
    vocab = architecture(args.size)[1]["vocab_size"]
    seqs, targets = make_questions(args.questions, 30, 80, vocab)
    optimizer = _optimizer(model, 5e-5, 0.1)
    wrapped, optimizer = accelerator.prepare(model, optimizer)
    if args.variant:
        layers = compile_switch(accelerator.unwrap_model(wrapped))
        one_pass = speed_variant(args.variant, wrapped, accelerator, seqs, targets, args.tokens_per_batch,
                                 args.batch_size, layers)
    else:
        def one_pass() -> float:
            return run_packed(wrapped, optimizer, seqs, targets, accelerator, args.tokens_per_batch, args.batch_size)

    one_pass()  # warm-up (and compilation)
    one_pass()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, record_shapes=args.shapes) as prof:
        seconds = one_pass()
    steps = -(-args.questions // args.batch_size)
    if args.trace:
        prof.export_chrome_trace(args.trace)
    table = prof.key_averages()
    print(table.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    if device.type == "cuda":
        print(table.table(sort_by="self_cuda_time_total", row_limit=args.rows))
        if args.shapes:
            by_shape = prof.key_averages(group_by_input_shape=True)
            print(by_shape.table(sort_by="self_cuda_time_total", row_limit=args.rows, max_name_column_width=30,
                                 max_shapes_column_width=90))
        kinds = kernel_time_by_kind(prof)
        busy = sum(kinds.values())
        print("| kernel kind | device s | % of busy | % of wall |\n|---|---|---|---|")
        for kind, spent in sorted(kinds.items(), key=lambda item: -item[1]):
            print(f"| {kind} | {spent:.3f} | {100 * spent / busy:.1f} | {100 * spent / seconds:.1f} |")
        print(f"| all kernels | {busy:.3f} | 100.0 | {100 * busy / seconds:.1f} |")
    print(f"{steps} optimizer steps of {args.batch_size} questions in {seconds:.2f} s under the profiler "
          f"({seconds / steps * 1000:.0f} ms per step); variant: {args.variant or 'plain packed step'}")
    print(f"machine: {machine(device)}; model: {args.size}")


if __name__ == "__main__":
    main()
