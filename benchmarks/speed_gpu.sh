#!/usr/bin/env bash
# Small-model speed options on one GPU (issue 15), each benchmark comparing its variants side by side in
# one process, alternating rounds after one warm-up (compile time printed apart):
#   bench_train.py:    SmolLM2-135M's architecture (random bf16 weights), elical's packed step at 32
#                      questions per step: base, bf16lora, fused, compile-layers, reduce-overhead, all
#                      -> $OUT/bench_train_smollm2.txt
#   bench_annotate.py: SmolLM2-135M-Instruct (real weights), k=20 samples per question: base (generate)
#                      and fast (fast_decode), at ANSWER_TOKENS new tokens -> $OUT/bench_annotate_smollm2.txt
#   bench_train.py:    Qwen2.5-7B's architecture (random bf16 weights): the authors' recipe and TRAIN7B_VARIANTS
#                      -> $OUT/bench_train_7b.txt
# BENCHES picks which run, in order (default "train_smollm2 annotate train_7b").
#
# GPU machine (../shared/docs/gpu.md: no network, 64 MiB per call, 10 min per command). The assets travel
# as for the other GPU scripts (benchmarks/gpu_setup.sh joins them in $ASSETS, installs the wheels the
# machine lacks and converts SmolLM2 to the HF folder $ASSETS/smollm2-hf). Build them here once:
#   QA=0 GEO=0 N_PARTS=3 bash benchmarks/smollm2_geo_assets.sh     # -> .gpu/p1 .gpu/p2 .gpu/p3
# then make these calls in a row from the repository root (the machine keeps $ASSETS and $RUN only while
# warm: if it was given back in between, start again at call 1):
#   1. carry [".gpu/p1"]  command: bash benchmarks/speed_gpu.sh       (stores the part)
#   2. carry [".gpu/p2"]  same command
#   3. carry [".gpu/p3"]  same command: sets the assets up, then runs the benchmarks that fit in the call
#   4. (no carry) same command, again until both files are there (a benchmark measured in an earlier call
#      is kept; one starts only with MIN_LEFT_TRAIN / MIN_LEFT_ANNOTATE seconds left).
# A machine still warm with those assets in place (e.g. after serve_latency_gpu.sh) needs no carry.
# BENCHES=train_7b (random weights) needs only the wheels, in one part and one call:
#   mkdir -p .gpu/pw && tar -czf .gpu/pw/part.00 -C .gpu/assets whl
#   carry [".gpu/pw"]  command: ASSETS=/tmp/w7 N_PARTS=1 BENCHES=train_7b bash benchmarks/speed_gpu.sh
# Options: TRAIN_BATCH ("32"; e.g. "32 128"), TRAIN_QUESTIONS (512), TRAIN_VARIANTS, REPEATS (3),
# ANSWER_TOKENS ("16 64"), TRAIN7B_VARIANTS, TRAIN7B_TOKENS ("8192").
set -uo pipefail
RUN=${RUN:-/tmp/speed-gpu}
OUT=${OUT:-/tmp/out}
LIMIT_S=${LIMIT_S:-570}
REPEATS=${REPEATS:-3}
TRAIN_BATCH=${TRAIN_BATCH:-32}
TRAIN_QUESTIONS=${TRAIN_QUESTIONS:-512}
TRAIN_VARIANTS=${TRAIN_VARIANTS:-base,bf16lora,fused,compile-layers,reduce-overhead,all}
MIN_LEFT_TRAIN=${MIN_LEFT_TRAIN:-300}
MIN_LEFT_ANNOTATE=${MIN_LEFT_ANNOTATE:-200}
BENCHES=${BENCHES:-train_smollm2 annotate train_7b}
ANSWER_TOKENS=${ANSWER_TOKENS:-16 64}
TRAIN7B_VARIANTS=${TRAIN7B_VARIANTS:-authors,compile-layers,flex-layers}
TRAIN7B_TOKENS=${TRAIN7B_TOKENS:-8192}
MIN_LEFT_7B=${MIN_LEFT_7B:-300}
start=$(date +%s)
mkdir -p "$OUT" "$RUN"
here=$(cd "$(dirname "$0")" && pwd)
left() { echo $(( LIMIT_S - ($(date +%s) - start) )); }

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
# shellcheck source=benchmarks/gpu_setup.sh
source "$here/gpu_setup.sh" || exit 1
[ "$GPU_READY" = 1 ] || exit 0

# bench NAME MIN_LEFT SCRIPT ARGS...: run one benchmark into $RUN/NAME.txt unless an earlier call did.
bench() {
  local name=$1 need=$2 rc
  shift 2
  if [ ! -f "$RUN/$name.txt" ]; then
    if [ "$(left)" -lt "$need" ]; then echo "$name: not started ($(left) s left of this call); rerun to measure it"; return 1; fi
    timeout "$(( $(left) - 5 ))" python3 "$@" > "$RUN/$name.tmp" 2>&1
    rc=$?
    grep -v "Loading weights\|Converting and de-quantizing\|Warning\|warnings.warn" "$RUN/$name.tmp" | tail -30
    cp "$RUN/$name.tmp" "$OUT/$name.log"
    if [ "$rc" -ne 0 ]; then echo "$name: exit $rc after $(( $(date +%s) - start )) s (124: out of time; rerun)"; return 1; fi
    mv "$RUN/$name.tmp" "$RUN/$name.txt"
  fi
  cp "$RUN/$name.txt" "$OUT/"
}

# shellcheck disable=SC2086  # TRAIN_BATCH, ANSWER_TOKENS, TRAIN7B_TOKENS: lists
for which in $BENCHES; do
  case $which in
    train_smollm2)  # its rounds start while the annotation benchmark still fits in the call after them
      budget=$(( $(left) - MIN_LEFT_ANNOTATE )); [ "$budget" -lt 150 ] && budget=150
      bench bench_train_smollm2 "$MIN_LEFT_TRAIN" "$here/bench_train.py" --size smollm2 --questions "$TRAIN_QUESTIONS" \
        --batch-size $TRAIN_BATCH --tokens-per-batch 4096 --variants "$TRAIN_VARIANTS" --repeats "$REPEATS" \
        --time-budget "$budget" ;;
    annotate)
      bench bench_annotate_smollm2 "$MIN_LEFT_ANNOTATE" "$here/bench_annotate.py" --size full --sections decode \
        --model "$ASSETS/smollm2-hf" --data "$ASSETS/data/qa" --repeats "$REPEATS" --max-new-tokens $ANSWER_TOKENS ;;
    train_7b)
      bench bench_train_7b "$MIN_LEFT_7B" "$here/bench_train.py" --size 7b --variants "$TRAIN7B_VARIANTS" \
        --tokens-per-batch $TRAIN7B_TOKENS --repeats "$REPEATS" --time-budget $(( $(left) - 60 )) ;;
    *) echo "unknown benchmark '$which' in BENCHES" ;;
  esac
done
echo "measured: $(cd "$RUN" && ls -- *.txt 2>/dev/null | tr '\n' ' ')after $(( $(date +%s) - start )) s"
