"""What the verified judge's veto costs: the rules (match for correctness, answer for consistency) against `verified`
on the same queries, side by side, alternating, median of the repeats.

The queries are every labelled item of tests/data/labels (both tasks). Those sheets hold far more positive decisions
than a run (they are drawn stratified by decision), and only positives are embedded for the veto, so the ratio is an
upper bound on what a run pays. The sentence model is loaded once, before timing.

    python benchmarks/bench_verified_judge.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

from elical.annotate.config import AnnotateConfig
from elical.annotate.judge_check import read_pairs
from elical.annotate.judge_factory import judge_maker
from elical.annotate.judge_registry import BOTH, VERIFIED_RULES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=Path, default=Path("tests/data/labels"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    make = judge_maker(AnnotateConfig())
    verified = make("verified")  # loads the sentence model and both vetoes once
    print(f"# bench_verified_judge.py: {platform.node()}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}")
    for task in BOTH:
        queries = [p.query for path in sorted(args.sets.glob(f"*_{task}_*.jsonl")) for p in read_pairs(path)]
        rules = make(VERIFIED_RULES[task])
        seconds: dict[str, list[float]] = {"rules": [], "verified": []}
        for _ in range(args.repeats):
            for name, judge in (("rules", rules), ("verified", verified)):
                start = time.perf_counter()
                decided = judge.judge_batch(queries)
                seconds[name].append(time.perf_counter() - start)
            positives = sum(decided)
        rule_s, verified_s = (statistics.median(seconds[k]) for k in ("rules", "verified"))
        print(f"{task}: {len(queries)} queries, {positives} positive after the veto; {rules.name} {rule_s:.2f} s, "
              f"verified {verified_s:.2f} s (median of {args.repeats}, alternating): {verified_s / rule_s:.2f}x")


if __name__ == "__main__":
    main()
