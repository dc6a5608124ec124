"""Issue 26: which questions to label. EliCal on the embedded world with each label selection strategy.

One `elical run` of the default world preset trains Eli-Only (stage 1) per seed (honesty step off, no other
method); then, per seed, each strategy orders the pool with that seed's Eli-Only model
(elical.train.label_selection), and EliCal trains from that Eli-Only model on the first b labels of the order,
exactly as the run's EliCal does (same TrainConfig, elical.run.steps.training.train_config). Each model is scored
on the run's evaluation records: AUROC per dataset, averaged over in-domain and OOD datasets weighted by
their questions (as `elical evaluate` averages groups). Paired differences with random: mean over seeds, 95%
bootstrap interval over evaluation questions (resampled within each dataset, the same draw for both).

    nice python benchmarks/label_selection.py                      # 3 seeds x 4 budgets x 5 strategies
    nice python benchmarks/label_selection.py --seeds 0 --budgets 50 --strategies random uncertainty

Writes benchmarks/results/label_selection_world_cpu.md (and .csv of every model) with the machine and config.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def machine() -> str:
    """CPU, cores, Python, torch."""
    import torch

    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{cpu}, {os.cpu_count()} cores (shared, run under nice), Python {platform.python_version()}, "
            f"torch {torch.__version__}, {platform.system()} {platform.release()}")


def group_auroc(conf: np.ndarray, correct: np.ndarray, datasets: np.ndarray, members: dict[str, np.ndarray],
                idx: dict[str, np.ndarray] | None = None) -> dict[str, float]:
    """AUROC per group: per-dataset AUROC averaged with weights = questions (``idx``: a resample per dataset)."""
    from elical.metrics import auroc

    out: dict[str, float] = {}
    for group, names in members.items():
        values, weights = [], []
        for name in names:
            rows = np.flatnonzero(datasets == name)
            if idx is not None:
                rows = rows[idx[name]]
            y = correct[rows]
            if y.min() == y.max():
                continue
            values.append(auroc(conf[rows], y))
            weights.append(len(rows))
        out[group] = float(np.average(values, weights=weights)) if values else float("nan")
    return out


def plot_curves(frame, stage1: dict[str, float], path: Path) -> None:
    """AUROC against labels, one line per strategy (mean over seeds, the seeds' range shaded), per group; Eli-Only
    (no labels) dashed: the run report's label curve with one line per strategy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted(c.removeprefix("auroc_") for c in frame.columns if c.startswith("auroc_"))
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 4), squeeze=False)
    for ax, group in zip(axes[0], groups):
        for strategy, rows in frame.groupby("strategy", sort=False):
            by_budget = rows.groupby("budget")[f"auroc_{group}"]
            mean, low, high = by_budget.mean(), by_budget.min(), by_budget.max()
            line, = ax.plot(mean.index, mean.values, marker="o", label=strategy)
            ax.fill_between(mean.index, low.values, high.values, color=line.get_color(), alpha=0.12)
        if group in stage1:
            ax.axhline(stage1[group], color="purple", linestyle="--", label="Eli-Only (0 labels)")
        ax.set_xscale("log")
        ax.set_xlabel("labelled questions")
        ax.set_ylabel("AUROC")
        ax.set_title(f"EliCal, {group} (mean of seeds; shaded: their range)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    from elical.model.key import ModelKey
    from elical.model.network import ConfidenceModel
    from elical.records import read_records
    from elical.run.config import load_run_config
    from elical.run.folder import RunFolder
    from elical.run.pipeline import run_pipeline
    from elical.run.steps.training_step import train_config
    from elical.run.subjects.by_name import build_subject
    from elical.train.label_selection import NEEDS_FEATURES, STRATEGIES, label_order, stage1_outputs
    from elical.train.predict import predict_records
    from elical.train.trainer import train

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", default="runs/label-selection-world", help="run folder (annotation + Eli-Only)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budgets", type=int, nargs="+", default=[50, 100, 300, 1000])
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument("--resamples", type=int, default=200, help="bootstrap draws of the paired differences")
    parser.add_argument("--out", default=str(HERE / "results" / "label_selection_world_cpu.md"))
    args = parser.parse_args()
    started = time.perf_counter()

    overrides = {"name": "label-selection-world", "honesty": None,
                 "train": {"methods": ["eli-only"], "budgets": [50, 100, 300, 1000], "seeds": args.seeds}}
    cfg = load_run_config("default", overrides=overrides)
    run_pipeline(cfg, args.run, log=lambda m: print(m, flush=True))
    folder = RunFolder(Path(args.run))
    subject = build_subject(cfg)
    pool = read_records([str(folder.pool)])
    evaluated = [r for r in read_records([str(folder.evaluation_records)]) if r.greedy_correct is not None
                 and subject.groups.get(r.dataset) in ("in-domain", "ood")]
    datasets = np.array([r.dataset for r in evaluated])
    correct = np.array([float(r.greedy_correct) for r in evaluated])
    members: dict[str, list[str]] = defaultdict(list)
    for name in sorted(set(datasets)):
        members[subject.groups[name]].append(name)
    print(f"pool {len(pool)} questions; evaluated {len(evaluated)} ({dict(members)})", flush=True)

    scores: dict[tuple[str, int, int], np.ndarray] = {}
    rows = []
    stage1_auroc: dict[str, list[float]] = defaultdict(list)  # Eli-Only (0 labels), per group, per seed
    bench = Path(args.run) / "label-selection"
    for seed in args.seeds:
        eli = folder.model(ModelKey("eli-only", None, seed))
        need_features = any(s in NEEDS_FEATURES for s in args.strategies)
        t0 = time.perf_counter()
        confidence, features = stage1_outputs(eli, pool, features=need_features, device="cpu", show_progress=False)
        print(f"seed {seed}: stage-1 outputs in {time.perf_counter() - t0:.1f}s", flush=True)
        stage1 = np.asarray(predict_records(ConfidenceModel.load(eli / "model", device="cpu"), evaluated,
                                            show_progress=False))
        for g, v in group_auroc(stage1, correct, datasets, {g: np.array(n) for g, n in members.items()}).items():
            stage1_auroc[g].append(v)
        for strategy in args.strategies:
            t0 = time.perf_counter()
            order = label_order(strategy, pool, seed, confidence, features, str(eli / "model"))
            order_s = time.perf_counter() - t0
            for budget in args.budgets:
                key = ModelKey("elical", budget, seed)
                tcfg = train_config(cfg, subject, folder, key, len(pool))
                out = bench / strategy / key.name
                tcfg = tcfg.model_copy(update={"output_dir": str(out)})
                t1 = time.perf_counter()
                trained = train(tcfg, [str(folder.pool)], show_progress=False, init_from=eli,
                                label_order=None if strategy == "random" else order)
                model = ConfidenceModel.load(trained.model, device="cpu")
                conf = np.asarray(predict_records(model, evaluated, show_progress=False))
                scores[strategy, budget, seed] = conf
                chosen = set(order.prefix(budget))
                chosen_conf = [order.confidence[i] for i in chosen] if order.confidence else []
                aurocs = group_auroc(conf, correct, datasets, {g: np.array(n) for g, n in members.items()})
                rows.append({"strategy": strategy, "budget": budget, "seed": seed,
                             **{f"auroc_{g}": v for g, v in aurocs.items()},
                             "chosen_mean_stage1_conf": float(np.mean(chosen_conf)) if chosen_conf else None,
                             "order_seconds": round(order_s, 2), "train_seconds": round(time.perf_counter() - t1, 1)})
                print(json.dumps(rows[-1]), flush=True)

    # paired bootstrap over evaluation questions (within datasets), same draw for every model
    rng = np.random.default_rng(0)
    draws = [{name: rng.integers(0, int((datasets == name).sum()), int((datasets == name).sum()))
              for name in set(datasets)} for _ in range(args.resamples)]
    groups = sorted(members)
    boot: dict[tuple[str, int], dict[str, list[float]]] = {}
    if "random" in args.strategies:
        for strategy in args.strategies:
            if strategy == "random":
                continue
            for budget in args.budgets:
                diffs: dict[str, list[float]] = defaultdict(list)
                for idx in draws:
                    per_seed = defaultdict(list)
                    for seed in args.seeds:
                        a = group_auroc(scores[strategy, budget, seed], correct, datasets, members, idx)
                        b = group_auroc(scores["random", budget, seed], correct, datasets, members, idx)
                        for g in groups:
                            per_seed[g].append(a[g] - b[g])
                    for g in groups:
                        diffs[g].append(float(np.mean(per_seed[g])))
                boot[strategy, budget] = diffs

    import pandas as pd

    frame = pd.DataFrame(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out.with_suffix(".csv"), index=False)
    mean = frame.groupby(["strategy", "budget"])[[f"auroc_{g}" for g in groups]].mean()
    sd = frame.groupby(["strategy", "budget"])[[f"auroc_{g}" for g in groups]].std()
    lines = ["# Label selection strategies on the embedded world (issue 26)", "",
             f"Machine: {machine()}.", "",
             (f"Config: `elical run` default world preset (`train.methods: [eli-only]`, `honesty: null`), seeds "
             f"{args.seeds}; EliCal per strategy and budget trained from that seed's Eli-Only with the run's own "
             f"TrainConfig (preset epochs, nothing reduced); pool {len(pool)} questions; evaluated "
             f"{len(evaluated)} questions ({', '.join(f'{g}: {len(n)} datasets' for g, n in members.items())}). "
             f"AUROC: per dataset, averaged over the group weighted by questions. Command: "
             f"`nice python benchmarks/label_selection.py {' '.join(sys.argv[1:])}`. Wall time "
             f"{time.perf_counter() - started:.0f} s. Per-model rows: `{out.with_suffix('.csv').name}`."), "",
             "## AUROC, mean over seeds (sd)", "",
             "| strategy | " + " | ".join(f"{g} @{b}" for g in groups for b in args.budgets) + " |",
             "|---|" + "---|" * (len(groups) * len(args.budgets))]
    lines.append("| Eli-Only (0 labels) | " + " | ".join(f"{np.mean(stage1_auroc[g]):.3f}" for g in groups
                                                     for _ in args.budgets) + " |")
    for strategy in args.strategies:
        cells = [f"{mean.loc[(strategy, b), f'auroc_{g}']:.3f} ({sd.loc[(strategy, b), f'auroc_{g}']:.3f})"
                 for g in groups for b in args.budgets]
        lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
    if boot:
        lines += ["", "## Paired difference with random (mean over seeds, 95% bootstrap interval over questions)", "",
                  "| strategy | " + " | ".join(f"{g} @{b}" for g in groups for b in args.budgets) + " |",
                  "|---|" + "---|" * (len(groups) * len(args.budgets))]
        for strategy in [s for s in args.strategies if s != "random"]:
            cells = []
            for g in groups:
                for b in args.budgets:
                    point = mean.loc[(strategy, b), f"auroc_{g}"] - mean.loc[("random", b), f"auroc_{g}"]
                    low, high = np.percentile(boot[strategy, b][g], [2.5, 97.5])
                    cells.append(f"{point:+.3f} [{low:+.3f}, {high:+.3f}]")
            lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
        top = max(args.budgets)
        if top in args.budgets:
            lines += ["", f"## Target: random-{top} AUROC with at most a third of the labels ({top // 3})", ""]
            for g in groups:
                goal = mean.loc[("random", top), f"auroc_{g}"]
                reached = [f"{s} @{b}" for s in args.strategies for b in args.budgets
                           if b <= top // 3 and mean.loc[(s, b), f"auroc_{g}"] >= goal]
                lines.append(f"- {g}: random-{top} AUROC {goal:.3f}; reached with <= {top // 3} labels by: "
                             f"{', '.join(reached) or 'none'}")
    plot_curves(frame, {g: float(np.mean(v)) for g, v in stage1_auroc.items()}, out.with_suffix(".png"))
    lines += ["", f"![AUROC against labels, one line per strategy]({out.with_suffix('.png').name})"]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
