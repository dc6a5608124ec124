#!/usr/bin/env bash
# Issue 21, third held-out round: SmolLM2-135M-Instruct's answers to fresh questions
# (benchmarks/labels_fresh_questions.py, carried as .gpu/q) with smollm2-qa-full's generation settings
# (paper prompt, 24 new tokens, bf16, fast_decode) and k=5 (a consistency pair is a greedy answer and one
# sample, whose distribution k does not change). Cheap judges here: the records are relabelled on a CPU.
# Assets as for run_preset_gpu.sh (EMBED=0 QA=0 GEO=0 N_PARTS=3 bash benchmarks/smollm2_geo_assets.sh), one
# call per part with carry [".gpu/pN"], then calls with carry [".gpu/q", ".gpu/head"] until it prints exit 0.
# Writes $OUT/annotate.log and $OUT/records.tgz.00, .01, ... (`cat records.tgz.* | tar -xzf -`).
set -uo pipefail
OUT=${OUT:-/tmp/out}
LIMIT_S=${LIMIT_S:-540}
RUN=/tmp/runs/labels-fresh
mkdir -p "$OUT"
# shellcheck source=benchmarks/gpu_setup.sh
source benchmarks/gpu_setup.sh || exit 1
[ "$GPU_READY" = 1 ] || exit 0
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/annotate.log"
cat > /tmp/labels-fresh.yaml <<YAML
annotate:
  k: 5
  max_new_tokens: 24
  fast_decode: true
  batch_size: 2560
  chunk_size: 512
  judges: {correctness: exact, consistency: exact, cache: true}
YAML
start=$(date +%s)
timeout "$LIMIT_S" python3 -m elical.cli annotate .gpu/q/*.jsonl .gpu/q/mmlu/* --out "$RUN" \
  --model "$ASSETS/smollm2-hf" --config /tmp/labels-fresh.yaml 2>&1 | grep -v "Loading weights" | tail -n 30 | tee -a "$OUT/annotate.log"
rc=${PIPESTATUS[0]}
echo "elical annotate: exit $rc after $(( $(date +%s) - start )) s (124: stopped at ${LIMIT_S} s; rerun to continue)" | tee -a "$OUT/annotate.log"
[ "$rc" = 0 ] && tar -czf /tmp/labels-fresh.tgz -C "$RUN" . && split -b 15M -d /tmp/labels-fresh.tgz "$OUT/records.tgz."
ls -la "$OUT"
