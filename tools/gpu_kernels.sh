#!/usr/bin/env bash
# The Triton convolution of many clients tuned on a lent card, then one batched step with
# its tuned blocks against cuDNN's; what came back in $OUT.
#   OUT=/some/dir bash tools/gpu_kernels.sh SECONDS
# Needs .gpu/bench.tar.xz (tools/gpu_data.py --benchmarks). In order, each under its own
# limit, none started with too little of SECONDS left: the batched-clients and Triton
# convolution tests on the card; benchmarks/bench_triton_blocks.py (each pass of each of
# the paper's convolutions at 20 clients in bf16, every candidate block size against
# cuDNN's pass, the most arithmetic first); benchmarks/bench_batched_kernels.py, cuDNN's
# grouped convolutions against the Triton ones with the sweep's blocks (20 and 80 clients,
# bf16, the Triton step profiled). SECONDS: what the lease leaves this command, its start
# counted (a cold start took about 35 s). The whole output is also $OUT/log.txt. If the last
# stage is cut, it can run alone on the warm machine with the returned blocks.json carried.
# The stages that measured the other variants, runs alone and an epoch's phases are in
# results/README.md with their commands.
set -u
deadline=$1
out=${OUT:?set OUT to the folder that comes back}
t0=$(date +%s)
exec > >(tee -a "$out/log.txt") 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD HCCT_DATA_DIR=/tmp/hcct-data

since() { echo $(($(date +%s) - t0)); }
stage() { # stage LIMIT NAME COMMAND...: COMMAND under LIMIT s, or what is left of SECONDS
  local limit=$1 name=$2 left
  shift 2
  left=$((deadline - $(since) - 5))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 20 ]; then
    echo "== $name: not started, $((left + 5)) s left"
    return
  fi
  echo "== $name (at most $limit s) after $(since) s"
  timeout "$limit" "$@"
  echo "== $name: exit $? after $(since) s"
}

nvidia-smi > "$out/nvidia-smi.txt" 2>&1
python3 tools/gpu_data.py --unpack .gpu/bench.tar.xz --to "$HCCT_DATA_DIR" || exit 1
stage 120 tests python3 -m pytest -q -p no:cacheprovider tests/test_batched.py \
  tests/test_triton_conv.py -k gpu
# 284 settings, about 1 s each when compiled one after another: compiled first in 14
# processes (at most 150 s, then as it goes); the sweep starts no pass after --seconds, and
# the last one started needs up to about 40 s more
stage 330 blocks python3 benchmarks/bench_triton_blocks.py --clients 20 --precompile 14 \
  --json "$out/blocks.json" --seconds 285
blocks=()
[ -s "$out/blocks.json" ] && blocks=(--triton-blocks "$out/blocks.json")
stage 200 "tuned step" python3 benchmarks/bench_batched_kernels.py --clients 20 80 \
  --variants "grouped, bf16" "triton, bf16" ${blocks[@]+"${blocks[@]}"} --json "$out/triton.json" \
  --profile "$out/profile-triton.txt" --profile-variants "triton, bf16"
echo "done after $(since) s"
