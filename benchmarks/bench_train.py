"""Throughput of confidence-model training and prediction: elical's packed path vs the authors' recipe.

Builds the Qwen2.5-7B architecture from its config with random bf16 weights (``--size 7b``, GPU),
SmolLM2-135M's Llama architecture (``--size smollm2``) or a tiny Qwen2 (``--size tiny``, CPU), LoRA r=8 on all linear layers + last-token head, and times, in the
same run and on the same questions (lengths uniform in [30, 80] tokens):

* ``authors``: an HF-Trainer-like loop: batches of 16 in file order padded to their longest (no length
  grouping), gradient accumulation 8, grad-norm clipping, AdamW, linear schedule;
* ``packed``: elical's trainer step (``elical.train.loop._train_step``): padding-free packed rows,
  token-budget micro-batches, LoRA update fused into one GEMM, no float32 copies of adapted inputs;
  ``packed+compile``: the same with each decoder layer compiled;
* ``predict``: elical's prediction path (LoRA merged, packed, inference mode) and a padded batch-16 one.

Model FLOPs: 4*N*T for training, 2*N*T for prediction (N non-embedding parameters, T real tokens).
Under ``accelerate launch`` the packed training variant runs data-parallel (DDP) and reports both the
total and the per-GPU rate. The machine and a table of figures are printed last.
"""

from __future__ import annotations

import argparse
import math
import platform
import random
import time
from types import SimpleNamespace

import torch

PEAK_TFLOPS = 790.0  # dense bf16 peak measured on the H100/H200 cards (gpu.md)

QWEN25_7B = {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
             "intermediate_size": 18944, "vocab_size": 152064, "max_position_embeddings": 32768,
             "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": False}
SMOLLM2_135M = {"hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
                "intermediate_size": 1536, "vocab_size": 49152, "max_position_embeddings": 8192,
                "rope_theta": 100000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True}
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 512, "tie_word_embeddings": False}


def architecture(size: str):
    """(transformers config class, its arguments) of a benchmark size."""
    from transformers import LlamaConfig, Qwen2Config

    return {"7b": (Qwen2Config, QWEN25_7B), "smollm2": (LlamaConfig, SMOLLM2_135M), "tiny": (Qwen2Config, TINY)}[size]


def build_model(size: str, device: torch.device, attn: str):
    """Random-weight Qwen2 classifier (bf16 on GPU) wrapped as a ConfidenceModel with fresh LoRA + head."""
    from transformers import AutoModelForSequenceClassification

    from elical.model import ConfidenceModel, ModelConfig

    config_class, spec = architecture(size)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    config = config_class(**spec, num_labels=1, pad_token_id=spec["vocab_size"] - 1)
    torch.manual_seed(0)
    with torch.device(device):
        classifier = AutoModelForSequenceClassification.from_config(config, dtype=dtype,
                                                                    attn_implementation=attn)
    tokenizer = SimpleNamespace(pad_token_id=spec["vocab_size"] - 1, eos_token=None)
    model = ConfidenceModel.from_backbone(classifier, tokenizer, ModelConfig(base_model=f"random-{size}"))
    # Give LoRA B and the head non-zero values so every branch computes for real.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.requires_grad:
                param.normal_(0, 0.01)
    n_non_embedding = sum(p.numel() for n, p in model.transformer.named_parameters() if "embed" not in n)
    return model, n_non_embedding


def make_questions(n: int, lo: int, hi: int, vocab: int, seed: int = 0) -> tuple[list[list[int]], list[float]]:
    """n random token sequences with lengths uniform in [lo, hi], and random targets in [0, 1]."""
    rng = random.Random(seed)
    seqs = [[rng.randrange(vocab - 2) for _ in range(rng.randint(lo, hi))] for _ in range(n)]
    return seqs, [rng.random() for _ in range(n)]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def peft_defaults(model, enabled: bool) -> None:
    """The authors' LoRA: peft's own forward, which casts each adapted input to the float32 adapter
    dtype; elical turns the cast off under autocast and fuses the update into one GEMM."""
    from elical.model import set_fused_lora

    for module in model.modules():
        if hasattr(module, "cast_input_dtype_enabled"):
            module.cast_input_dtype_enabled = enabled if model.autocast_dtype is not None else True
    set_fused_lora(model.net, not enabled and model.config.fused_lora)


def check_packing(model, seqs, device) -> float:
    """Largest confidence difference between packed rows and one padded batch (same questions)."""
    from elical.train.batching import packed_batches, padded_batch

    idx = list(range(min(32, len(seqs))))
    pad = model.tokenizer.pad_token_id
    model.eval()
    with torch.inference_mode():
        padded = torch.sigmoid(model(**padded_batch(seqs, idx, pad).to(device).model_inputs()))
        packed = torch.zeros_like(padded)
        for batch in packed_batches(seqs, idx, pad, 8192, 1024):
            packed[batch.order] = torch.sigmoid(model(**batch.to(device).model_inputs()))
    return float((packed - padded).abs().max())


def run_authors(model, seqs, targets, device, batch: int = 16, accum: int = 8) -> float:
    """HF-Trainer-like epoch: padded batches of 16 in file order, accumulation 8, clip, AdamW, schedule,
    bf16 autocast, peft's default LoRA forward (float32 adapter inputs)."""
    from transformers import get_linear_schedule_with_warmup

    from elical.train.batching import padded_batches
    from elical.train.loop import per_question_loss

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=5e-5, weight_decay=0.1)
    steps = math.ceil(len(seqs) / (batch * accum))
    scheduler = get_linear_schedule_with_warmup(optimizer, math.ceil(0.1 * steps), steps)
    target = torch.tensor(targets, device=device)
    model.train()
    peft_defaults(model, True)
    sync(device)
    start = time.perf_counter()
    for i, mb in enumerate(padded_batches(seqs, list(range(len(seqs))), model.tokenizer.pad_token_id, batch)):
        mb = mb.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = model(**mb.model_inputs())
        loss = per_question_loss(logits, target[mb.order], "mse").mean() / accum
        loss.backward()
        if (i + 1) % accum == 0 or (i + 1) * batch >= len(seqs):
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
    sync(device)
    peft_defaults(model, False)
    return time.perf_counter() - start


def run_packed(wrapped, optimizer, seqs, targets, accelerator, tokens_per_batch: int, batch_size: int = 512) -> float:
    """elical's trainer step over the questions (this process's share under DDP); returns seconds."""
    from elical.train.config import TrainConfig
    from elical.train.loop import StageData, _train_step

    cfg = TrainConfig(model="bench", batch_size=batch_size, tokens_per_batch=tokens_per_batch, row_length=1024)
    pad = accelerator.unwrap_model(wrapped).tokenizer.pad_token_id
    data = StageData(seqs, targets, list(range(len(seqs))), [], pad)
    target = torch.tensor(targets)
    wrapped.train()
    sync(accelerator.device)
    start = time.perf_counter()
    for b in range(0, len(seqs), batch_size):
        batch = list(range(b, min(b + batch_size, len(seqs))))
        loss = _train_step(wrapped, batch, accelerator.process_index, accelerator.num_processes, data, target,
                           cfg, accelerator)
        assert math.isfinite(loss), loss
        accelerator.clip_grad_norm_(wrapped.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    sync(accelerator.device)
    return time.perf_counter() - start


def run_predict(model, seqs, device, packed: bool, tokens_per_batch: int) -> float:
    """Forward-only confidences for all questions: packed (elical) or padded batches of 16."""
    from elical.train.batching import padded_batches
    from elical.train.predict import predict_logits

    sync(device)
    start = time.perf_counter()
    if packed:
        predict_logits(model, seqs, range(len(seqs)), model.tokenizer.pad_token_id, tokens_per_batch, 1024)
    else:
        model.eval()
        with torch.inference_mode():
            for mb in padded_batches(seqs, list(range(len(seqs))), model.tokenizer.pad_token_id, 16):
                model(**mb.to(device).model_inputs())
    sync(device)
    return time.perf_counter() - start


def machine(device: torch.device) -> str:
    import peft
    import transformers

    soft = f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}"
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} x{torch.cuda.device_count()}, {soft}"
    return f"CPU {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, {soft}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=["7b", "smollm2", "tiny"], default=None, help="default: 7b on GPU, tiny on CPU")
    parser.add_argument("--questions", type=int, default=1024)
    parser.add_argument("--min-len", type=int, default=30)
    parser.add_argument("--max-len", type=int, default=80)
    parser.add_argument("--tokens-per-batch", type=int, nargs="+", default=[8192])
    parser.add_argument("--batch-size", type=int, nargs="+", default=[512],
                        help="questions per optimizer step (the paper's effective batch: 512)")
    parser.add_argument("--predict-tokens", type=int, default=32768)
    parser.add_argument("--variants", nargs="+", default=["authors", "packed", "compile", "predict"])
    parser.add_argument("--attn", default="sdpa")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes after one warm-up (best kept)")
    parser.add_argument("--time-budget", type=float, default=420.0, help="seconds after which variants are skipped")
    args = parser.parse_args()

    from accelerate import Accelerator

    from elical.train.loop import _optimizer

    started = time.perf_counter()
    accelerator = Accelerator()
    device = accelerator.device
    size = args.size or ("7b" if device.type == "cuda" else "tiny")
    model, n_params = build_model(size, device, args.attn)
    vocab = architecture(size)[1]["vocab_size"]
    seqs, targets = make_questions(args.questions, args.min_len, args.max_len, vocab)
    real_tokens = sum(map(len, seqs))
    world = accelerator.num_processes
    rows: list[tuple[str, float, float, str]] = []
    if world == 1:
        accelerator.print(f"packed vs padded confidences, max |diff| over 32 questions: "
                          f"{check_packing(model, seqs, device):.2e}", flush=True)

    def record(name: str, seconds: float, flops_per_token: float, note: str = "") -> None:
        if device.type == "cuda":
            note = f"{note}; peak mem {torch.cuda.max_memory_allocated(device) / 2**30:.0f} GiB".lstrip("; ")
        qps = len(seqs) / seconds
        tflops = flops_per_token * real_tokens / seconds / 1e12
        rows.append((name, qps / world, tflops / world, note))
        accelerator.print(f"{name}: {seconds:.2f} s, {qps:.1f} q/s total, {qps / world:.1f} q/s per GPU, "
                          f"{tflops / world:.1f} TFLOP/s per GPU", flush=True)

    def best_of(fn) -> float:
        fn()  # warm-up (allocator, autotuning, compilation)
        return min(fn() for _ in range(args.repeats))

    def guarded(name: str, fn) -> float | None:
        if time.perf_counter() - started > args.time_budget:
            accelerator.print(f"{name}: skipped (time budget of {args.time_budget:.0f} s spent)")
            rows.append((name, float("nan"), float("nan"), "skipped: time budget"))
            return None
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        try:
            return best_of(fn)
        except torch.OutOfMemoryError:
            model.zero_grad(set_to_none=True)
            accelerator.print(f"{name}: out of memory")
            rows.append((name, float("nan"), float("nan"), "OOM"))
        except Exception as err:  # noqa: BLE001 - a failed variant (e.g. compilation) must not hide the others' figures
            model.zero_grad(set_to_none=True)
            accelerator.print(f"{name}: failed: {type(err).__name__}: {str(err)[:500]}")
            rows.append((name, float("nan"), float("nan"), f"failed: {type(err).__name__}"))
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
        return None

    train_flops = 4 * n_params
    if "authors" in args.variants and world == 1:
        seconds = guarded("authors-like b16", lambda: run_authors(model, seqs, targets, device))
        if seconds:
            record("authors-like b16", seconds, train_flops, "pad to longest of 16, accum 8")
    optimizer = _optimizer(model, 5e-5, 0.1)
    wrapped, optimizer = accelerator.prepare(model, optimizer)
    for tokens in args.tokens_per_batch:
        for bs in args.batch_size:
            if "packed" in args.variants:
                seconds = guarded(f"packed {tokens} b{bs}", lambda t=tokens, b=bs: run_packed(
                    wrapped, optimizer, seqs, targets, accelerator, t, b))
                if seconds:
                    record(f"elical packed {tokens} tok b{bs}", seconds, train_flops, f"{world} process(es)")
    if "predict" in args.variants and world == 1:
        base = accelerator.unwrap_model(wrapped)
        peft_defaults(base, True)
        seconds = guarded("authors-like predict b16", lambda: run_predict(base, seqs, device, False, 0))
        peft_defaults(base, False)
        if seconds:
            record("authors-like predict b16", seconds, 2 * n_params, "padded, LoRA unmerged (peft default)")
        base.merge_adapter()
        seconds = guarded("predict packed", lambda: run_predict(base, seqs, device, True, args.predict_tokens))
        if seconds:
            record(f"elical predict packed {args.predict_tokens}", seconds, 2 * n_params, "LoRA merged")
        base.net.unmerge_adapter()

    if "compile" in args.variants:
        model.compile_layers()
        for tokens in args.tokens_per_batch:
            for bs in args.batch_size:
                seconds = guarded(f"compile {tokens} b{bs}", lambda t=tokens, b=bs: run_packed(
                    wrapped, optimizer, seqs, targets, accelerator, t, b))
                if seconds:
                    record(f"elical packed+compile {tokens} b{bs}", seconds, train_flops, "decoder layers compiled")
        if "predict" in args.variants and world == 1:
            base = accelerator.unwrap_model(wrapped)
            base.merge_adapter()
            seconds = guarded("predict compiled", lambda: run_predict(base, seqs, device, True, args.predict_tokens))
            if seconds:
                record(f"elical predict packed+compile {args.predict_tokens}", seconds, 2 * n_params, "LoRA merged")
            base.net.unmerge_adapter()
    if accelerator.is_main_process:
        def baseline(predict: bool) -> float | None:
            return next((r[1] for r in rows if r[0].startswith("authors") and ("predict" in r[0]) == predict
                         and not math.isnan(r[1])), None)

        print(f"\nmachine: {machine(device)}; processes: {world}; model: {size} ({n_params / 1e9:.2f}B "
              f"non-embedding params), {len(seqs)} questions of {args.min_len}-{args.max_len} tokens "
              f"({real_tokens} real tokens); peak {PEAK_TFLOPS:.0f} TFLOP/s")
        print("| variant | q/s per GPU | TFLOP/s per GPU | % of peak | x authors | note |")
        print("|---|---|---|---|---|---|")
        for name, qps, tflops, note in rows:
            authors = baseline("predict" in name)
            ratio = f"{qps / authors:.2f}" if authors and not math.isnan(qps) else ""
            print(f"| {name} | {qps:.1f} | {tflops:.1f} | {100 * tflops / PEAK_TFLOPS:.1f} | {ratio} | {note} |")


if __name__ == "__main__":
    main()
