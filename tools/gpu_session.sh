#!/usr/bin/env bash
# One lease of a GPU machine: the missing runs of the given grids before a deadline, the
# card sampled every 2 s, and what came back packed into $OUT.
#   OUT=/some/dir HCCT_DATA_DIR=... bash tools/gpu_session.sh SECONDS GRID...
# Runs share the card through CUDA MPS where the machine can start it (tools/gpu_mps.sh).
set -u
deadline=$1
shift
out=${OUT:?set OUT to the folder that comes back}
t0=$(date +%s)
touch /tmp/gpu-session-start
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
python3 -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)'

source tools/gpu_mps.sh
echo "MPS $mps after $(($(date +%s) - t0)) s" | tee -a "$out/mps.txt"

nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,memory.total \
  --format=csv,noheader,nounits -l 2 > "$out/gpu.csv" 2>&1 &
smi=$!

export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
left=$((deadline - ($(date +%s) - t0)))
# shellcheck disable=SC2086  # GRID_ARGS is meant to split
timeout $((left + 80)) python3 -m hcct_lite.cli reproduce --grids "$@" --device cuda \
  --workers "${WORKERS:-13}" --deadline "$left" --run-log "$out/runs.jsonl" --reuse-older \
  --quiet --no-report ${GRID_ARGS:-} 2>&1 | tee "$out/grid.log"
kill $smi 2> /dev/null
find results -name '*.json' -newer /tmp/gpu-session-start -print0 \
  | tar czf "$out/results.tgz" --null -T -
echo "packed $(tar tzf "$out/results.tgz" | wc -l) result files after $(($(date +%s) - t0)) s"
