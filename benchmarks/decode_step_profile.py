"""Issue 24: where a fast_decode batch spends the GPU's time. One batch of an annotation (greedy answers, then
k samples of the same prompts) through elical's loop, after a warm-up batch, under torch.profiler: the CUDA
kernels with the most time, the batch's wall and CUDA time; then the sampler alone on logits of the batch's
shape. SmolLM2 on the GPU machine (benchmarks/decode_step_profile_gpu.sh); on a CPU it runs at a small size.

    python benchmarks/decode_step_profile.py --model /tmp/w/smollm2-hf --data /tmp/w/data/qa --rows 4096 --k 20
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def prompts(data: Path, count: int) -> list:
    from elical.annotate.prompts import PromptConfig, qa_prompt
    from elical.data.loaders import load_items

    files = sorted(data.glob("*.jsonl")) if data.is_dir() else [data]
    items = [item for path in files for item in load_items(str(path))[: -(-count // len(files))]]
    return [qa_prompt(item, PromptConfig()) for item in items[:count]]


class StageTimer:
    """Seconds per backend stage (the GPU synchronized at each stage's end): the methods named in STAGES
    wrapped on ``backend`` and on the Decoder class while the timer is on."""

    STAGES = ("_batch", "_prefill", "_to_generations")

    def __init__(self, backend) -> None:
        from elical.annotate.backends import hf_decode

        self.seconds: dict[str, float] = {}
        self.patches = [(backend, name, getattr(backend, name)) for name in self.STAGES]
        self.patches.append((hf_decode.Decoder, "run", hf_decode.Decoder.run))
        self.patches.append((hf_decode.Decoder, "__init__", hf_decode.Decoder.__init__))

    def __enter__(self) -> "StageTimer":
        for owner, name, real in self.patches:
            setattr(owner, name, self._timed(f"{getattr(owner, '__name__', 'backend')}.{name}", real))
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, real in self.patches:
            setattr(owner, name, real)

    def _timed(self, label: str, real):
        def timed(*args, **kwargs):
            sync()
            start = time.perf_counter()
            out = real(*args, **kwargs)
            sync()
            self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - start
            return out
        return timed


def one_batch(backend, batch: list, k: int, max_new: int) -> None:
    from elical.annotate.backends.base import GenerationSettings

    backend.generate(batch, GenerationSettings(max_new_tokens=max_new))
    backend.generate(batch, GenerationSettings(do_sample=True, n=k, max_new_tokens=max_new))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=4096, help="sequences per call (annotate.batch_size)")
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()

    from elical.annotate.backends.hf import HFBackend
    from elical.annotate.backends.hf_decode import Sampler

    device = "cuda" if torch.cuda.is_available() else "cpu"
    backend = HFBackend.from_pretrained(args.model, dtype="bfloat16" if device == "cuda" else "float32", device=device,
                                        batch_size=args.rows, fast_decode=True)
    per_batch = args.rows // args.k
    batches = prompts(args.data, 3 * per_batch)
    first, second = batches[:per_batch], batches[per_batch : 2 * per_batch]
    print(f"machine: {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'} | torch {torch.__version__} | "
          f"{per_batch} prompts x (1 greedy + {args.k} samples), {args.max_new_tokens} new tokens")
    one_batch(backend, second, args.k, args.max_new_tokens)  # warm-up: graphs captured, allocator warm
    one_batch(backend, first, args.k, args.max_new_tokens)  # (and the next batch's prompts not the last call's)
    sync()
    start = time.perf_counter()
    one_batch(backend, second, args.k, args.max_new_tokens)
    sync()
    print(f"batch wall (no profiler): {time.perf_counter() - start:.3f} s")
    one_batch(backend, first, args.k, args.max_new_tokens)
    with StageTimer(backend) as timer:
        start = time.perf_counter()
        one_batch(backend, second, args.k, args.max_new_tokens)
        wall = time.perf_counter() - start
    print(f"batch wall with a sync after each stage: {wall:.3f} s; stages: "
          + ", ".join(f"{name} {seconds:.3f} s" for name, seconds in timer.seconds.items()))

    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        one_batch(backend, batches[2 * per_batch :], args.k, args.max_new_tokens)
        sync()
    key = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    events = prof.key_averages()
    device_total = sum(getattr(e, "self_device_time_total", 0) for e in events) / 1e6
    print(f"profiled batch: device time {device_total:.3f} s (kernels summed)")
    print(events.table(sort_by=key.replace("cuda", "self_cuda") if device == "cuda" else "self_cpu_time_total",
                       row_limit=args.top, max_name_column_width=70))
    if device == "cuda":  # the host's side: which calls hold the CPU (a sync shows as a long CPU time)
        print(events.table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=70))

    rows = per_batch * args.k
    logits = torch.randn(rows, backend.model.config.vocab_size, device=device, dtype=backend.model.dtype) * 4
    for sampler in (Sampler(True, 1.0, 50, 0.95), Sampler(False)):
        for _ in range(3):
            sampler(logits)
        sync()
        start = time.perf_counter()
        for _ in range(20):
            sampler(logits)
        sync()
        print(f"sampler {'sample' if sampler.do_sample else 'greedy'} on ({rows}, {logits.shape[1]}): "
              f"{(time.perf_counter() - start) / 20 * 1e3:.2f} ms per step")


if __name__ == "__main__":
    main()
