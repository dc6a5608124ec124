#!/usr/bin/env bash
# Issue 24: one fast_decode batch of an annotation under torch.profiler on the GPU machine (benchmarks/decode_step_profile.py):
# SmolLM2 bf16, ROWS sequences per call (4096: 204 prompts x 20 samples), 24 new tokens. Assets and calls as for
# annotate_whole_gpu.sh (ELICAL_SRC=$PWD/.gpu/head/src N_PARTS=4 bash benchmarks/decode_step_profile_gpu.sh).
set -uo pipefail
ROWS=${ROWS:-4096}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=benchmarks/gpu_setup.sh
source "$here/gpu_setup.sh" >/dev/null || exit 1
[ "$GPU_READY" = 1 ] || { echo "assets not complete: send the next part"; exit 0; }
python3 "$here/decode_step_profile.py" --model "$ASSETS/smollm2-hf" --data "$ASSETS/data/qa" --rows "$ROWS" --k 20 \
  --max-new-tokens 24 2>&1 | grep -v -E "it/s\]|Loading weights|USDT"
