"""Latency the confidence pass adds to `elical serve` (issue 13): per model size, in one process on one
device, (a) the confidence pass alone at batch 1 as the server runs it (the question packed into a
1024-token row) and with the row cut to the prompt, (b) the answer's own greedy generation (at most
--max-new-tokens tokens) through the HF backend the server uses, (c) their ratio at p50 (target: at
most 10 %), and (d) /v1/confidence and /v1/chat/completions under C concurrent clients of a real
uvicorn server (micro-batching included), the chat split by the response's ``elical.timing``.

Sizes: ``smollm2`` (the real SmolLM2-135M-Instruct, --smollm2: alias or HF folder), ``7b`` (Qwen2.5-7B's
shapes) and ``8b`` (Llama-3-8B's) with random weights (latency depends on shapes and token counts, not
on weights), ``tiny`` (a 2-layer Llama, for a CPU check). The synthetic sizes use SmolLM2's tokenizer
with their real vocabulary size. Confidence models are untrained (LoRA + head as `elical train` starts).

    python benchmarks/serve_latency.py --sizes tiny --requests 20           # CPU check, < 1 min
    python benchmarks/serve_latency.py --sizes smollm2,7b --requests 50 --concurrency 8,32 --out lat.md
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import platform
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from typing_extensions import Self

# Trivia questions of about 20 tokens (SmolLM2 tokenizer), as a user would ask them.
QUESTIONS = [
    "Which French city hosted the first Winter Olympic Games, held in the year 1924?",
    "Who wrote the novel One Hundred Years of Solitude, first published in Spanish in 1967?",
    "What is the name of the longest river that flows entirely within the United Kingdom?",
    "In which year did the Berlin Wall fall, allowing people to cross between East and West?",
    "Which chemical element has the atomic number 79 and is often used to make jewellery?",
    "Who was the first woman to win a Nobel Prize, and in which field did she win it?",
    "What is the capital city of Australia, chosen as a compromise between Sydney and Melbourne?",
    "Which composer wrote the opera The Magic Flute, first performed in Vienna in 1791?",
    "What is the name of the spacecraft that first landed humans on the Moon in July 1969?",
    "Which planet in our solar system has the largest number of confirmed natural moons today?",
    "Who painted the famous ceiling of the Sistine Chapel in Vatican City in the early 1500s?",
    "Which country has the largest population in Africa according to the most recent census data?",
    "What is the highest mountain in South America, located in the Andes of Argentina?",
    "Who directed the 1994 film Pulp Fiction, which won the Palme d'Or at Cannes that year?",
    "Which scientist proposed the three laws of motion in his book Principia Mathematica in 1687?",
    "What is the official language of Brazil, the largest country by area in South America?",
    "Which football club has won the most European Cup and Champions League titles in history?",
    "In which city was the United Nations founded when its charter was signed in June 1945?",
    "What is the name of the ocean current that carries warm water from the Gulf of Mexico?",
    "Which author created the detective Hercule Poirot, who first appeared in a novel in 1920?",
]

# Synthetic architectures: (transformers config class, sizes); vocab None = the tokenizer's size.
ARCHS: dict[str, tuple[str, dict[str, Any]]] = {
    "tiny": ("LlamaConfig", {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": None}),
    "7b": ("Qwen2Config", {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                           "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
                           "rope_theta": 1_000_000.0}),
    "8b": ("LlamaConfig", {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                           "rope_theta": 500_000.0}),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="smollm2,7b", help="comma-separated: smollm2, 7b, 8b, tiny")
    p.add_argument("--requests", type=int, default=50, help="timed requests per measurement (after warm-up)")
    p.add_argument("--warmup", type=int, default=5, help="untimed requests first")
    p.add_argument("--concurrency", default="8,32", help="comma-separated concurrent clients of the server")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--smollm2", default="smollm2", help="SmolLM2: alias or HF folder (also the tokenizer source)")
    p.add_argument("--device", default="auto")
    p.add_argument("--workdir", type=Path, default=None, help="where model folders go (default: a temp folder)")
    p.add_argument("--out", type=Path, default=None, help="also write the tables as Markdown here")
    args = p.parse_args(argv)
    args.sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in args.sizes if s != "smollm2" and s not in ARCHS]
    if unknown:
        p.error(f"--sizes: unknown size(s) {unknown}; expected some of smollm2, {', '.join(ARCHS)}")
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    return args


def percentiles(values: list[float]) -> tuple[float, float]:
    """(p50, p90)."""
    p50, p90 = np.percentile(values, [50, 90])
    return float(p50), float(p90)


def timed_ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(wall milliseconds, result) of one call; results are host data, so the device has finished."""
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1000, out


def machine() -> str:
    """The device, the library versions and the host."""
    import torch
    import transformers

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({platform.processor() or 'cpu'})"
    return (f"{device}; torch {torch.__version__}, transformers {transformers.__version__}, "
            f"Python {platform.python_version()}, {platform.node()}")


# ---------------------------------------------------------------------------------------- models


def load_tokenizer(spec: str) -> Any:
    """The tokenizer of ``spec`` (alias, folder or .gguf), offline, through elical's model resolution."""
    from transformers import AutoTokenizer

    from elical.model.loading import resolve_model

    source = resolve_model(spec)
    files = {"gguf_file": source.gguf_file} if source.gguf_file else {}
    return AutoTokenizer.from_pretrained(source.path, local_files_only=True, **files)


def synthetic_base(size: str, tokenizer: Any, folder: Path, device: str) -> str:
    """Save a random-weight causal LM of ``size``'s architecture (bf16 on GPU, fp32 on CPU) with
    ``tokenizer`` into ``folder``; its path."""
    import torch
    import transformers

    from elical.model.loading import resolve_dtype

    config_name, sizes = ARCHS[size]
    sizes = {**sizes, "vocab_size": sizes["vocab_size"] or len(tokenizer)}
    config = getattr(transformers, config_name)(
        **sizes, max_position_embeddings=4096, tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=resolve_dtype("auto", device))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model
    return str(folder)


def load_models(size: str, args: argparse.Namespace, workdir: Path) -> tuple[Any, Any]:
    """(confidence model as `elical serve` loads it, the server's HF answerer)."""
    from elical.model.loading import pick_device
    from elical.model.network import ConfidenceModel, ModelConfig
    from elical.serve.generation import Answerer

    device = str(pick_device(args.device))
    base = args.smollm2
    if size != "smollm2":
        tokenizer = load_tokenizer(args.smollm2)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        base = synthetic_base(size, tokenizer, workdir / f"{size}-base", device)
    folder = workdir / f"{size}-confidence"
    ConfidenceModel.create(ModelConfig(base_model=base), device=device).save(folder)
    free_memory()
    model = ConfidenceModel.from_pretrained(folder, device=device)  # LoRA merged: one plain forward pass
    answerer = Answerer.local(base, device, args.max_new_tokens)
    return model, answerer


def free_memory() -> None:
    """Give freed tensors back (between model loads and sizes)."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------- batch 1


def chat(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]


def batch_one(model: Any, answerer: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Confidence pass and answer generation, one request at a time (p50/p90 over --requests)."""
    from elical.model.network import qa_prompt

    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(args.requests)]
    for q in questions[: args.warmup]:
        model.confidence([q])
        model.confidence([q], row_length=1)
        answerer.answer(chat(q), args.max_new_tokens)
    confidence = [timed_ms(lambda q=q: model.confidence([q]))[0] for q in questions]
    # the same pass with its row cut to the prompt (row_length grows to the longest prompt) instead of
    # the default rows of 1024 tokens that the server's scorer packs even a single question into
    cut = [timed_ms(lambda q=q: model.confidence([q], row_length=1))[0] for q in questions]
    generation, tokens = [], []
    for q in questions:
        ms, answer = timed_ms(lambda q=q: answerer.answer(chat(q), args.max_new_tokens))
        generation.append(ms)
        tokens.append(len(answer.token_ids or []))
    per_token = [ms / max(n, 1) for ms, n in zip(generation, tokens)]
    conf_tokens = [len(model.tokenizer(qa_prompt(model.tokenizer, q, model.config), add_special_tokens=False).input_ids)
                   for q in QUESTIONS]
    gen_tokens = [answerer.backend.encode([chat(q)])[0].shape[1] for q in QUESTIONS]
    return {"confidence": percentiles(confidence), "cut": percentiles(cut), "generation": percentiles(generation),
            "per_token": percentiles(per_token), "tokens": float(np.mean(tokens)),
            "prompt_tokens": (float(np.mean(conf_tokens)), float(np.mean(gen_tokens)))}


# ---------------------------------------------------------------------------------------- under load


class ThreadServer:
    """The app under uvicorn on a free local port, in a thread of this process."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the uvicorn server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


async def closed_loop(client: Any, path: str, bodies: list[dict[str, Any]], concurrency: int) -> list[tuple[float, dict]]:
    """``concurrency`` clients each sending the next body as soon as their last answer came back:
    (wall ms, response JSON) per request."""
    pending = iter(bodies)  # shared: one event loop, so each body is taken once
    results: list[tuple[float, dict]] = []

    async def client_loop() -> None:
        for body in pending:
            start = time.perf_counter()
            response = await client.post(path, json=body)
            response.raise_for_status()
            results.append(((time.perf_counter() - start) * 1000, response.json()))

    await asyncio.gather(*(client_loop() for _ in range(concurrency)))
    return results


async def load_rows(url: str, size: str, concurrency: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """/v1/confidence and /v1/chat/completions under ``concurrency`` clients, max(--requests, 2C) requests
    to each after a warm-up."""
    import httpx

    n = max(args.requests, 2 * concurrency)
    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(n)]
    conf_bodies = [{"questions": [q]} for q in questions]
    chat_bodies = [{"messages": chat(q), "max_tokens": args.max_new_tokens} for q in questions]
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    async with httpx.AsyncClient(base_url=url, timeout=1800, limits=limits) as client:
        await closed_loop(client, "/v1/confidence", conf_bodies[:concurrency], concurrency)  # warm-up
        await closed_loop(client, "/v1/chat/completions", chat_bodies[: args.warmup], min(concurrency, args.warmup))
        before = (await client.get("/health")).json()
        wall = [ms for ms, _ in await closed_loop(client, "/v1/confidence", conf_bodies, concurrency)]
        after = (await client.get("/health")).json()
        per_pass = (after["questions_scored"] - before["questions_scored"]) / max(
            after["confidence_passes"] - before["confidence_passes"], 1)
        chats = await closed_loop(client, "/v1/chat/completions", chat_bodies, concurrency)
    timing = [r["elical"]["timing"] for _, r in chats]
    base = {"size": size, "C": concurrency, "requests": n}
    return [{**base, "endpoint": "/v1/confidence", "e2e": percentiles(wall), "per_pass": per_pass},
            {**base, "endpoint": "/v1/chat/completions", "e2e": percentiles([ms for ms, _ in chats]),
             "confidence": percentiles([t["confidence_ms"] for t in timing]),
             "generation": percentiles([t["generation_ms"] for t in timing])}]


def under_load(model: Any, answerer: Any, size: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Rows of :func:`load_rows` for each --concurrency, through one real server over these models."""
    from elical.model.gate import Gate
    from elical.serve.app import ServeOptions, create_app

    gate = Gate(0.0, "--tau", float("nan"), 0)  # tau 0: every request is answered
    app = create_app(model.confidence, answerer, gate, ServeOptions(model_name=size))
    rows: list[dict[str, Any]] = []
    with ThreadServer(app) as server:
        for c in args.concurrency:
            rows += asyncio.run(load_rows(server.url, size, c, args))
    return rows


# ---------------------------------------------------------------------------------------- report


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole > 0 and math.isfinite(part) else "-"


def tables(machine_line: str, single: list[dict[str, Any]], load: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The Markdown report: batch-1 figures per size, then the server under load."""
    lines = [f"Machine: {machine_line}", "",
             (f"Batch 1 ({args.requests} requests after {args.warmup} warm-up; greedy, at most {args.max_new_tokens} "
              "new tokens; ms/token includes the prefill; target: confidence <= 10 % of generation at p50)"), "",
             ("| model | params | prompt tokens conf / gen | confidence p50 / p90 ms (server: 1024-token row) "
              "| confidence p50 / p90 ms (row cut to the prompt) | generation p50 / p90 ms | tokens generated (mean) "
              "| ms/token p50 | confidence / generation p50 (server / cut) | <= 10 % (server) |"),
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in single:
        ratio, gen = r["confidence"][0] / r["generation"][0], r["generation"]
        lines.append(f"| {r['size']} | {r['params'] / 1e9:.2f} B | {r['prompt_tokens'][0]:.0f} / {r['prompt_tokens'][1]:.0f} "
                     f"| {r['confidence'][0]:.1f} / {r['confidence'][1]:.1f} | {r['cut'][0]:.1f} / {r['cut'][1]:.1f} "
                     f"| {gen[0]:.1f} / {gen[1]:.1f} | {r['tokens']:.1f} | {r['per_token'][0]:.2f} "
                     f"| {100 * ratio:.1f} % / {pct(r['cut'][0], gen[0])} | {'yes' if ratio <= 0.10 else 'no'} |")
    lines += ["", ("Server under load (uvicorn in this process; C clients each sending its next request when the "
                   "last returns; chat split by the response's elical.timing: generation includes waiting for the "
                   "model, which answers one request at a time)"), "",
              ("| model | endpoint | C | requests | e2e p50 / p90 ms | confidence p50 ms | generation p50 ms "
               "| confidence / generation p50 | confidence / e2e p50 | questions per pass |"),
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in load:
        if r["endpoint"] == "/v1/confidence":
            lines.append(f"| {r['size']} | {r['endpoint']} | {r['C']} | {r['requests']} | {r['e2e'][0]:.1f} / "
                         f"{r['e2e'][1]:.1f} | | | | | {r['per_pass']:.1f} |")
        else:
            conf, gen, e2e = r["confidence"][0], r["generation"][0], r["e2e"][0]
            lines.append(f"| {r['size']} | {r['endpoint']} | {r['C']} | {r['requests']} | {e2e:.1f} / {r['e2e'][1]:.1f} "
                         f"| {conf:.1f} | {gen:.1f} | {pct(conf, gen)} | {pct(conf, e2e)} | |")
    return "\n".join(lines) + "\n"


def run_size(size: str, args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Batch-1 figures and load rows of one size; its models are freed afterwards."""
    start = time.perf_counter()
    model, answerer = load_models(size, args, workdir)
    print(f"{size}: models ready in {time.perf_counter() - start:.0f} s", flush=True)
    single = {"size": size, "params": sum(p.numel() for p in answerer.backend.model.parameters()),
              **batch_one(model, answerer, args)}
    print(f"{size}: batch 1 {single}", flush=True)
    load = under_load(model, answerer, size, args)
    for row in load:
        print(f"{size}: {row}", flush=True)
    del model, answerer
    free_memory()
    return single, load


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    machine_line = machine()
    print(machine_line, flush=True)
    single, load = [], []
    with tempfile.TemporaryDirectory(prefix="serve-latency-", dir=args.workdir) as tmp:
        for size in args.sizes:
            one, rows = run_size(size, args, Path(tmp))
            single.append(one)
            load += rows
    report = tables(machine_line, single, load, args)
    print("\n" + report)
    if args.out:
        args.out.write_text(report)


if __name__ == "__main__":
    main()
