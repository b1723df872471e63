#!/usr/bin/env bash
# Capture the sample traces on an NVIDIA GPU machine (see ../shared/docs/capture-traces.md).
#
#   bash sample_traces/capture.sh OUTDIR
#
# Needs: python3 with torch + triton, the Nsight Systems bundled with Nsight Compute
# (override with NSYS=...), and libdw.so.1 + libelf.so.1 in .gpu-libs/ (or LD_LIBRARY_PATH).
# Produces in OUTDIR:
#   h200_scheduling.sqlite        single GPU, all ranges, CUDA graphs traced per node
#   h200_tiny_graphlevel.sqlite   single GPU, tiny-kernel ranges only, graphs traced whole (default)
#   h200x2_allreduce.sqlite       two GPUs (torchrun), exposed / overlapped / straggler all-reduce
#   *.facts.json                  what the workloads and compiler reported (grids, registers, smem)
set -euo pipefail
out=${1:?usage: capture.sh OUTDIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH="$here/../.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tmp=$(mktemp -d)
common=(--sample=none --cpuctxsw=none -f true)
"$NSYS" --version | tee "$out/nsys_version.txt"

capture() { # name, extra nsys args..., -- command...
  local name=$1; shift
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
  "$NSYS" profile "${common[@]}" "${args[@]}" -o "$tmp/$name" "$@"
  "$NSYS" export --type sqlite -f true -o "$out/$name.sqlite" "$tmp/$name.nsys-rep"
  ls -l "$out/$name.sqlite"
}

cd "$here/workloads"
CUDA_VISIBLE_DEVICES=0 capture h200_scheduling -t cuda,nvtx,osrt --cuda-graph-trace=node -- \
  python3 single_gpu_scheduling.py "$out/h200_scheduling.facts.json"
CUDA_VISIBLE_DEVICES=0 WORKLOAD_PARTS=tiny capture h200_tiny_graphlevel -t cuda,nvtx,osrt -- \
  python3 single_gpu_scheduling.py "$out/h200_tiny_graphlevel.facts.json"
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [ "$gpus" -ge 2 ]; then
  # no OS runtime tracing here: with NCCL threads it grows the export to >10 MB
  capture h200x2_allreduce -t cuda,nvtx -- \
    torchrun --standalone --nproc_per_node=2 two_gpu_allreduce.py "$out/h200x2_allreduce.facts.json"
else
  echo "only $gpus GPU(s): skipping the 2-GPU capture" >&2
fi
rm -rf "$tmp"
