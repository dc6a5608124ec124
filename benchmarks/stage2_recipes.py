"""EliCal's calibration recipes side by side (issue 23): in-domain and out-of-domain AUROC of each train.stage2
recipe per label budget, against Eli-Only, Cal-Only and the best training-free confidence, with stratified
paired bootstrap intervals (questions resampled within each dataset, the same resamples for every model and
seed; a group's AUROC is the mean of its datasets', a method's the mean of its seeds').

The runs are benchmarks/stage2_recipes_gpu.sh's: `full` (the paper's recipe; it also holds Eli-Only, Cal-Only
and the all-labels reference) and one folder per other recipe; their scores/*.parquet are read with the
evaluated records (whose judges the heading names).

    python benchmarks/stage2_recipes.py --eval EVAL.parquet --run full=DIR --run mixed=DIR ... [--md OUT.md]

Another subject's run (the embedded world) names its budgets and groups: --budgets 50 150 500 --in-domain
birth_city ... --ood language ... --subject "the world LM".
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from labels_remeasure import GROUPS

from elical.confidence.base import score_records
from elical.metrics.bootstrap import bootstrap_weights, percentile_interval
from elical.metrics.calibration import auroc_kernel
from elical.model.predictions import read_predictions
from elical.records import read_parquet

TRAINING_FREE = ("Prob", "N-Prob", "Consis-Sem")
BUDGETS = (100, 300, 1000)


def replicates(records, confidence: dict[str, float], resamples: int, seed: int) -> dict[str, np.ndarray]:
    """Per dataset: the AUROC on the full set (entry 0) and on each resample (entries 1..resamples)."""
    out = {}
    for dataset in {d for group in GROUPS.values() for d in group}:
        rows = [r for r in records if r.dataset == dataset]
        y = np.array([float(r.greedy_correct) for r in rows])
        conf = np.array([confidence[r.id] for r in rows])
        weights = np.vstack([np.ones(len(rows)), bootstrap_weights(len(rows), resamples, seed + len(dataset))])
        out[dataset] = auroc_kernel(conf, y, weights)
    return out


def evaluated_records(path: Path) -> list:
    """The evaluated records that carry a correctness label (the ones every AUROC here is on)."""
    return [r for r in read_parquet(path) if r.greedy_correct is not None and not r.failed]


def difference_cell(d: np.ndarray) -> str:
    """A paired difference (entry 0: on the full set; 1..: on each resample) as 'diff [low, high]'."""
    low, high = percentile_interval(d[1:])
    return f"{d[0]:+.3f} [{low:+.3f}, {high:+.3f}]"


def group_mean(per_dataset: dict[str, np.ndarray], group: str) -> np.ndarray:
    return np.nanmean(np.vstack([per_dataset[d] for d in GROUPS[group]]), axis=0)


def holdout_selection(runs: dict[str, str], models: dict[tuple[str, str], dict[str, np.ndarray]]) -> list[str]:
    """Choose the recipe without peeking (issue 23, item 2), leaving one OOD dataset out at a time: the recipe
    with the highest AUROC on the held-out dataset (mean over budgets and seeds) is chosen, then reported on
    the other OOD datasets, next to every recipe and Eli-Only on those same datasets."""
    def auroc(name: str, datasets: Sequence[str]) -> float:  # mean over seeds and datasets, full-set values
        return float(np.mean([models[(m, s)][d][0] for (m, s) in models if m == name for d in datasets]))

    shown = " / ".join(map(str, BUDGETS))
    lines = ["", "## Choosing the recipe on a held-out OOD dataset", "",
             f"Each OOD dataset in turn is held out for choosing (highest AUROC there, mean over budgets {shown} "
             "and seeds); the chosen recipe is reported on the other OOD datasets (mean AUROC per budget).", "",
             f"| held out | chosen | AUROC there per recipe | reported on | chosen at {shown} | every recipe at "
             f"{shown} | Eli-Only |", "|---|---|---|---|---|---|---|"]
    for held in GROUPS["ood"]:
        rest = [d for d in GROUPS["ood"] if d != held]
        there = {recipe: float(np.mean([auroc(f"elical-{b} ({recipe})", [held]) for b in BUDGETS])) for recipe in runs}
        chosen = max(there, key=lambda r: there[r])

        def per_budget(recipe: str, rest: list[str] = rest) -> str:
            return " / ".join(f"{auroc(f'elical-{b} ({recipe})', rest):.3f}" for b in BUDGETS)

        lines.append(f"| {held} | {chosen} | {', '.join(f'{r} {v:.3f}' for r, v in there.items())} | {', '.join(rest)} | "
                     f"{per_budget(chosen)} | {'; '.join(f'{r} {per_budget(r)}' for r in runs)} | "
                     f"{auroc('eli-only-0', rest):.3f} |")
    return lines


def main() -> None:
    global BUDGETS  # a script's settings, read by the functions above
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", type=Path, required=True)
    parser.add_argument("--run", action="append", required=True, help="RECIPE=RUN_FOLDER")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--md", type=Path)
    parser.add_argument("--budgets", nargs="+", help=f"label budgets tabulated, 'all' too (default {BUDGETS})")
    parser.add_argument("--in-domain", nargs="+", help="in-domain datasets (default SmolLM2's run's)")
    parser.add_argument("--ood", nargs="+", help="out-of-domain datasets (default SmolLM2's run's)")
    parser.add_argument("--subject", default="SmolLM2-135M-Instruct", help="the model named in the heading")
    args = parser.parse_args()
    BUDGETS = tuple(int(b) if b.isdigit() else b for b in args.budgets) if args.budgets else BUDGETS
    GROUPS.update({"in-domain": tuple(args.in_domain or GROUPS["in-domain"]), "ood": tuple(args.ood or GROUPS["ood"])})
    records = evaluated_records(args.eval)
    runs = dict(item.split("=", 1) for item in args.run)
    models: dict[tuple[str, str], dict[str, np.ndarray]] = {}  # (method, seed) -> dataset -> AUROC replicates
    for recipe, folder in runs.items():
        for path in sorted(Path(folder, "scores").glob("*.parquet")):
            method, seed = path.stem.rsplit("-s", 1)
            if method.startswith("elical"):
                method = f"{method} ({recipe})"
            elif recipe != "full":
                continue  # Eli-Only and Cal-Only come from the base run
            models[(method, seed)] = replicates(records, read_predictions(path).confidence, args.resamples, 0)
    for name, values in score_records(records, TRAINING_FREE).items():
        models[(name, "-")] = replicates(records, dict(zip((r.id for r in records), map(float, values))), args.resamples, 0)

    def method(name: str, group: str) -> np.ndarray:  # mean over seeds, per replicate
        return np.mean([group_mean(v, group) for (m, _), v in models.items() if m == name], axis=0)

    def seeds_of(name: str, group: str) -> list[float]:
        return [float(group_mean(v, group)[0]) for (m, s), v in sorted(models.items()) if m == name]

    def has(name: str) -> bool:
        return any(m == name for m, _ in models)

    def diff(a: str, b: str, group: str) -> str:
        if not has(b):
            return "n/a"
        return difference_cell(method(a, group) - method(b, group))

    best_free = {g: max(TRAINING_FREE, key=lambda n: method(n, g)[0]) for g in ("in-domain", "ood")}
    judges = " / ".join(records[0].generation.get("judges", {}).values())
    lines = [f"# EliCal's calibration recipes on {args.subject} (labels {judges}; 3 seeds; "
             f"{args.resamples} paired resamples; tabulated on {platform.node()})", "",
             f"Eli-Only: in-domain {method('eli-only-0', 'in-domain')[0]:.3f}, OOD {method('eli-only-0', 'ood')[0]:.3f}; "
             f"best training-free: in-domain {best_free['in-domain']} {method(best_free['in-domain'], 'in-domain')[0]:.3f}, "
             f"OOD {best_free['ood']} {method(best_free['ood'], 'ood')[0]:.3f}; EliCal (full) with all labels: "
             + (f"in-domain {method('elical-all (full)', 'in-domain')[0]:.3f}, OOD {method('elical-all (full)', 'ood')[0]:.3f}."
                if has('elical-all (full)') else "not trained in this base run."), "",
             "| recipe | labels | in-domain | OOD | OOD − Eli-Only | OOD − Cal-Only | in-domain − Cal-Only | "
             "in-domain % of all-labels, per seed | largest drop below Eli-Only (dataset) |",
             "|---|---|---|---|---|---|---|---|---|"]
    reference = seeds_of("elical-all (full)", "in-domain")  # empty where the base run had no all-labels models
    for recipe in runs:
        for budget in BUDGETS:
            name = f"elical-{budget} ({recipe})"
            if not has(name):
                continue
            share = ", ".join(f"{100 * v / r:.1f}" for v, r in zip(seeds_of(name, "in-domain"), reference)) or "n/a"
            drops = {d: np.mean([models[(m, s)][d][0] for (m, s) in models if m == "eli-only-0"])
                     - np.mean([models[(m, s)][d][0] for (m, s) in models if m == name])
                     for group in ("in-domain", "ood") for d in GROUPS[group]}
            worst = max(drops, key=lambda d: drops[d])
            lines.append(f"| {recipe} | {budget} | {method(name, 'in-domain')[0]:.3f} | {method(name, 'ood')[0]:.3f} | "
                         f"{diff(name, 'eli-only-0', 'ood')} | {diff(name, f'cal-only-{budget}', 'ood')} | "
                         f"{diff(name, f'cal-only-{budget}', 'in-domain')} | {share} | {drops[worst]:+.3f} ({worst}) |")
    lines += ["", "| Cal-Only | labels | in-domain | OOD |", "|---|---|---|---|"]
    lines += [f"| | {b} | {method(f'cal-only-{b}', 'in-domain')[0]:.3f} | {method(f'cal-only-{b}', 'ood')[0]:.3f} |"
              for b in dict.fromkeys((*BUDGETS, "all")) if has(f"cal-only-{b}")]
    lines += holdout_selection(runs, models)
    text = "\n".join(lines)
    print(text)
    if args.md:
        args.md.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
