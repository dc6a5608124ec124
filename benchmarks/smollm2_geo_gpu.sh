#!/usr/bin/env bash
# `elical run --preset smollm2-geo-full` on one GPU machine (../shared/docs/gpu.md), from the repository root:
# benchmarks/run_preset_gpu.sh with that preset (its header says how the assets travel in parts and how a
# stopped run resumes). Measured with it: benchmarks/results/smollm2_geo_full_h200*.
PRESET=smollm2-geo-full RUN=${RUN:-runs/smollm2-geo-full} exec bash "$(dirname "$0")/run_preset_gpu.sh"
