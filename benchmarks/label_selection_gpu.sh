#!/usr/bin/env bash
# Issue 26 on SmolLM2: EliCal with each label-selection strategy (train.label_selection), 3 seeds, from the
# relabelled generations of benchmarks/labels_gpu.sh (match@6 / answer@5, benchmarks/labels_relabel.py), on one GPU.
# 1. base: `elical run --preset smollm2-qa-full` from those records (qa.records: nothing generated): Eli-Only
#    and EliCal with today's random draw at 100 / 300 / 1000 labels.
# 2. one run per strategy in a copy of the base folder that keeps its records and Eli-Only models, so every
#    strategy orders the pool with the same stage 1 and EliCal's stage 2 starts from it (budgets $SELECTED_BUDGETS).
# Assets and calls as for benchmarks/stage2_recipes_gpu.sh (records in $ASSETS/rec/paper/{train,eval}.parquet,
# the committed src in .gpu/head/src). Writes $OUT/<name>/ (run.log, run.tgz.*); rerun until every run is done.
set -uo pipefail
OUT=${OUT:-/tmp/out}
LIMIT_S=${LIMIT_S:-560}
STRATEGIES=${STRATEGIES:-"stratified-confidence uncertainty uncertain-diverse"}
SELECTED_BUDGETS=${SELECTED_BUDGETS:-"100, 300"}
[ -d .gpu/head/src ] && export ELICAL_SRC=$PWD/.gpu/head/src
# shellcheck source=benchmarks/gpu_setup.sh
source benchmarks/gpu_setup.sh || exit 1
[ "$GPU_READY" = 1 ] || exit 0
end=$(( $(date +%s) + LIMIT_S ))
records="[$ASSETS/rec/paper/train.parquet, $ASSETS/rec/paper/eval.parquet]"
base=/tmp/runs/selection-random
run_one() {  # name config-yaml run-folder
  mkdir -p "$OUT/$1"
  PRESET=smollm2-qa-full CONFIG=$2 RUN=$3 OUT=$OUT/$1 LIMIT_S=$(( end - $(date +%s) )) \
    bash benchmarks/run_preset_gpu.sh > "$OUT/$1/console.txt" 2>&1 && touch "/tmp/runs/$1.done"
  tail -n 2 "$OUT/$1/console.txt"
}
if [ ! -f /tmp/runs/random.done ]; then
  cat > "$ASSETS/selection-random.yaml" <<YAML
name: smollm2-qa-full-relabelled6-selection-random
qa: {pool: [], eval: [], records: $records}
train: {workers: ${WORKERS:-6}, methods: [eli-only, elical], budgets: [100, 300, 1000]}
YAML
  run_one random "$ASSETS/selection-random.yaml" "$base"
  [ -f /tmp/runs/random.done ] || exit 0
fi
for strategy in $STRATEGIES; do
  [ -f "/tmp/runs/$strategy.done" ] && continue
  left=$(( end - $(date +%s) ))
  [ "$left" -lt 60 ] && { echo "time left $left s: rerun to continue with $strategy"; exit 0; }
  run=/tmp/runs/selection-$strategy
  stage1_copy "$base" "$run"  # the base run without its EliCal models
  cat > "$ASSETS/selection-$strategy.yaml" <<YAML
name: smollm2-qa-full-relabelled6-selection-$strategy
qa: {pool: [], eval: [], records: $records}
train: {workers: ${WORKERS:-6}, methods: [eli-only, elical], budgets: [$SELECTED_BUDGETS], label_selection: $strategy}
YAML
  run_one "$strategy" "$ASSETS/selection-$strategy.yaml" "$run"
done
