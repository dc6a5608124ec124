#!/usr/bin/env bash
# Issue 21 item 5: the paper's experiment (`elical run --preset smollm2-qa-full`: 3 seeds, budgets 100 / 300 /
# 1000 / all) re-measured on the new labels. The generations are benchmarks/labels_gpu.sh's, relabelled on a
# CPU by benchmarks/labels_relabel.py (match@4, answer@3); each run trains and evaluates from those records
# (qa.records: nothing generated), one per prompt (paper, short), side by side on one GPU.
# Assets: EMBED=0 QA=0 GEO=0 N_PARTS=3 bash benchmarks/smollm2_geo_assets.sh after copying the relabelled
# records into $ASSETS/rec/{paper,short}/{train,eval}.parquet; one call per part with carry [".gpu/pN"] and
# this command (N_PARTS=3), then more calls (no carry) until both runs print exit 0 (each resumes).
set -uo pipefail
OUT=${OUT:-/tmp/out}
LIMIT_S=${LIMIT_S:-560}
STYLES=${STYLES:-"paper short"}
# shellcheck source=benchmarks/gpu_setup.sh
source benchmarks/gpu_setup.sh || exit 1
[ "$GPU_READY" = 1 ] || exit 0
for style in $STYLES; do
  config=$ASSETS/remeasure-$style.yaml
  cat > "$config" <<YAML
name: smollm2-qa-full-$style-relabelled
qa: {pool: [], eval: [], records: [$ASSETS/rec/$style/train.parquet, $ASSETS/rec/$style/eval.parquet]}
train: {workers: ${WORKERS:-6}}
YAML
  mkdir -p "$OUT/$style"
  PRESET=smollm2-qa-full CONFIG=$config RUN=/tmp/runs/re-$style OUT=$OUT/$style LIMIT_S=$LIMIT_S \
    bash benchmarks/run_preset_gpu.sh > "$OUT/$style/console.txt" 2>&1 &
done
wait
tail -n 3 "$OUT"/*/console.txt
