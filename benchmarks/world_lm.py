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

from elical.world.config import LMConfig, WorldConfig
from elical.world.lm import train_world_lm

VARIANTS = {
    "h128": dict(hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=384),
    "h192": dict(hidden_size=192, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=512),
    "h256": dict(hidden_size=256, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=688),
}


def machine() -> str:
    """CPU/GPU description for the printed figures."""
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    return f"{platform.node()} {platform.processor() or platform.machine()} x{__import__('os').cpu_count()}, {gpu}, torch {torch.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--variant", action="append", default=None, help=f"one of {sorted(VARIANTS)} (repeatable)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--hidden", type=int, default=None)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--people", type=int, default=None)
    parser.add_argument("--probe-every", type=int, default=1000)
    args = parser.parse_args()
    print("machine:", machine())
    rows = []
    for name in args.variant or ["h192"]:
        lm_kwargs = dict(VARIANTS[name])
        if args.hidden:
            lm_kwargs.update(hidden_size=args.hidden, intermediate_size=2 * args.hidden)
        if args.layers:
            lm_kwargs.update(num_layers=args.layers)
        if args.steps:
            lm_kwargs.update(steps=args.steps, warmup_steps=min(200, args.steps // 10))
        world = WorldConfig(**({"n_people": args.people} if args.people else {}))
        start = time.time()
        final = train_world_lm(world, LMConfig(**lm_kwargs), Path(args.out) / name, probe_every=args.probe_every)
        rows.append({"variant": name, "seconds": round(time.time() - start, 1), **final})
    print("machine:", machine())
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
