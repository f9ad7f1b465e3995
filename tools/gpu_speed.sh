#!/usr/bin/env bash
# Eager against CUDA-graph local steps on a lent GPU, for one task; what came back in $OUT.
#   OUT=/some/dir HCCT_DATA_DIR=... bash tools/gpu_speed.sh digit|cifar10 [GRID_SECONDS]
# The CUDA-graph tests, benchmarks/bench_gpu_steps.py under CUDA MPS, and, given
# GRID_SECONDS, the task's Table IV grid with graphs into a scratch folder (seed 0 first),
# packed as scratch.tgz for a comparison with the shipped results.
set -u
task=$1
grid_seconds=${2:-0}
out=${OUT:?set OUT to the folder that comes back}
t0=$(date +%s)
nvidia-smi > "$out/nvidia-smi-$task.txt" 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
source tools/gpu_mps.sh
echo "MPS $mps after $(($(date +%s) - t0)) s"

if [ "$task" = digit ]; then  # the graphs' tests need no data; once per lease is enough
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 180 \
    python3 -m pytest -q -p no:cacheprovider tests/test_cuda_graphs.py 2>&1 | tail -15
  echo "tests done after $(($(date +%s) - t0)) s"
fi

procs="1 8"
[ "$task" = digit ] && procs="1 4 8"
clients=""
[ "$task" = digit ] && clients="--clients 20"
# shellcheck disable=SC2086  # the lists are meant to split
timeout 300 python3 benchmarks/bench_gpu_steps.py --task "$task" $clients --epochs 6 \
  --procs $procs 2>&1 | tee "$out/bench-$task.md"
echo "bench done after $(($(date +%s) - t0)) s"

if [ "$grid_seconds" -gt 0 ]; then
  scratch=/tmp/scratch-$task
  mkdir -p "$scratch"
  timeout $((grid_seconds + 60)) python3 -m hcct_lite.cli reproduce --grids "schemes-$task" \
    --device cuda --out "$scratch" --workers 9 --deadline "$grid_seconds" --cuda-graphs \
    --norm-limit 0 --run-log "$out/runs-$task.jsonl" --quiet --no-report 2>&1 | tail -30
  tar czf "$out/scratch-$task.tgz" -C "$scratch" .
  echo "grid done after $(($(date +%s) - t0)) s"
fi
