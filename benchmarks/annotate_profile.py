"""Summarise a py-spy profile of `elical annotate` (benchmarks/annotate_profile_gpu.sh writes one with
``--format raw --threads``): per thread, the seconds under a function, split by what it calls next.

    python benchmarks/annotate_profile.py profile.txt                      # every thread's top functions
    python benchmarks/annotate_profile.py profile.txt --under HFBackend._generate_batch --depth 1
    python benchmarks/annotate_profile.py profile.txt --under Behind._work --thread ThreadPoolExecutor

Seconds are samples / ``--rate`` (py-spy's, 100 by default). A thread waiting on the GPU or the GIL is
sampled where it waits, so read the figures as wall time in that frame, not as CPU time.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path


def stacks(path: Path) -> list[tuple[str, list[str], int]]:
    """(thread, frames outermost first, samples) of each line of a raw py-spy profile."""
    out = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        out.append((frames[0], frames[1:], int(count)))
    return out


def name(frame: str) -> str:
    """``Class.method`` of a frame ``Class.method (file.py:line)``."""
    return frame.split(" (")[0]


def threads(rows: list[tuple[str, list[str], int]], rate: float, top: int) -> None:
    """Each thread's samples and the functions with the most seconds under them."""
    total: Counter[str] = Counter()
    under: dict[str, Counter[str]] = defaultdict(Counter)
    for thread, frames, count in rows:
        total[thread] += count
        for function in {name(f) for f in frames}:
            under[thread][function] += count
    for thread, count in total.most_common():
        if count / rate < 1:
            continue
        print(f"\n== {thread}: {count / rate:.1f} s")
        for function, n in under[thread].most_common(top):
            print(f"  {n / rate:7.1f} s  {function}")


def below(rows: list[tuple[str, list[str], int]], root: str, depth: int, thread: str, rate: float, top: int) -> None:
    """Seconds under ``root`` (in threads whose name holds ``thread``), by the next ``depth`` frames (with lines)."""
    parts: Counter[str] = Counter()
    for name_, frames, count in rows:
        if thread not in name_:
            continue
        index = next((i for i, f in enumerate(frames) if name(f) == root), None)
        if index is None:
            continue
        calls = [f"{name(f)}@{f.rsplit(':', 1)[-1].rstrip(')')}" for f in frames[index + 1 : index + 1 + depth]]
        parts[";".join(calls) or "(itself)"] += count
    print(f"{root}: {sum(parts.values()) / rate:.1f} s")
    for part, n in parts.most_common(top):
        print(f"  {n / rate:7.1f} s  {part}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", type=Path)
    parser.add_argument("--under", help="a function (Class.method): the seconds below it, by what it calls")
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--thread", default="MainThread", help="with --under: threads whose name holds this")
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    rows = stacks(args.profile)
    if args.under:
        below(rows, args.under, args.depth, args.thread, args.rate, args.top)
    else:
        threads(rows, args.rate, args.top)


if __name__ == "__main__":
    main()
