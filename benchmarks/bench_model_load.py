"""Loading a .gguf model: from the file each time (ELICAL_CACHE_DIR=off) against from the folder it was converted
into once (elical.model.gguf_cache), alternating rounds, each load in a fresh process (imports not timed). Prints
the seconds of each load, their medians and ratio, and the machine.

    python benchmarks/bench_model_load.py [--model smollm2] [--rounds 3] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ONE_LOAD = """
import json, sys, time
import torch
from elical.model.loading import load_model
start = time.perf_counter()
model, tokenizer, _ = load_model(sys.argv[1], dtype="float32", device="cpu")
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "weights": float(sum(p.double().sum() for p in model.parameters()))}))
"""


def load(model: str, cache: str) -> dict:
    """One load in a fresh process with ELICAL_CACHE_DIR=cache: seconds and a checksum of the weights."""
    env = {**os.environ, "ELICAL_CACHE_DIR": cache}
    done = subprocess.run([sys.executable, "-c", ONE_LOAD, model], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cache", default=None, help="the cache folder (default: a new temporary one)")
    args = parser.parse_args()
    cache = args.cache or tempfile.mkdtemp(prefix="elical-cache-")
    import torch

    print(f"machine: {platform.machine()} | {os.cpu_count()} CPUs | torch {torch.__version__} | python "
          f"{platform.python_version()} | load average {os.getloadavg()[0]:.2f}", flush=True)
    start = time.perf_counter()
    first = load(args.model, cache)
    print(f"first load with the cache (converts): {first['seconds']:.1f} s in the loader, "
          f"{time.perf_counter() - start:.1f} s with the process", flush=True)
    times: dict[str, list[float]] = {"file": [], "folder": []}
    sums = set()
    for round_ in range(1, args.rounds + 1):
        for name, where in (("file", "off"), ("folder", cache)):
            got = load(args.model, where)
            times[name].append(got["seconds"])
            sums.add(got["weights"])
            print(f"round {round_} | {name} | {got['seconds']:.2f} s", flush=True)
    file_s, folder_s = statistics.median(times["file"]), statistics.median(times["folder"])
    print(f"median: from the file {file_s:.2f} s, from the folder {folder_s:.2f} s: {file_s / folder_s:.1f}x; "
          f"weights' checksum the same in every load: {len(sums) == 1}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
