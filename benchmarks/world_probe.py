"""What a pre-generation probe of the world LM reaches, against what could be known (issue 12, item 3).

    python benchmarks/world_probe.py --run runs/world-default

On a finished world run: in-domain AUROC for greedy correctness of the exposure count of the fact
(how often the corpus stated it: an oracle no model sees), of self-consistency over the k samples, and of
every trained model of seed 0; and, for each trained model, the correlation of its confidence with
self-consistency (Eli-Only's own training target). Also how many evaluated questions are about a person
who also has a question in the calibration pool (the world splits by fact, not by person), and how well
Eli-Only fits its target on the pool it was trained on (a probe that cannot fit its own training
questions is limited by what the hidden state holds, not by labels or generalisation).
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from elical.model.predictions import read_predictions
    from elical.records import read_parquet

    evaluated = read_parquet(args.run / "records" / "eval.parquet")
    pool = read_parquet(args.run / "records" / "train.parquet")
    people = {r.extra.get("entity") for r in pool}
    rows = [r for r in evaluated if r.extra.get("group") == "in-domain" and r.greedy_correct is not None]
    correct = np.array([r.greedy_correct for r in rows])
    consistency = np.array([np.mean(r.sample_consistent) for r in rows])
    print(f"machine: {platform.machine()}, {platform.platform()}; run {args.run}")
    print(f"in-domain questions: {len(rows)}, greedy accuracy {correct.mean():.3f}; about a person with a pool "
          f"question: {sum(r.extra.get('entity') in people for r in rows)}")
    print("| confidence | in-domain AUROC | correlation with self-consistency |\n|---|---|---|")
    print(f"| exposure count (oracle) | {roc_auc_score(correct, [r.extra.get('mentions', 0) for r in rows]):.3f} | |")
    print(f"| self-consistency (k samples) | {roc_auc_score(correct, consistency):.3f} | 1 |")
    for scores in sorted((args.run / "scores").glob(f"*-s{args.seed}.parquet")):
        conf = read_predictions(scores).confidence
        values = np.array([conf[r.id] for r in rows])
        print(f"| {scores.stem} | {roc_auc_score(correct, values):.3f} | {np.corrcoef(values, consistency)[0, 1]:.3f} |")
    training_fit(args.run / "models" / f"eli-only-0-s{args.seed}", pool)


def training_fit(model_dir: Path, pool: list) -> None:
    """Eli-Only's fit of self-consistency on its own calibration pool (its training and validation questions)."""
    from elical.model.network import ConfidenceModel
    from elical.train.predict import predict_records

    model = ConfidenceModel.from_pretrained(model_dir, device="cpu")
    predicted = np.array(predict_records(model, pool, show_progress=False))
    target = np.array([np.mean(r.sample_consistent) for r in pool])
    print(f"\n{model_dir.name} on its {len(pool)} pool questions: correlation with self-consistency "
          f"{np.corrcoef(predicted, target)[0, 1]:.3f}, mean squared error {np.mean((predicted - target) ** 2):.4f} "
          f"(predicting the mean everywhere: {np.var(target):.4f})")


if __name__ == "__main__":
    main()
