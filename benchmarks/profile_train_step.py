"""Where a training step's time goes: torch.profiler over elical's packed trainer step.

Uses bench_train's random-weight architectures (``--size smollm2`` / ``7b`` / ``tiny``) and prints the
operators with the most self CPU time and self device time, then the machine. Use it when
bench_train shows a model far from the card's peak (small models: per-step overhead)."""

from __future__ import annotations

import argparse

from bench_train import architecture, build_model, machine, make_questions, run_packed
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["7b", "smollm2", "tiny"], default="smollm2")
    parser.add_argument("--questions", type=int, default=256, help="profiled questions (one pass)")
    parser.add_argument("--batch-size", type=int, default=32, help="questions per optimizer step")
    parser.add_argument("--tokens-per-batch", type=int, default=4096)
    parser.add_argument("--rows", type=int, default=25, help="operators listed per table")
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

    def one_pass() -> float:
        return run_packed(wrapped, optimizer, seqs, targets, accelerator, args.tokens_per_batch, args.batch_size)

    one_pass()  # warm-up
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        seconds = one_pass()
    steps = -(-args.questions // args.batch_size)
    table = prof.key_averages()
    print(table.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    if device.type == "cuda":
        print(table.table(sort_by="self_cuda_time_total", row_limit=args.rows))
    print(f"{steps} optimizer steps of {args.batch_size} questions in {seconds:.2f} s under the profiler "
          f"({seconds / steps * 1000:.0f} ms per step)")
    print(f"machine: {machine(device)}; model: {args.size}")


if __name__ == "__main__":
    main()
