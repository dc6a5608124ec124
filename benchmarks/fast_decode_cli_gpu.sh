#!/usr/bin/env bash
# `elical annotate` end to end on the GPU machine with and without --fast-decode, alternating (A B A B ...):
# SmolLM2-135M-Instruct, k=20, LIMIT questions of each ../shared/data/qa file, BATCH sequences per call,
# the match judges (no embedding model needed). Prints each run's wall time and the ratio per pair.
# Assets as for speed_gpu.sh (carry .gpu/p1, .gpu/p2, then .gpu/p3 with this command; see that script).
set -uo pipefail
LIMIT=${LIMIT:-100}
BATCH=${BATCH:-1280}
ROUNDS=${ROUNDS:-2}
RUN=${RUN:-/tmp/fast-decode-cli}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=benchmarks/gpu_setup.sh
source "$here/gpu_setup.sh" >/dev/null || exit 1
[ "$GPU_READY" = 1 ] || { echo "assets not complete: send the next part"; exit 0; }
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf "$RUN"
for round in $(seq "$ROUNDS"); do
  for mode in no-fast-decode fast-decode; do
    start=$(date +%s%N)
    python3 -m elical.cli annotate "$ASSETS"/data/qa/*.jsonl --model "$ASSETS/smollm2-hf" --k 20 --limit "$LIMIT" \
      --batch-size "$BATCH" --consistency-judge match --"$mode" --out "$RUN/$mode-$round" > "$RUN.log" 2>&1 \
      || { tail -20 "$RUN.log"; exit 1; }
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    echo "round $round --$mode: $(( ms / 1000 )).$(printf %03d $(( ms % 1000 ))) s, $(grep -o 'Wrote [0-9]* records' "$RUN.log")"
  done
done
