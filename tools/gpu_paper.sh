#!/usr/bin/env bash
# The whole GPU paper end to end on one lent card, with one reproduce command; what came
# back in $OUT.
#   OUT=/some/dir bash tools/gpu_paper.sh SECONDS [PRECISION]
# Needs .gpu/data.tar.xz (tools/gpu_data.py: the images the GPU grids read). In order: the
# batched-clients tests on the card, benchmarks/bench_batched_steps.py (eager against
# batched steps, one run alone), then every GPU grid with batched clients into a scratch
# folder (PRECISION, or the most exact one within 15 % of the fastest in the benchmark),
# the card sampled every second (gpu.csv), packed as scratch.tgz; stopped SECONDS after
# the start of this script. RESUME=1 (on the same warm machine, with PRECISION) skips to the
# grids, which go on from the runs already in the scratch folder.
set -u
deadline=$1
precision=${2:-}
out=${OUT:?set OUT to the folder that comes back}
t0=$(date +%s)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD HCCT_DATA_DIR=/tmp/hcct-data
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
[ -n "${RESUME:-}" ] || python3 tools/gpu_data.py --unpack .gpu/data.tar.xz --to "$HCCT_DATA_DIR" \
  || exit 1
source tools/gpu_mps.sh
echo "MPS $mps after $(($(date +%s) - t0)) s"

[ -n "${RESUME:-}" ] || timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_batched.py -k gpu 2>&1 | tail -4
echo "tests done after $(($(date +%s) - t0)) s"
if [ -z "$precision" ]; then
  timeout 150 python3 benchmarks/bench_batched_steps.py --json "$out/bench.json" \
    | tee "$out/bench.md"
  precision=$(python3 -c '
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"] if r["task"] == "digit"]
rate = {r["mode"].split("-")[1]: r["steps_per_s"] for r in rows if r["mode"] != "eager"}
print(next(p for p in ("default", "tf32", "bf16") if rate[p] >= 0.85 * max(rate.values())))
' "$out/bench.json" 2> /dev/null || echo default)
  echo "bench done after $(($(date +%s) - t0)) s; precision $precision"
fi

nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,power.draw,clocks.sm \
  --format=csv,noheader,nounits -l 1 > "$out/gpu.csv" 2>&1 &
smi=$!
grids="schemes-digit schemes-cifar10 ablation-digit incoming-cifar10 alpha-cifar10"
grids="$grids fixed-k-digit k-vs-n-digit"
start=$(date +%s)
left=$((deadline - (start - t0) - 20))
[ "$left" -gt 10 ] || left=10
# shellcheck disable=SC2086  # the grid list is meant to split
timeout "$left" python3 -m hcct_lite.cli reproduce --grids $grids --device cuda \
  --workers "${WORKERS:-8}" --batched-clients --gpu-precision "$precision" --norm-limit 0 \
  --out /tmp/scratch --no-report > "$out/reproduce.log" 2>&1
status=$?
end=$(date +%s)
kill $smi 2> /dev/null
done_runs=$(find /tmp/scratch -name '*.json' | wc -l)
echo "reproduce exit $status: $done_runs of 270 runs in $((end - start)) s ($precision)"
grep -E "^(FAILED|[0-9]+ runs)" "$out/reproduce.log" | head -5
tail -3 "$out/reproduce.log"
tar czf "$out/scratch.tgz" -C /tmp/scratch .
echo "packed after $(($(date +%s) - t0)) s"
