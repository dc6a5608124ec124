#!/usr/bin/env bash
# The GPU run that produced the packaged world LM: several variants trained side by side on one GPU,
# each checkpoint tarred into $OUT with its log (at most 8 files come back). Usage: bash benchmarks/world_lm_gpu.sh
set -u
export PYTHONPATH=src HF_HUB_OFFLINE=1
OUT=${OUT:-/tmp/out}
W=/tmp/wlm
mkdir -p "$W" "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
run() {  # variant tag steps
  python benchmarks/world_lm.py --out "$W" --variant "$1" --tag "$2" --steps "$3" > "$OUT/$1$2.log" 2>&1
  tar -C "$W" -cf "$OUT/$1$2.tar" "$1$2"
}
run h192 -s8k 8000 &
run h256 -s8k 8000 &
run h192 -s3k 3000 &
run h128 -s8k 8000 &
wait
tail -n 3 "$OUT"/*.log
