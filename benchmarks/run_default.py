"""Time `elical run` (default preset unless --config/--preset) end to end and print each step and the machine.

    python benchmarks/run_default.py --out /tmp/run-default            # the full default run
    python benchmarks/run_default.py --out /tmp/r --config small.yaml  # any override

The load average before and after is printed too: on a shared CPU the times scale with the load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time


def machine() -> str:
    """CPU model, core count and load, for the printed figures."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            model = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    return f"{model}, {os.cpu_count()} cores, load average {load[0]:.2f}"


def main() -> None:
    from elical.run.config import load_run_config
    from elical.run.pipeline import run_pipeline

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--preset", default="default")
    parser.add_argument("--config", default=None)
    args = parser.parse_args()
    print("machine before:", machine(), flush=True)
    cfg = load_run_config(args.preset, args.config)
    start = time.perf_counter()
    result = run_pipeline(cfg, args.out, log=lambda m: print(m, flush=True))
    wall = time.perf_counter() - start
    print("machine after:", machine())
    print(json.dumps({"preset": args.preset, "config": args.config, "wall_seconds": round(wall, 1),
                      "steps": result.timings, "cpu_seconds": result.cpu_seconds,
                      "total_cpu_seconds": round(sum(result.cpu_seconds.values()), 1)}, indent=1))


if __name__ == "__main__":
    main()
