#!/usr/bin/env bash
# Issue 21: real SmolLM2-135M-Instruct outputs for the labelled sets and the prompt comparison. Annotates the
# questions of `elical run --preset smollm2-qa-full` twice on one GPU machine, side by side: with the paper's
# prompt (benchmarks/configs/labels_annotate_only.yaml) and with the short-answer prompt
# (labels_short_prompt.yaml); each run evaluates the training-free baselines and trains nothing. Their
# records come back; the judges relabel them on a CPU (benchmarks/labels_relabel.py).
# Assets as for run_preset_gpu.sh (QA=1 GEO=0 N_PARTS=3 bash benchmarks/smollm2_geo_assets.sh), one call per
# part with carry [".gpu/pN"] and this command, then more calls (no carry) until both runs print exit 0.
# Writes $OUT/paper/ and $OUT/short/ (run.log, run.tgz.*).
set -uo pipefail
OUT=${OUT:-/tmp/out}
LIMIT_S=${LIMIT_S:-540}
# shellcheck source=benchmarks/gpu_setup.sh
source benchmarks/gpu_setup.sh || exit 1
[ "$GPU_READY" = 1 ] || exit 0
for style in paper short; do
  config=benchmarks/configs/labels_annotate_only.yaml
  [ "$style" = short ] && config=benchmarks/configs/labels_short_prompt.yaml
  mkdir -p "$OUT/$style"
  PRESET=smollm2-qa-full CONFIG=$config RUN=/tmp/runs/qa-$style OUT=$OUT/$style LIMIT_S=$LIMIT_S \
    bash benchmarks/run_preset_gpu.sh > "$OUT/$style/console.txt" 2>&1 &
done
wait
tail -n 4 "$OUT"/*/console.txt
