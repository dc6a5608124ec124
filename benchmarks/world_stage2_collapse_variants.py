"""Stage-2 variants of EliCal on the world without a whole `elical run`: each trains stage 2 only, from the
Eli-Only model (stage 1) of an existing run folder (`init_from`), predicts the run's evaluation records and
prints the in-domain / OOD AUROC (the mean of the datasets', as the run's report), per seed and budget.

    python benchmarks/world_stage2_collapse_variants.py --run RUN_DIR --out OUT --name NAME \
        --set stage2_refit=true --set stage2=l2sp [--budgets 50 150 500] [--seeds 0 1 2] [--passes 1500] [--mode cal-only]

RUN_DIR: a finished world run whose train settings (the Eli-Only models') match these but for stage 2's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import yaml


def group_auroc(records, confidence: dict[str, float]) -> dict[str, float]:
    """In-domain and OOD AUROC: each dataset's AUROC against greedy correctness, averaged within the group."""
    from sklearn.metrics import roc_auc_score

    per: dict[str, dict[str, float]] = {}
    for dataset in sorted({r.dataset for r in records}):
        rows = [r for r in records if r.dataset == dataset and r.greedy_correct is not None and not r.failed]
        y = [int(r.greedy_correct) for r in rows]
        if 0 < sum(y) < len(y):
            per.setdefault(rows[0].extra.get("group", "?"), {})[dataset] = roc_auc_score(y, [confidence[r.id] for r in rows])
    return {group: float(np.mean(list(v.values()))) for group, v in per.items()}


def main() -> None:
    import torch

    torch.set_num_threads(1)
    from elical.model.network import ConfidenceModel
    from elical.records import read_parquet
    from elical.train.config import TrainConfig, stage2_epochs
    from elical.train.predict import predict_records
    from elical.train.trainer import train

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--budgets", nargs="+", default=["50", "150", "500"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--passes", type=int, default=None, help="stage2_passes (default: the run's)")
    parser.add_argument("--mode", default="elical", choices=["elical", "cal-only"], help="cal-only: no stage 1")
    args = parser.parse_args()
    plan = yaml.safe_load((args.run / "config.yaml").read_text())["train"]  # the run's stage-2 epoch rule
    pool = read_parquet(args.run / "records" / "train.parquet")
    evaluation = read_parquet(args.run / "records" / "eval.parquet")
    overrides = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in args.set)}
    rows = []
    for seed in args.seeds:
        for budget in args.budgets:
            labels = len(pool) if budget == "all" else int(budget)
            epochs = stage2_epochs(labels, None, args.passes or plan["stage2_passes"], plan["min_epochs"],
                                  plan["max_epochs"])
            base = TrainConfig.from_yaml(args.run / "models" / f"eli-only-0-s{seed}" / "train_config.yaml")
            tcfg = TrainConfig(**{**base.model_dump(), "epochs_stage2": epochs, **overrides, "mode": args.mode,
                                  "budget": None if budget == "all" else labels,
                                  "output_dir": str(args.out / f"{args.mode}-{budget}-s{seed}")})
            result = train(tcfg, [str(args.run / "records" / "train.parquet")], show_progress=False,
                           init_from=args.run / "models" / f"eli-only-0-s{seed}" if args.mode == "elical" else None)
            model = ConfidenceModel.load(result.model)
            conf = dict(zip([r.id for r in evaluation], predict_records(model, evaluation, show_progress=False)))
            auroc = group_auroc(evaluation, conf)
            rows.append({"variant": args.name, "mode": args.mode, "seed": seed, "budget": budget, **auroc})
            print(json.dumps(rows[-1]), flush=True)
    with open(args.out / f"{args.name}.jsonl", "a") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)


if __name__ == "__main__":
    main()
