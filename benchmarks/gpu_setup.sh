#!/usr/bin/env bash
# Sourced by the GPU scripts (benchmarks/*_gpu.sh), from the repository root on a GPU machine of
# ../shared/docs/gpu.md (no network, 64 MiB per call). Joins the asset parts that
# benchmarks/smollm2_geo_assets.sh built (carried one per call as .gpu/p1, .gpu/p2, ...) in $ASSETS,
# installs the wheels of the packages the machine lacks, and converts SmolLM2's GGUF file to an HF folder once.
# Sets GPU_READY=1 when everything is in place; GPU_READY=0 while parts are still missing (send the next).
ASSETS=${ASSETS:-/tmp/w}
N_PARTS=${N_PARTS:-3}
GPU_READY=0
mkdir -p "$ASSETS/parts"
for part in .gpu/p*/part.*; do [ -f "$part" ] && mv "$part" "$ASSETS/parts/"; done
if [ ! -f "$ASSETS/.complete" ]; then
  have=$(find "$ASSETS/parts" -name 'part.*' | wc -l)
  if [ "$have" -lt "$N_PARTS" ]; then echo "assets: $have of $N_PARTS parts in $ASSETS/parts; send the next"; return 0; fi
  cat "$ASSETS"/parts/part.* | tar -xzf - -C "$ASSETS" && touch "$ASSETS/.complete" && rm -rf "$ASSETS/parts" || return 1
fi
# Packages this machine lacks, from the wheels (never shadow an installed torch stack).
python3 - "$ASSETS" <<'PY' || return 1
import importlib.metadata as md, pathlib, subprocess, sys
assets = pathlib.Path(sys.argv[1])
def installed(wheel):
    try:
        md.version(wheel.name.split("-")[0].replace("_", "-"))
        return True
    except md.PackageNotFoundError:
        return False
missing = [str(w) for w in sorted((assets / "whl").glob("*.whl")) if not installed(w)]
try:  # elical's folder lock needs filelock >= 4.3 (preserve_lock_file); an older one is shadowed from site/
    from filelock import FileLock
    FileLock("/tmp/elical-check.lock", preserve_lock_file=True)
except TypeError:
    missing += [str(w) for w in (assets / "whl").glob("filelock-*.whl")]
if missing and not (assets / "site" / ".installed").exists():
    print("installing", sorted({pathlib.Path(w).name.split("-")[0] for w in missing}))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--upgrade", "--target", str(assets / "site"), *missing], check=True)
    (assets / "site" / ".installed").touch()
PY
# ELICAL_SRC: another copy of the package (e.g. the committed code carried in .gpu/head/src)
export PYTHONPATH=${ELICAL_SRC:-$PWD/src}:$ASSETS/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 \
  TOKENIZERS_PARALLELISM=false
# SmolLM2 as an HF folder, once: every later model load skips GGUF de-quantization (wheels-only assets,
# for the random-weight benchmarks, carry no GGUF file).
if [ -f "$ASSETS/SmolLM2-135M-Instruct.Q4_1.gguf" ] && [ ! -f "$ASSETS/smollm2-hf/config.json" ]; then
  python3 - "$ASSETS" <<'PY' || return 1
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
# stage1_copy BASE RUN: a new run folder RUN that keeps BASE's records and Eli-Only models (their scores and settings
# too), so another run there trains its EliCal models from the same stage 1 (stage2_recipes_gpu.sh, label_selection_gpu.sh)
stage1_copy() {
  [ -d "$2" ] && return 0
  mkdir -p "$2" && cp -r "$1/records" "$1/annotate" "$2/" 2>/dev/null
  mkdir -p "$2/models" "$2/scores" "$2/settings"
  cp -r "$1"/models/eli-only-* "$2/models/" && cp "$1"/scores/eli-only-* "$2/scores/"
  cp "$1"/settings/annotate.json "$1"/settings/train-eli-only-* "$2/settings/"
}
# The presets read ../shared/data beside the checkout: a work folder where ../shared/data is the carried data.
mkdir -p "$ASSETS/cwd/work" "$ASSETS/cwd/shared" && ln -sfn "$ASSETS/data" "$ASSETS/cwd/shared/data"
GPU_READY=1
# The lent machine sets PYTHONDONTWRITEBYTECODE=1 and its torch ships no .pyc files, so every process compiles torch's
# modules again (~15 s of each command's start-up on an H100: benchmarks/results/bench_annotate_whole_session8_h100.txt),
# where a pip install leaves them compiled. BYTECODE=1 (default) compiles them once into $ASSETS/pycache, as a user's
# install has them; BYTECODE=0 keeps the machine as it is (the figures of sessions before 2026-11-27's eighth).
if [ "${BYTECODE:-1}" = 1 ]; then
  unset PYTHONDONTWRITEBYTECODE
  export PYTHONPYCACHEPREFIX=$ASSETS/pycache
  [ -f "$ASSETS/pycache/.done" ] || { python3 -c "import elical.cli.main, elical.annotate.pipeline, elical.annotate.judge_models, \
elical.annotate.judge_pool, elical.train, transformers.models.llama.modeling_llama, transformers.generation.utils, \
sentence_transformers, sklearn.metrics" >/dev/null 2>&1; mkdir -p "$ASSETS/pycache" && touch "$ASSETS/pycache/.done"; }
fi
