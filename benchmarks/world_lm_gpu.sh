#!/usr/bin/env bash
# The GPU run that produced the packaged world LM: several variants trained side by side on one GPU,
# each checkpoint tarred into $OUT with its log (at most 8 files come back). Usage: bash benchmarks/world_lm_gpu.sh
set -u
export PYTHONPATH=src HF_HUB_OFFLINE=1
OUT=${OUT:-/tmp/out}
W=/tmp/wlm
mkdir -p "$W" "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
run() {  # variant tag steps [extra args]
  local v=$1 tag=$2 steps=$3; shift 3
  python benchmarks/world_lm.py --out "$W" --variant "$v" --tag="$tag" --steps "$steps" --time-limit "${TIME_LIMIT:-420}" "$@" > "$OUT/$v$tag.log" 2>&1
  tar -C "$W" -cf "$OUT/$v$tag.tar" "$v$tag"
}
# VARIANTS="h192:-s8k:8000 h256:-s8k:8000" overrides the set below (variant:tag:steps[:probe_every[:config]])
for spec in ${VARIANTS:-h256l2:-s8k:8000 h192:-s8k:8000 h256l2:-qa50:8000:1000:benchmarks/world_lm_qa50.yaml h128l2:-s8k:8000}; do
  IFS=: read -r v tag steps probe config <<< "$spec"
  run "$v" "$tag" "$steps" --probe-every "${probe:-1000}" ${config:+--config "$config"} &
done
wait
tail -n 3 "$OUT"/*.log
