#!/usr/bin/env bash
# Issue 24, item 2: does fast_decode decode as generate does, on 1,000 SmolLM2 questions of ../shared/data/qa?
# (bench_annotate.py --sections agreement: greedy answers equal, with generate's own agreement at another
# batch size as the bf16 floor; sampled answers' length, log-prob and agreement with the greedy answer,
# fast - generate against generate - generate with another seed.) SmolLM2-135M-Instruct bf16, k=20, at
# TOKENS new tokens. Assets and calls as for annotate_whole_gpu.sh (carry .gpu/p1.. one per call; the
# committed code in .gpu/head: ELICAL_SRC=$PWD/.gpu/head/src).
#   ELICAL_SRC=$PWD/.gpu/head/src N_PARTS=4 bash benchmarks/fast_decode_agreement_gpu.sh
set -uo pipefail
QUESTIONS=${QUESTIONS:-1000}
TOKENS=${TOKENS:-24 64}
OUT=${OUT:-/tmp/out}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=benchmarks/gpu_setup.sh
source "$here/gpu_setup.sh" >/dev/null || exit 1
[ "$GPU_READY" = 1 ] || { echo "assets not complete: send the next part"; exit 0; }
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/fast_decode_agreement.txt"
# shellcheck disable=SC2086  # TOKENS: a list
python3 "$here/bench_annotate.py" --size full --sections agreement --questions "$QUESTIONS" --max-new-tokens $TOKENS \
  --model "$ASSETS/smollm2-hf" --data "$ASSETS/data/qa" 2>&1 | grep -v -E "Loading weights|it/s\]" | tee -a "$OUT/fast_decode_agreement.txt"
