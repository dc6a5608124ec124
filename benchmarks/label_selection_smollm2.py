"""Issue 26 on SmolLM2: EliCal's AUROC with each label-selection strategy, against today's random draw, in-domain
and out of domain, with stratified paired bootstrap intervals (questions resampled within each dataset, the
same resamples for every model and seed; a group's AUROC is the mean of its datasets', a method's the mean of
its seeds'). Every strategy's EliCal starts from the same Eli-Only models (benchmarks/label_selection_gpu.sh).

    python benchmarks/label_selection_smollm2.py --eval EVAL.parquet --run random=DIR --run uncertainty=DIR ... [--md OUT.md]

With --md, also OUT.csv (AUROC of every model per group) and OUT.png (the label curve, one line per strategy,
drawn by benchmarks/label_selection.py's plot_curves). With --pool POOL.parquet, a table of what each strategy
chose (models/*-300-s*/selection.json): the share labelled correct, and the share of choice questions (the question
offers alternatives, elical.annotate.assertion.question_options) among all chosen and among those labelled
correct, next to the pool's (which random's dataset-stratified draw matches in expectation).
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import numpy as np
from label_selection import plot_curves
from stage2_recipes import difference_cell, evaluated_records, group_mean, replicates

from elical.model.predictions import read_predictions
from elical.records import read_parquet

GROUPS = ("in-domain", "ood")


def chosen_table(pool_path: Path, runs: dict[str, str], budget: int = 300) -> list[str]:
    """Per strategy and seed, what its first ``budget`` questions are: labelled correct, choice questions."""
    import json

    from elical.annotate.assertion import question_options

    pool = {r.id: r for r in read_parquet(pool_path)}
    choice = {rid: question_options(r.question) is not None for rid, r in pool.items()}

    def describe(ids: list[str]) -> str:
        right = [i for i in ids if pool[i].greedy_correct]
        return (f"{100 * len(right) / len(ids):.1f} | {100 * np.mean([choice[i] for i in ids]):.1f} | "
                f"{100 * np.mean([choice[i] for i in right]) if right else float('nan'):.1f}")

    lines = ["", f"What each strategy chose at {budget} labels (per seed; %):", "",
             "| strategy | seed | labelled correct | choice questions | choice questions among those correct |",
             "|---|---|---|---|---|", f"| pool (random's expectation) | - | {describe(list(pool))} |"]
    for strategy, folder in runs.items():
        for path in sorted(Path(folder, "models").glob(f"elical-{budget}-s*/selection.json")):
            lines.append(f"| {strategy} | {path.parent.name.rsplit('-s', 1)[1]} | "
                         f"{describe(json.loads(path.read_text())['chosen'])} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", type=Path, required=True)
    parser.add_argument("--run", action="append", required=True, help="STRATEGY=RUN_FOLDER (random first)")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--md", type=Path)
    parser.add_argument("--pool", type=Path, help="the pool's records: what each strategy chose, described")
    args = parser.parse_args()
    records = evaluated_records(args.eval)
    runs = dict(item.split("=", 1) for item in args.run)
    # (strategy, budget) -> seed -> dataset -> AUROC replicates; Eli-Only (budget 0) from the random run
    models: dict[tuple[str, int], dict[str, dict[str, np.ndarray]]] = {}
    for strategy, folder in runs.items():
        for path in sorted(Path(folder, "scores").glob("*.parquet")):
            method, seed = path.stem.rsplit("-s", 1)
            name, budget = method.rsplit("-", 1)
            if name == "eli-only" and strategy != "random":
                continue  # the same models, copied into every strategy's folder
            key = ("eli-only" if name == "eli-only" else strategy, int(budget))
            models.setdefault(key, {})[seed] = replicates(records, read_predictions(path).confidence, args.resamples, 0)

    def mean(key: tuple[str, int], group: str) -> np.ndarray:  # mean over seeds, per replicate
        return np.mean([group_mean(v, group) for v in models[key].values()], axis=0)

    def diff(a: tuple[str, int], b: tuple[str, int], group: str) -> str:
        return difference_cell(mean(a, group) - mean(b, group))

    judges = " / ".join(records[0].generation.get("judges", {}).values())
    seeds = sorted({s for v in models.values() for s in v})
    lines = [f"# Label selection on SmolLM2-135M-Instruct (labels {judges}; seeds {', '.join(seeds)}; "
             f"{args.resamples} paired resamples; tabulated on {platform.node()})", "",
             f"Eli-Only (0 labels): in-domain {mean(('eli-only', 0), 'in-domain')[0]:.3f}, "
             f"OOD {mean(('eli-only', 0), 'ood')[0]:.3f}. EliCal with random labels: "
             + "; ".join(f"{b}: in-domain {mean(('random', b), 'in-domain')[0]:.3f}, OOD {mean(('random', b), 'ood')[0]:.3f}"
                         for b in sorted(b for s, b in models if s == "random")) + ".", "",
             "| strategy | labels | in-domain | OOD | in-domain − random (same labels) | OOD − random (same labels) | "
             "in-domain − random 1000 | OOD − random 1000 | per seed in-domain / OOD |",
             "|---|---|---|---|---|---|---|---|---|"]
    for strategy, budget in sorted((k for k in models if k[0] not in ("random", "eli-only")), key=lambda k: (k[0], k[1])):
        key = (strategy, budget)
        same = ("random", budget)
        per_seed = ", ".join(f"{group_mean(v, 'in-domain')[0]:.3f} / {group_mean(v, 'ood')[0]:.3f}"
                             for _, v in sorted(models[key].items()))
        cells = [diff(key, same, g) if same in models else "-" for g in GROUPS]
        cells += [diff(key, ("random", 1000), g) if ("random", 1000) in models else "-" for g in GROUPS]
        lines.append(f"| {strategy} | {budget} | {mean(key, 'in-domain')[0]:.3f} | {mean(key, 'ood')[0]:.3f} | "
                     + " | ".join(cells) + f" | {per_seed} |")
    if args.pool:
        lines += chosen_table(args.pool, runs)
    text = "\n".join(lines)
    print(text)
    if args.md:
        import pandas as pd

        args.md.write_text(text + "\n", encoding="utf-8")
        frame = pd.DataFrame([{"strategy": strategy, "budget": budget, "seed": seed,
                               **{f"auroc_{g}": float(group_mean(v, g)[0]) for g in GROUPS}}
                              for (strategy, budget), by_seed in models.items() if strategy != "eli-only"
                              for seed, v in sorted(by_seed.items())]).sort_values(["strategy", "budget", "seed"])
        frame.to_csv(args.md.with_suffix(".csv"), index=False)
        plot_curves(frame, {g: float(mean(("eli-only", 0), g)[0]) for g in GROUPS}, args.md.with_suffix(".png"))


if __name__ == "__main__":
    main()
