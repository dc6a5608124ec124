"""How many labels two labellings of the same generations disagree on (e.g. before and after a judge's
version bump): greedy correctness and sample consistency, per file and dataset, with the share labelled
positive under each and the Consis self-consistency targets' mean absolute change.

    python benchmarks/labels_diff.py OLD_DIR NEW_DIR      # each holds {train,eval}.parquet (labels_relabel.py's output)
                                                          # or an `elical annotate` folder's records.parquet
"""

from __future__ import annotations

import argparse
import platform
from collections import defaultdict
from pathlib import Path

from elical.records import read_parquet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    args = parser.parse_args()
    print(f"# {args.old} vs {args.new} ({platform.node()})")
    print("| file | dataset | questions | greedy correct old | new | flips | consistent samples old | new | flips | mean abs change of Consis |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in sorted(path.stem for path in args.old.glob("*.parquet")):
        old = {r.id: r for r in read_parquet(args.old / f"{name}.parquet") if not r.failed}
        new = {r.id: r for r in read_parquet(args.new / f"{name}.parquet") if not r.failed}
        groups: dict[str, list[tuple]] = defaultdict(list)
        for rid, a in old.items():
            b = new[rid]
            groups[a.dataset].append((a, b))
            groups["ALL"].append((a, b))
        for dataset in sorted(groups, key=lambda d: (d == "ALL", d)):
            pairs = groups[dataset]
            correct = [(a.greedy_correct, b.greedy_correct) for a, b in pairs]
            samples = [(x, y) for a, b in pairs for x, y in zip(a.sample_consistent or [], b.sample_consistent or [])]
            consis = [abs(sum(a.sample_consistent or []) - sum(b.sample_consistent or [])) / max(1, len(a.samples))
                      for a, b in pairs]
            print(f"| {name} | {dataset} | {len(pairs)} | {sum(x for x, _ in correct)} | {sum(y for _, y in correct)} "
                  f"| {sum(x != y for x, y in correct)} | {sum(x for x, _ in samples)} | {sum(y for _, y in samples)} "
                  f"| {sum(x != y for x, y in samples)} | {sum(consis) / len(consis):.4f} |")


if __name__ == "__main__":
    main()
