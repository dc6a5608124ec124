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

Speed options of the trainer (issue 15; TrainSettings ``lora_dtype``, ``fused_optimizer``, ``compile_mode``),
each elical's packed step, compared to ``base`` (the packed step as it runs by default, eager):

* ``bf16lora``: bf16 copies of the LoRA weights made once per step (needs a bf16 backbone: GPU);
* ``fused``: AdamW's fused kernel;
* ``compile-layers``: each decoder layer compiled (``compile: true``);
* ``flex-layers``: the same with ``attn_implementation: flex_attention`` (attention only inside each
  packed prompt, by block mask, instead of sdpa's dense block-diagonal mask over a whole row);
  ``flex-detect``: the same with the mask of packed rows left to transformers (``own_packed_mask``
  off: its packed-row detection syncs with the GPU on every forward), as before elical.model.packed_mask;
* ``reduce-overhead``: the whole training forward compiled and replayed as CUDA graphs, micro-batches
  padded to static shapes (GPU only);
* ``all``: bf16lora + fused + reduce-overhead (GPU only).

Model FLOPs: 4*N*T for training, 2*N*T for prediction (N non-embedding parameters, T real tokens).
Under ``accelerate launch`` the packed training variant runs data-parallel (DDP) and reports both the
total and the per-GPU rate.

Each variant is warmed up once (allocator, autotuning, compilation); then ``--repeats`` rounds (default
3) run the authors' recipe and each elical variant in turn, so a drift of the machine (clocks, other
load) touches both sides of every ratio. Every round's time and ratio is printed; the table gives the
median rate and the median of the per-round ratios. The machine and the table are printed last.

CPU (small):  python benchmarks/bench_train.py --size tiny --questions 64
Speed options: python benchmarks/bench_train.py --size smollm2 --batch-size 32 128 --tokens-per-batch 4096 \
                   --variants base,bf16lora,fused,compile-layers,reduce-overhead,all
"""

from __future__ import annotations

import argparse
import math
import platform
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch

SPEED_VARIANTS = ("base", "bf16lora", "fused", "compile-layers", "flex-layers", "flex-detect", "reduce-overhead", "all")
CUDA_ONLY = {"bf16lora": "needs a bf16 backbone (GPU)", "reduce-overhead": "CUDA graphs need a GPU",
             "flex-layers": "FlexAttention's backward runs on CUDA only", "flex-detect": "FlexAttention's backward runs on CUDA only",
             "all": "CUDA graphs need a GPU"}
LAYERED_VARIANTS = ("compile-layers", "flex-layers", "flex-detect")  # the speed variants that run compiled layers
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

    from elical.model.network import ConfidenceModel, ModelConfig

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
    from elical.model.network import set_fused_lora

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


def run_packed(wrapped, optimizer, seqs, targets, accelerator, tokens_per_batch: int, batch_size: int = 512,
               speed=None) -> float:
    """elical's trainer step over the questions (this process's share under DDP), with the speed options
    of ``speed`` (an elical.train.speed.StepSpeed; None: the default step); returns seconds."""
    from elical.train.config import TrainConfig
    from elical.train.loop import StageData, _train_step
    from elical.train.speed import keep_grads

    cfg = TrainConfig(model="bench", batch_size=batch_size, tokens_per_batch=tokens_per_batch, row_length=1024)
    pad = accelerator.unwrap_model(wrapped).tokenizer.pad_token_id
    data = StageData(seqs, targets, list(range(len(seqs))), [], pad)
    target = torch.tensor(targets)
    static = speed is not None and speed.static
    if static:
        keep_grads(wrapped)  # as the trainer does under CUDA graphs
    wrapped.train()
    sync(accelerator.device)
    start = time.perf_counter()
    for b in range(0, len(seqs), batch_size):
        batch = list(range(b, min(b + batch_size, len(seqs))))
        loss = _train_step(wrapped, batch, accelerator.process_index, accelerator.num_processes, data, target,
                           cfg, accelerator, speed)
        assert math.isfinite(loss), loss
        accelerator.clip_grad_norm_(wrapped.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=not static)
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


def compile_switch(model) -> Callable[[bool], None]:
    """Compile the decoder layers once; the returned switch turns the compiled forward on or off, so the
    authors' recipe and the uncompiled variants run plain layers between compiled rounds in one process.
    (``nn.Module.compile`` keeps the compiled forward in ``_compiled_call_impl``; None means eager.)"""
    model.compile_layers()
    layers = [m for m in model.modules() if getattr(m, "_compiled_call_impl", None) is not None]
    compiled = [m._compiled_call_impl for m in layers]

    def switch(on: bool) -> None:
        for layer, forward in zip(layers, compiled):
            layer._compiled_call_impl = forward if on else None

    switch(False)
    return switch


def speed_variant(name: str, wrapped, accelerator, seqs, targets, tokens: int, batch_size: int,
                  layers: Callable[[bool], None]) -> Callable[[], float]:
    """One of SPEED_VARIANTS, set up as the trainer sets it up (elical.train.speed.step_speed) with its own
    optimizer; both are made at its first run (the warm-up, which also compiles)."""
    from elical.train.config import TrainConfig
    from elical.train.loop import _optimizer
    from elical.train.speed import step_speed

    graphs = {"compile": True, "compile_mode": "reduce-overhead"}
    options = {"base": {"compile": False}, "bf16lora": {"compile": False, "lora_dtype": "bf16"},
               "fused": {"compile": False, "fused_optimizer": True}, "compile-layers": {"compile": True},
               "flex-layers": {"compile": True, "attn_implementation": "flex_attention"},
               "flex-detect": {"compile": True, "attn_implementation": "flex_attention"},
               "reduce-overhead": graphs, "all": {**graphs, "lora_dtype": "bf16", "fused_optimizer": True}}[name]
    cfg = TrainConfig(model="bench", **options)
    made: dict = {}

    def go() -> float:
        if not made:
            made["optimizer"] = _optimizer(accelerator.unwrap_model(wrapped), 5e-5, 0.1, cfg.fused_optimizer)
            made["speed"] = step_speed(wrapped, cfg, accelerator)
        layers(name in LAYERED_VARIANTS)
        model = accelerator.unwrap_model(wrapped)
        before = model.transformer.config._attn_implementation
        model.transformer.set_attn_implementation(options.get("attn_implementation", before))
        model.own_packed_mask = name != "flex-detect"
        try:
            return run_packed(wrapped, made["optimizer"], seqs, targets, accelerator, tokens, batch_size, made["speed"])
        finally:
            model.transformer.set_attn_implementation(before)
            model.own_packed_mask = True
    return go


@dataclass
class Variant:
    """One timed way of doing the work; ``seconds`` holds one entry per round; ratios are taken to
    ``reference`` (None: the group's authors' recipe, if any)."""

    name: str
    run: Callable[[], float]
    flops_per_token: float
    note: str
    seconds: list[float] = field(default_factory=list)
    peak_gib: float = 0.0
    failure: str = ""
    reference: Variant | None = None
    warmup_s: float = 0.0


def skip_reason(name: str, device: torch.device, world: int) -> str | None:
    """Why this machine cannot run speed variant ``name`` (None: it can)."""
    if device.type != "cuda" and name in CUDA_ONLY:
        return CUDA_ONLY[name]
    if world > 1 and name in ("bf16lora", "all"):
        return "bf16 LoRA copies train on one process"
    return None


def speed_variants(names: list[str], shapes: list[tuple[int, int]], flops: float, make, device: torch.device,
                   world: int) -> list[Variant]:
    """The SPEED_VARIANTS asked for, per (tokens, batch size), each referred to ``base`` of its shape;
    ``make(name, tokens, batch_size)`` gives a variant's run. Those this machine cannot run are named."""
    for name in names:
        if why := skip_reason(name, device, world):
            print(f"{name}: skipped on this machine ({why})")
    runnable = [name for name in names if not skip_reason(name, device, world)]
    out = []
    for tokens, batch_size in shapes:
        base = None
        for name in runnable:
            variant = Variant(f"{name} {tokens} tok b{batch_size}", make(name, tokens, batch_size), flops,
                              f"{world} process(es)", reference=base)
            base = variant if name == "base" else base
            out.append(variant)
    return out


def run_rounds(group: list[Variant], timed: Callable[[Variant], float | None], repeats: int, deadline: float,
               say: Callable[..., None]) -> None:
    """One warm-up of each variant (compilation, CUDA graph capture: timed apart), then ``repeats`` rounds
    running every variant in turn, none started after ``deadline`` (a perf_counter time)."""
    for variant in group:
        start = time.perf_counter()
        timed(variant)
        variant.warmup_s = time.perf_counter() - start
        say(f"warm-up {variant.name}: {variant.warmup_s:.1f} s", flush=True)
    for round_ in range(1, repeats + 1):
        if time.perf_counter() > deadline:
            say(f"round {round_}: skipped (time budget spent)")
            break
        parts = []
        for variant in (v for v in group if not v.failure):
            seconds = timed(variant)
            if seconds is not None:
                variant.seconds.append(seconds)
                parts.append(f"{variant.name} {seconds:.2f} s")
        say(f"round {round_}: " + " | ".join(parts), flush=True)


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
    parser.add_argument("--variants", nargs="+", default=["authors", "packed", "compile", "predict"],
                        help="authors, packed, compile, predict and the speed options "
                             f"{', '.join(SPEED_VARIANTS)} (spaces or commas between them)")
    parser.add_argument("--attn", default="sdpa")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds after one warm-up; each round runs the authors' recipe and every variant in turn")
    parser.add_argument("--time-budget", type=float, default=420.0, help="seconds after which no new round starts")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    args.variants = [v for arg in args.variants for v in arg.split(",") if v]
    known = {"authors", "packed", "compile", "predict", *SPEED_VARIANTS}
    if unknown := set(args.variants) - known:
        parser.error(f"unknown variant(s) {sorted(unknown)}; expected some of {sorted(known)}")

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
    if world == 1:
        accelerator.print(f"packed vs padded confidences, max |diff| over 32 questions: "
                          f"{check_packing(model, seqs, device):.2e}", flush=True)

    optimizer = _optimizer(model, 5e-5, 0.1)
    wrapped, optimizer = accelerator.prepare(model, optimizer)
    base = accelerator.unwrap_model(wrapped)
    layered = {"compile", *LAYERED_VARIANTS} & set(args.variants)
    compiled = compile_switch(base) if layered else (lambda on: None)
    torch._dynamo.config.recompile_limit = 64  # the whole-model variants: a few static shapes each

    def train(compile_on: bool, tokens: int, bs: int) -> Callable[[], float]:
        def go() -> float:
            compiled(compile_on)
            return run_packed(wrapped, optimizer, seqs, targets, accelerator, tokens, bs)
        return go

    def authors_train() -> float:
        compiled(False)
        return run_authors(base, seqs, targets, device)

    def predict(packed: bool, compile_on: bool) -> Callable[[], float]:
        def go() -> float:
            compiled(compile_on)
            if packed:
                base.merge_adapter()
            else:
                peft_defaults(base, True)
            try:
                return run_predict(base, seqs, device, packed, args.predict_tokens)
            finally:
                base.net.unmerge_adapter() if packed else peft_defaults(base, False)
        return go

    train_flops, predict_flops = 4 * n_params, 2 * n_params
    shapes = [(t, b) for t in args.tokens_per_batch for b in args.batch_size]
    training = [Variant("authors-like b16", authors_train, train_flops, "pad to longest of 16, accum 8")] \
        if "authors" in args.variants and world == 1 else []
    training += [Variant(f"elical packed {t} tok b{b}", train(False, t, b), train_flops, f"{world} process(es)")
                 for t, b in shapes if "packed" in args.variants]
    training += [Variant(f"elical packed+compile {t} b{b}", train(True, t, b), train_flops, "decoder layers compiled")
                 for t, b in shapes if "compile" in args.variants]
    training += speed_variants([v for v in SPEED_VARIANTS if v in args.variants], shapes, train_flops,
                               lambda name, t, b: speed_variant(name, wrapped, accelerator, seqs, targets, t, b,
                                                                compiled), device, world)
    predicting = []
    if "predict" in args.variants and world == 1:
        predicting = [Variant("authors-like predict b16", predict(False, False), predict_flops,
                              "padded, LoRA unmerged (peft default)"),
                      Variant(f"elical predict packed {args.predict_tokens}", predict(True, False), predict_flops,
                              "LoRA merged")]
        if "compile" in args.variants:
            predicting.append(Variant(f"elical predict packed+compile {args.predict_tokens}", predict(True, True),
                                      predict_flops, "LoRA merged"))

    def timed(variant: Variant) -> float | None:
        """One run of a variant; a failure (OOM, compilation) is recorded and the variant dropped."""
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        try:
            seconds = variant.run()
        except Exception as err:  # noqa: BLE001 - a failed variant must not hide the others' figures
            model.zero_grad(set_to_none=True)
            variant.failure = "OOM" if isinstance(err, torch.OutOfMemoryError) else f"failed: {type(err).__name__}"
            accelerator.print(f"{variant.name}: {variant.failure}: {str(err)[:500]}")
            return None
        finally:
            if device.type == "cuda":
                variant.peak_gib = max(variant.peak_gib, torch.cuda.max_memory_allocated(device) / 2**30)
                torch.cuda.empty_cache()
        return seconds

    for group in (g for g in (training, predicting) if g):
        run_rounds(group, timed, args.repeats, started + args.time_budget, accelerator.print)

    if accelerator.is_main_process:
        print(f"\nmachine: {machine(device)}; processes: {world}; model: {size} ({n_params / 1e9:.2f}B "
              f"non-embedding params), {len(seqs)} questions of {args.min_len}-{args.max_len} tokens "
              f"({real_tokens} real tokens); peak {PEAK_TFLOPS:.0f} TFLOP/s; {args.repeats} alternating rounds")
        print_table([training, predicting], len(seqs), real_tokens, world, device)


def print_table(groups: list[list[Variant]], questions: int, real_tokens: int, world: int,
                device: torch.device) -> None:
    """Median rate of every variant and the median of its per-round ratios to its reference (the speed
    options: ``base`` of the same shape; the others: the authors' recipe)."""
    print("| variant | median q/s per GPU | TFLOP/s per GPU | % of peak | median x ref | x ref per round | ref "
          "| warm-up s | note |")
    print("|---|---|---|---|---|---|---|---|---|")
    for group in groups:
        authors = group[0] if group and group[0].name.startswith("authors") else None
        for variant in group:
            if not variant.seconds:
                print(f"| {variant.name} | | | | | | | | {variant.failure or 'not run: time budget'} |")
                continue
            median = statistics.median(variant.seconds)
            qps = questions / median / world
            tflops = variant.flops_per_token * real_tokens / median / 1e12 / world
            ref = variant.reference or authors
            ratios = ([a / v for a, v in zip(ref.seconds, variant.seconds)]
                      if ref is not None and ref.seconds and variant is not ref else [])
            note = variant.note + (f"; peak mem {variant.peak_gib:.0f} GiB" if device.type == "cuda" else "")
            print(f"| {variant.name} | {qps:.1f} | {tflops:.1f} | {100 * tflops / PEAK_TFLOPS:.1f} | "
                  f"{f'{statistics.median(ratios):.2f}' if ratios else ''} | {', '.join(f'{r:.2f}' for r in ratios)} "
                  f"| {ref.name if ratios and ref else ''} | {variant.warmup_s:.0f} | {note} |")


if __name__ == "__main__":
    main()
