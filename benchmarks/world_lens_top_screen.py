"""Screen a head/lens setting with the real trainer (LoRA + head) on world pool questions held out of training
(issue 23, item 5): no evaluation record is read.

    python benchmarks/world_lens_top_screen.py --run RUN_DIR --out OUT --name top --set lens_top=true [--seeds 0 1 2]

RUN_DIR: a finished default world run (its pool, records/train.parquet, and an Eli-Only model's train_config.yaml).
The pool is split once (seeded, stratified by dataset) into A (80 %) and V (20 %). Per seed: Eli-Only (stage 1)
trains on A, then EliCal's stage 2 (stage2_refit on, as the preset) at each budget drawn from A, epochs by the
preset's rule (1500 / labels in [2, 15]). Printed and appended to OUT/screen.jsonl: the in-domain AUROC on V
(mean of the datasets', as the run's report) of N-Prob, Eli-Only and EliCal at each budget.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

SPLIT_SEED = 4242  # A / V split of the pool; not the training seeds


def dataset_mean_auroc(score: np.ndarray, y: np.ndarray, datasets: np.ndarray) -> float:
    """The mean over datasets of each dataset's AUROC (datasets with one class left out)."""
    from sklearn.metrics import roc_auc_score

    values = [roc_auc_score(y[datasets == d], score[datasets == d]) for d in sorted(set(datasets))
              if 0 < y[datasets == d].sum() < (datasets == d).sum()]
    return float(np.mean(values))


def main() -> None:
    import torch
    import yaml

    torch.set_num_threads(1)
    from elical.model.network import ConfidenceModel
    from elical.records import read_parquet, write_parquet
    from elical.train.budgets import split_validation
    from elical.train.config import TrainConfig, stage2_epochs
    from elical.train.predict import predict_records
    from elical.train.trainer import train

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--set", action="append", default=[], help="a TrainConfig field=value (YAML)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budgets", type=int, nargs="+", default=[50, 150, 500])
    args = parser.parse_args()
    pool = read_parquet(args.run / "records" / "train.parquet")
    a, v = split_validation(list(range(len(pool))), pool, 0.2, SPLIT_SEED)
    held = [pool[i] for i in v]
    args.out.mkdir(parents=True, exist_ok=True)
    records = args.out / "poolA.parquet"
    if not records.exists():
        write_parquet([pool[i] for i in a], records)
    y = np.array([float(r.greedy_correct) for r in held])
    datasets = np.array([r.dataset for r in held])
    n_prob = np.array([np.exp(np.mean(r.greedy_logprobs)) for r in held])
    overrides = {k: yaml.safe_load(x) for k, x in (s.split("=", 1) for s in args.set)}
    base = TrainConfig.from_yaml(args.run / "models" / "eli-only-0-s0" / "train_config.yaml").model_dump()
    folder = args.out / args.name

    def held_auroc(model_dir: Path) -> float:
        model = ConfidenceModel.load(model_dir)
        return dataset_mean_auroc(np.array(predict_records(model, held, show_progress=False)), y, datasets)

    for seed in args.seeds:
        start = time.time()
        eli = TrainConfig(**{**base, **overrides, "mode": "eli-only", "seed": seed, "output_dir": str(folder / f"eli-s{seed}")})
        row = {"name": args.name, "set": overrides, "seed": seed, "nprob": dataset_mean_auroc(n_prob, y, datasets),
               "eli": held_auroc(train(eli, [str(records)], show_progress=False).model)}
        for budget in args.budgets:
            cfg = TrainConfig(**{**base, "stage2_refit": True, **overrides, "mode": "elical", "seed": seed,
                                 "budget": budget, "epochs_stage2": stage2_epochs(budget, None, 1500, 2, 15),
                                 "output_dir": str(folder / f"elical-{budget}-s{seed}")})
            row[f"elical{budget}"] = held_auroc(train(cfg, [str(records)], show_progress=False,
                                                      init_from=folder / f"eli-s{seed}").model)
        row["seconds"] = round(time.time() - start)
        print(json.dumps(row), flush=True)
        with open(args.out / "screen.jsonl", "a") as handle:
            handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
