"""Per-seed in-domain AUROC of Eli-Only and EliCal per label budget, with N-Prob, from the results.csv of
`elical run` folders (issue 23, item 5: EliCal with <= 500 labels >= N-Prob on every seed; EliCal at the
largest budget below all >= 95 % of the all-labels model), one column group per folder.

    python benchmarks/world_stage2_collapse_table.py NAME=RUN_DIR [NAME=RUN_DIR ...] [--group in-domain]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path


def read(folder: Path, group: str) -> dict[tuple[str, str, str], float]:
    """(method, budget, seed) -> AUROC on ``group`` (the mean of its datasets', as the run's report)."""
    out = {}
    with open(folder / "results.csv") as handle:
        for row in csv.DictReader(handle):
            if row["split"] == group and row["metric"] == "auroc":
                out[(row["method"], row["budget"], row["seed"])] = float(row["value"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", help="NAME=RUN_DIR")
    parser.add_argument("--group", default="in-domain")
    parser.add_argument("--small-max", type=int, default=500, help="the largest budget the N-Prob target allows")
    args = parser.parse_args()
    runs = {name: read(Path(path), args.group) for name, path in (r.split("=", 1) for r in args.runs)}
    first = next(iter(runs.values()))
    nprob = first[("N-Prob", "0", "")]
    seeds = sorted({s for (_, _, s) in first if s})
    budgets = sorted({b for (m, b, _) in first if m == "EliCal"}, key=lambda b: (b == "all", int(b) if b.isdigit() else 0))
    print(f"{args.group} AUROC; N-Prob {nprob:.3f}\n")
    print("| method | labels | " + " | ".join(f"{n}: seed {s}" for n in runs for s in seeds) + " | " +
          " | ".join(f"{n}: mean" for n in runs) + " |")
    print("|---|---|" + "---|" * (len(runs) * (len(seeds) + 1)))
    for method, labels in [("Eli-Only", "0"), *[("EliCal", b) for b in budgets]]:
        cells, means = [], []
        for values in runs.values():
            got = [values.get((method, labels, s)) for s in seeds]
            cells += ["—" if v is None else f"{v:.3f}{'*' if v >= nprob and method == 'EliCal' else ''}" for v in got]
            ok = [v for v in got if v is not None]
            means.append(f"{sum(ok) / len(ok):.3f}" if ok else "—")
        print(f"| {method} | {labels} | " + " | ".join(cells) + " | " + " | ".join(means) + " |")
    print("\n(*: >= N-Prob)\n")
    for name, values in runs.items():
        small = [b for b in budgets if b.isdigit() and int(b) <= args.small_max]
        reached = {s: [b for b in small if values.get(("EliCal", b, s), 0) >= nprob] for s in seeds}
        line = ", ".join(f"seed {s}: {'/'.join(r) if r else 'none'}" for s, r in reached.items())
        ratio = ""
        top = budgets[-1]  # the largest budget: all labels
        if small and all(("EliCal", top, s) in values and ("EliCal", small[-1], s) in values for s in seeds):
            ratio = f"; EliCal {small[-1]} / {top} labels: " + ", ".join(
                f"{100 * values[('EliCal', small[-1], s)] / values[('EliCal', top, s)]:.1f} %" for s in seeds)
        print(f"{name}: budgets <= {small[-1] if small else '-'} with EliCal >= N-Prob per seed: {line}{ratio}")


if __name__ == "__main__":
    main()
