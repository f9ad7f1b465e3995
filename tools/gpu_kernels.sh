#!/usr/bin/env bash
# What the batched step's kernels cost on a lent card, and where the rest of an epoch goes;
# what came back in $OUT.
#   OUT=/some/dir bash tools/gpu_kernels.sh SECONDS
# Needs .gpu/bench.tar.xz (tools/gpu_data.py --benchmarks). In order, each under its own
# limit, none started with too little of SECONDS left: the batched-clients and Triton
# convolution tests on the card; benchmarks/bench_batched_kernels.py with the convolutions
# as Triton kernels against cuDNN's (20 and 80 clients, float32 and bf16, two profiled); the
# other variants of one batched step of 20 clients (eager and as a CUDA graph, two
# profiled; four variants again at 80 clients);
# benchmarks/bench_batched_steps.py without and with cuDNN's benchmark (one run alone);
# benchmarks/bench_epoch_phases.py (a batched CIFAR-10 run's epoch by phase); the batched
# step's forward pass through torch.compile.
set -u
deadline=$1
out=${OUT:?set OUT to the folder that comes back}
t0=$(date +%s)
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
stage 180 tests python3 -m pytest -q -p no:cacheprovider tests/test_batched.py \
  tests/test_triton_conv.py -k gpu
stage 200 triton python3 benchmarks/bench_batched_kernels.py --clients 20 80 \
  --variants grouped triton "grouped, bf16" "triton, bf16" --json "$out/triton.json" \
  --profile "$out/profile-triton.txt" --profile-variants "grouped, bf16" "triton, bf16"
stage 200 kernels python3 benchmarks/bench_batched_kernels.py --clients 20 \
  --json "$out/kernels.json" --profile "$out/profile.txt"
stage 150 "kernels, 80 clients" python3 benchmarks/bench_batched_kernels.py --clients 80 \
  --variants "grouped, bf16" "grouped, bf16, input-first products" grouped \
  "grouped, channels_last" --json "$out/kernels-80.json"
for flag in "" --cudnn-benchmark; do
  # shellcheck disable=SC2086  # an empty flag is no argument
  stage 90 "runs $flag" python3 benchmarks/bench_batched_steps.py $flag --epochs 4 \
    --modes batched-default batched-bf16 --json "$out/runs${flag:+-benchmark}.json"
done
stage 60 phases python3 benchmarks/bench_epoch_phases.py --task cifar10 --device cuda \
  --epochs 5 --batched bf16
stage 150 compiled python3 benchmarks/bench_batched_kernels.py --clients 20 \
  --variants grouped "grouped, compiled" --json "$out/compiled.json"
echo "done after $(since) s"
