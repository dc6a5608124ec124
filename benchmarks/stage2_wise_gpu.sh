#!/usr/bin/env bash
# Issue 23: EliCal's `stage2: wise` on SmolLM2, 3 seeds, on one GPU machine (../shared/docs/gpu.md).
# 1. `elical run --preset smollm2-qa-full` with benchmarks/configs/wise_gpu.yaml: annotation with the current judges,
#    Eli-Only, Cal-Only and EliCal (wise, stage2_wise 0.5) at 100 / 300 / 1000 / all labels;
# 2. benchmarks/stage2_wise_sweep.py: the same EliCal models at stage2_wise 0, 0.25, 0.75 and 1 (no training).
# Assets as for run_preset_gpu.sh (QA=1 GEO=0 N_PARTS=3 bash benchmarks/smollm2_geo_assets.sh; one call per part with
# carry [".gpu/pN"]), then this command in more calls until it prints "sweep done". Writes $OUT/run/ (run.log,
# run.tgz.*: the run folder without weights) and $OUT/sweep.tgz (the sweep's predictions); on a CPU,
# benchmarks/stage2_recipes.py --eval records/eval.parquet --run full=alpha-1 --run wise0.5=alpha-0.5 ... tabulates them
# (the evaluated records travel in run.tgz: copy them with RECORDS=1).
set -uo pipefail
OUT=${OUT:-/tmp/out}
LIMIT_S=${LIMIT_S:-560}
RUN=/tmp/runs/wise
end=$(( $(date +%s) + LIMIT_S ))
# shellcheck source=benchmarks/gpu_setup.sh
source benchmarks/gpu_setup.sh || exit 1
[ "$GPU_READY" = 1 ] || exit 0
if [ ! -f /tmp/runs/wise.done ]; then
  mkdir -p "$OUT/run"
  PRESET=smollm2-qa-full CONFIG=benchmarks/configs/wise_gpu.yaml RUN=$RUN OUT=$OUT/run LIMIT_S=$LIMIT_S \
    bash benchmarks/run_preset_gpu.sh > "$OUT/run/console.txt" 2>&1 && touch /tmp/runs/wise.done
  tail -n 3 "$OUT/run/console.txt"
  [ -f /tmp/runs/wise.done ] || exit 0
fi
left=$(( end - $(date +%s) ))
[ "$left" -lt 120 ] && { echo "time left $left s: rerun for the sweep"; exit 0; }
timeout "$left" python3 benchmarks/stage2_wise_sweep.py "$RUN" --alphas 0 0.25 0.5 0.75 1 --out /tmp/sweep \
  --device cuda 2>&1 | grep -v "Loading weights" | tail -n 8 || exit 0
cp "$RUN/records/eval.parquet" /tmp/sweep/eval.parquet
tar -czf "$OUT/sweep.tgz" -C /tmp/sweep . && echo "sweep done"
