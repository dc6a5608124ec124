#!/usr/bin/env bash
# Issue 23: EliCal's calibration recipes (train.stage2: full, head, platt, mixed) on SmolLM2, 3 seeds, from the
# generations of benchmarks/labels_gpu.sh relabelled on a CPU by match@5 / answer@4 (benchmarks/labels_relabel.py).
# 1. base: `elical run --preset smollm2-qa-full` from those records (qa.records: nothing generated): Eli-Only,
#    Cal-Only and EliCal (full) at 100 / 300 / 1000 / all labels; this is also issue 21's re-measurement.
# 2. one run per other recipe in a copy of the base folder that keeps its records and Eli-Only models, so
#    EliCal's stage 2 starts from the same stage 1 (budgets 100 / 300 / 1000).
# Assets: EMBED=0 QA=0 GEO=0 N_PARTS=3 bash benchmarks/smollm2_geo_assets.sh after copying the relabelled records
# into $ASSETS/rec/paper/{train,eval}.parquet; one call per part with carry [".gpu/pN"] (and ".gpu/head", the
# committed src: git archive HEAD src | tar -x -C .gpu/head) and this command, then more calls until it ends.
# Writes $OUT/<recipe>/ (run.log, run.tgz.*); benchmarks/stage2_recipes.py tabulates them on a CPU.
set -uo pipefail
OUT=${OUT:-/tmp/out}
LIMIT_S=${LIMIT_S:-560}
RECIPES=${RECIPES:-"head platt mixed"}
# BASE_TRAIN: more train settings of the base run, e.g. 'methods: [eli-only, elical], budgets: [100, 300, 1000]'
# (12 models instead of 27: no Cal-Only and no all-labels models; the tabulator then prints n/a for them)
BASE_TRAIN=${BASE_TRAIN:-}
# EXTRA: more stage-2 settings of every recipe run, e.g. 'stage2_refit: true'; TAG then names those runs
# (<recipe>-<TAG>), so they sit beside the plain recipes' runs
EXTRA=${EXTRA:-}
TAG=${TAG:-}
[ -d .gpu/head/src ] && export ELICAL_SRC=$PWD/.gpu/head/src
# shellcheck source=benchmarks/gpu_setup.sh
source benchmarks/gpu_setup.sh || exit 1
[ "$GPU_READY" = 1 ] || exit 0
end=$(( $(date +%s) + LIMIT_S ))
records="[$ASSETS/rec/paper/train.parquet, $ASSETS/rec/paper/eval.parquet]"
cat > "$ASSETS/recipe-full.yaml" <<YAML
name: smollm2-qa-full-relabelled5
qa: {pool: [], eval: [], records: $records}
train: {workers: ${WORKERS:-6}${BASE_TRAIN:+, $BASE_TRAIN}}
YAML
base=/tmp/runs/recipe-full
if [ ! -f "$OUT/full/done" ] && [ ! -f /tmp/runs/full.done ]; then
  mkdir -p "$OUT/full"
  PRESET=smollm2-qa-full CONFIG=$ASSETS/recipe-full.yaml RUN=$base OUT=$OUT/full LIMIT_S=$(( end - $(date +%s) )) \
    bash benchmarks/run_preset_gpu.sh > "$OUT/full/console.txt" 2>&1 && touch /tmp/runs/full.done
  tail -n 2 "$OUT/full/console.txt"
  [ -f /tmp/runs/full.done ] || exit 0
fi
for plain in $RECIPES; do
  recipe=$plain${TAG:+-$TAG}
  [ -f "/tmp/runs/$recipe.done" ] && continue
  left=$(( end - $(date +%s) ))
  [ "$left" -lt 60 ] && { echo "time left $left s: rerun to continue with $recipe"; exit 0; }
  run=/tmp/runs/recipe-$recipe
  stage1_copy "$base" "$run"  # the base run without its Cal-Only and EliCal models
  cat > "$ASSETS/recipe-$recipe.yaml" <<YAML
name: smollm2-qa-full-relabelled5-$recipe
qa: {pool: [], eval: [], records: $records}
train: {workers: ${WORKERS:-6}, methods: [eli-only, elical], budgets: [100, 300, 1000], settings: {stage2: $plain${EXTRA:+, $EXTRA}}}
YAML
  mkdir -p "$OUT/$recipe"
  PRESET=smollm2-qa-full CONFIG=$ASSETS/recipe-$recipe.yaml RUN=$run OUT=$OUT/$recipe LIMIT_S=$left \
    bash benchmarks/run_preset_gpu.sh > "$OUT/$recipe/console.txt" 2>&1 && touch "/tmp/runs/$recipe.done"
  tail -n 2 "$OUT/$recipe/console.txt"
done
