"""EliCal's ``stage2: wise`` at other interpolation weights, from a run's trained models (issue 23).

A wise EliCal model keeps its trained stage 2 in ``stage2-cal/best`` and the refit it started from in
``stage2-cal/done.json``, so the model at any ``stage2_wise`` is one interpolation away: no training. For every
EliCal model of RUN that stage 2 trained from a refitted stage 1 (``stage2: wise``, or ``full`` / ``mixed`` / ``l2sp``
with ``stage2_refit``), this writes the predictions on the run's evaluation records at each ALPHA into
OUT/alpha-<ALPHA>/scores/<model>.parquet, as ``elical run`` writes them, with the run's Eli-Only and Cal-Only
predictions beside them, so ``benchmarks/stage2_recipes.py --run NAME=OUT/alpha-<ALPHA>`` tabulates each weight as
a recipe (0: platt's model; 1: full with stage2_refit).

    python benchmarks/stage2_wise_sweep.py RUN --alphas 0 0.25 0.75 1 --out OUT [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import time
from pathlib import Path

from elical.model.key import ModelKey
from elical.model.loading import pick_device
from elical.model.model_folder import read_saved
from elical.model.predictions import write_predictions
from elical.records import read_parquet
from elical.train.predict import predict_records
from elical.train.wise import interpolate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    device = pick_device(args.device)
    records = read_parquet(args.run / "records" / "eval.parquet")
    ids = [r.id for r in records]
    print(f"# {platform.node()}, device {device}: {len(records)} evaluated records of {args.run}")
    for alpha in args.alphas:  # the run's trained-from-scratch baselines sit beside every weight's EliCal
        scores = args.out / f"alpha-{alpha:g}" / "scores"
        scores.mkdir(parents=True, exist_ok=True)
        for path in (args.run / "scores").glob("*.parquet"):
            if not path.name.startswith("elical"):
                shutil.copy(path, scores / path.name)
    for model_dir in sorted((args.run / "models").glob("elical-*")):
        done = model_dir / "stage2-cal" / "done.json"
        refit = json.loads(done.read_text()).get("refit") if done.exists() else None
        if refit is None:
            print(f"{model_dir.name}: skipped (its stage 2 did not start from a refitted stage 1)")
            continue
        stage1 = Path(json.loads((model_dir / "run.json").read_text())["init_from"])
        trained = model_dir / "stage2-cal" / "best"
        key = ModelKey.of_training(read_saved(trained)["train"]["config"])
        for alpha in args.alphas:
            start = time.perf_counter()
            model = interpolate(stage1, trained, refit, alpha, device)
            model.eval()
            confidence = predict_records(model, records, show_progress=False)
            out = args.out / f"alpha-{alpha:g}" / "scores" / f"{model_dir.name}.parquet"
            write_predictions(out, ids, confidence, model_dir.name, {"alpha": alpha, "trained": str(trained)}, key)
            print(f"{model_dir.name} alpha {alpha:g}: {time.perf_counter() - start:.1f}s", flush=True)


if __name__ == "__main__":
    main()
