"""Import cost of elical's entry points: wall seconds (median of N alternating runs) and whether torch
gets loaded, for this checkout's code and, with --base SRC_DIR, another copy of the package side by side
(e.g. `git archive <rev> src | tar -x -C /tmp/base`, then --base /tmp/base/src).

    python benchmarks/bench_imports.py [--base /tmp/base/src] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS = {
    "import elical": "import elical",
    "import elical.run.config": "import elical.run.config",
    "import elical.cli": "import elical.cli",
    "elical --help": ("import sys; sys.argv = ['elical', '--help']; from elical.cli import app\n"
                      "try:\n    app()\nexcept SystemExit:\n    pass"),
}
HEAVY = ("torch", "transformers", "peft", "sklearn", "matplotlib", "pandas")


def timed(src: Path, code: str) -> tuple[float, list[str]]:
    """Wall seconds of a fresh interpreter running ``code`` with ``src`` first on the path, and the heavy
    packages it loaded."""
    probe = f"{code}\nimport sys; print('LOADED', *[m for m in {HEAVY!r} if m in sys.modules])"
    env = {**os.environ, "PYTHONPATH": str(src)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    loaded = next(line.split()[1:] for line in done.stdout.splitlines() if line.startswith("LOADED"))
    return seconds, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    trees = {"this checkout": Path(__file__).resolve().parents[1] / "src"}
    if args.base:
        trees = {"base": args.base, **trees}
    print(f"# {platform.node()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
          f"median of {args.runs} alternating runs")
    for label, code in TARGETS.items():
        times: dict[str, list[float]] = {name: [] for name in trees}
        loaded: dict[str, list[str]] = {}
        for _ in range(args.runs):
            for name, src in trees.items():
                seconds, loaded[name] = timed(src, code)
                times[name].append(seconds)
        cells = "; ".join(f"{name}: {statistics.median(t):.2f} s, heavy loaded: {' '.join(loaded[name]) or 'none'}"
                          for name, t in times.items())
        print(f"{label:28s} {cells}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
