mkdir -p $OUT/world $OUT/geo
cp /tmp/runs/world_pool_all/results.csv $OUT/world/world_pool_all-results.csv; cp /tmp/runs/world_pool_all/timings.json $OUT/world/world_pool_all-timings.json
(for i in $(seq 60); do [ -f /tmp/w/smollm2-hf/config.json ] && break; sleep 2; done
 PRESET=smollm2-geo-full CONFIG=benchmarks/configs/geo_retrieval.yaml RUN=/tmp/runs/geo-retrieval OUT=$OUT/geo LIMIT_S=545 bash benchmarks/run_preset_gpu.sh > $OUT/geo/stdout.log 2>&1) &
PRESET=smollm2-qa-full CONFIG=benchmarks/configs/gpu_workers.yaml LIMIT_S=550 bash benchmarks/run_preset_gpu.sh | grep -v "epoch\|resource_tracker\|warnings.warn"
wait
tail -5 $OUT/geo/stdout.log
