# Sourced by the GPU tools: start CUDA MPS where the machine can (the same kernels, so the
# same arithmetic; processes' kernels overlap instead of taking turns). Needs $out; sets $mps.
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
mps=off
# A daemon left by an earlier command on the same machine is kept, not started twice.
if { echo get_server_list | nvidia-cuda-mps-control > /dev/null 2>&1 \
  || nvidia-cuda-mps-control -d 2> "$out/mps.txt"; } \
  && timeout 60 python3 -c 'import torch; assert torch.ones(8, device="cuda").sum().item() == 8'; then
  mps=on
else
  echo quit | nvidia-cuda-mps-control 2> /dev/null
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
