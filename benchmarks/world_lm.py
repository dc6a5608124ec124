"""Pretrain world LMs (`elical world train-lm`'s function) and print time, accuracy by exposure and the machine.

CPU, small:   python benchmarks/world_lm.py --out /tmp/wlm --steps 200 --hidden 64 --layers 2
GPU, full:    PYTHONPATH=src python benchmarks/world_lm.py --out $OUT/wlm --variant h192 --variant h256
Each variant is trained in turn and saved under OUT/<variant>; a summary table is printed last.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from elical.world.config import LMConfig, WorldConfig, load_world_configs
from elical.world.generate import generate_world
from elical.world.lm import generate_replies, gold_text, load_world_lm, train_world_lm
from elical.world.questions import evaluation_questions

VARIANTS = {
    "h128": {"hidden_size": 128, "num_layers": 4, "num_heads": 4, "num_kv_heads": 2, "intermediate_size": 384},
    "h192": {"hidden_size": 192, "num_layers": 4, "num_heads": 4, "num_kv_heads": 2, "intermediate_size": 512},
    "h256": {"hidden_size": 256, "num_layers": 4, "num_heads": 4, "num_kv_heads": 2, "intermediate_size": 688},
    # two layers: the confidence model's LoRA training costs scale with depth on a CPU
    "h128l2": {"hidden_size": 128, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2, "intermediate_size": 384},
    "h256l2": {"hidden_size": 256, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2, "intermediate_size": 768},
}


def machine() -> str:
    """CPU/GPU description for the printed figures."""
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    return f"{platform.node()} {platform.processor() or platform.machine()} x{__import__('os').cpu_count()}, {gpu}, torch {torch.__version__}"


def consistency_probe(path: Path, n: int = 800, k: int = 20) -> dict:
    """Self-consistency (k samples vs greedy, exact match) against greedy correctness on in-domain test
    questions: its AUROC, and accuracy / consistency on contested and on other facts."""
    import random

    import numpy as np
    import torch
    from sklearn.metrics import roc_auc_score

    model, tok, meta = load_world_lm(path)
    if torch.cuda.is_available():
        model = model.cuda()
    world = generate_world(WorldConfig(**meta["world"]))
    lm = LMConfig(**meta["lm"])
    qs = [q for q in evaluation_questions(world) if q.info["group"] == "in-domain" and q.split == "test"]
    qs = random.Random(0).sample(qs, min(n, len(qs)))
    replies = generate_replies(model, tok, qs, lm, k=k, batch_size=2048)
    correct = np.array([r[0] == gold_text(tok, q) for r, q in zip(replies, qs)], dtype=float)
    consistency = np.array([np.mean([s == r[0] for s in r[1:]]) for r in replies])
    contested = np.array([q.info["contested"] for q in qs])
    out = {"n": len(qs), "accuracy": round(correct.mean(), 3),
           "auroc_consistency": round(roc_auc_score(correct, consistency), 3) if 0 < correct.sum() < len(qs) else None}
    for name, mask in (("contested", contested), ("other", ~contested)):
        out[f"{name}_acc"] = round(correct[mask].mean(), 3) if mask.any() else None
        out[f"{name}_consistency"] = round(consistency[mask].mean(), 3) if mask.any() else None
    for lo, hi in ((0, 0), (1, 1), (2, 3), (4, 7), (8, 99)):
        mask = np.array([lo <= q.info["mentions"] <= hi for q in qs]) & ~contested
        if mask.any():
            out[f"m{lo}-{hi}"] = f"acc {correct[mask].mean():.2f} cons {consistency[mask].mean():.2f} n {int(mask.sum())}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--variant", action="append", default=None, help=f"one of {sorted(VARIANTS)} (repeatable)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--hidden", type=int, default=None)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--people", type=int, default=None)
    parser.add_argument("--probe-every", type=int, default=1000)
    parser.add_argument("--probe-only", action="store_true", help="only run the consistency probe on OUT/<variant>")
    parser.add_argument("--tag", default="", help="suffix of the output folder name (several runs of one variant)")
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--time-limit", type=float, default=None, help="stop training (and save) after this many s")
    parser.add_argument("--config", default=None, help="YAML with world:/lm: sections (as `elical world train-lm`)")
    args = parser.parse_args()
    print("machine:", machine())
    rows = []
    for name in args.variant or ["h192"]:
        world_base, lm_base = load_world_configs(args.config)
        lm_kwargs = {**lm_base.model_dump(), **VARIANTS[name]}
        if args.hidden:
            lm_kwargs.update(hidden_size=args.hidden, intermediate_size=2 * args.hidden)
        if args.layers:
            lm_kwargs.update(num_layers=args.layers)
        if args.steps:
            lm_kwargs.update(steps=args.steps, warmup_steps=min(200, args.steps // 10))
        if args.lr:
            lm_kwargs.update(lr=args.lr)
        folder = Path(args.out) / (name + args.tag)
        world = WorldConfig(**{**world_base.model_dump(), **({"n_people": args.people} if args.people else {})})
        start = time.time()
        final = {} if args.probe_only else train_world_lm(world, LMConfig(**lm_kwargs), folder,
                                                          probe_every=args.probe_every, time_limit=args.time_limit)
        seconds = round(time.time() - start, 1)
        probe = consistency_probe(folder)
        rows.append({"variant": name + args.tag, "train_seconds": seconds, **final, **probe})
        print(json.dumps(rows[-1]), flush=True)
    print("machine:", machine())
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
