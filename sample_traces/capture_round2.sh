#!/usr/bin/env bash
# Capture the second-round held-out traces on an NVIDIA GPU machine.
#
#   bash sample_traces/capture_round2.sh OUTDIR [evidence|gate|gate2|all]
#
# evidence: gemm_evidence.py and train_steps.py, each as an nsys export and a torch.profiler
#           (Kineto) JSON of the same workload (two runs: the profilers cannot share CUPTI)
# gate:     gate_steps.py runs for the gate noise study: base x4 (the first with an empty
#           Triton cache: a cold start), slow_gemm x3, sync x3, launch x3; packed into
#           OUTDIR/gate_runs.tar.xz with their facts
# gate2:    the same workload, 18 runs interleaved and pinned to 4 cores: base x6 (the first
#           cold), slow_gemm x3, sync x3, launch x3 with SPIN_NS=2000 (gate_runs2.tar.xz)
# gate3:    held-out gate set, torch.profiler (Kineto) traces of gate_mlp.py (cuBLAS GEMMs,
#           ProfilerStep#N): base x6 (the first cold), slow_gemm, sync, launch (+8
#           launches/step), spin (2 us host time per small op) x3 each, interleaved; then 8
#           base runs without any profiler (host step times only) (gate_runs3.tar.xz)
# Needs what capture.sh needs (NSYS, .gpu-libs with libdw/libelf).
set -euo pipefail
out=${1:?usage: capture_round2.sh OUTDIR [evidence|gate|gate2|all]}
what=${2:-all}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH="$here/../.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tmp=$(mktemp -d)
common=(--sample=none --cpuctxsw=none -f true)

capture() { # name, extra nsys args..., -- command...
  local name=$1; shift
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
  "$NSYS" profile "${common[@]}" "${args[@]}" -o "$tmp/$name" "$@" > "$tmp/$name.log" 2>&1 \
    || { tail -20 "$tmp/$name.log"; return 1; }
  "$NSYS" export --type sqlite -f true -o "$out/$name.sqlite" "$tmp/$name.nsys-rep" > /dev/null
  ls -l "$out/$name.sqlite"
}

cd "$here/workloads"
if [ "$what" = evidence ] || [ "$what" = all ]; then
  export TRITON_CACHE_DIR=$tmp/triton-evidence
  capture h200_gemm_evidence -t cuda,nvtx --capture-range=cudaProfilerApi \
    --capture-range-end=stop -- python3 gemm_evidence.py "$out/h200_gemm_evidence.facts.json" nsys
  python3 gemm_evidence.py "$out/h200_gemm_evidence.kineto.facts.json" kineto \
    "$tmp/h200_gemm_evidence.pt.trace.json" > /dev/null
  gzip -9 -c "$tmp/h200_gemm_evidence.pt.trace.json" > "$out/h200_gemm_evidence.pt.trace.json.gz"
  capture h200_train_steps -t cuda,nvtx -- \
    python3 train_steps.py "$out/h200_train_steps.facts.json" nsys
  python3 train_steps.py "$out/h200_train_steps.kineto.facts.json" kineto \
    "$tmp/h200_train_steps.pt.trace.json" > /dev/null
  gzip -9 -c "$tmp/h200_train_steps.pt.trace.json" > "$out/h200_train_steps.pt.trace.json.gz"
  ls -l "$out"
fi
if [ "$what" = gate ] || [ "$what" = all ]; then
  g=$tmp/gate; mkdir -p "$g"
  export TRITON_CACHE_DIR=$tmp/triton-gate   # empty: the first run compiles (cold start)
  run() { # name variant
    VARIANT=$2 capture "gate_$1" -t cuda,nvtx -- python3 gate_steps.py "$g/gate_$1.facts.json"
    mv "$out/gate_$1.sqlite" "$g/"
  }
  run base1_cold base; run base2 base; run base3 base; run base4 base
  for i in 1 2 3; do run "slow_gemm$i" slow_gemm; run "sync$i" sync; run "launch$i" launch; done
  tar -C "$g" -cJf "$out/gate_runs.tar.xz" .
  ls -l "$out/gate_runs.tar.xz"
fi
if [ "$what" = gate2 ]; then
  # second gate set: runs interleaved (base, slow_gemm, sync, launch, ...) so that drift of
  # the host over time falls on every variant alike, each pinned to 4 cores; the launch plant
  # is 2 us of host time before each of the 40 pointwise launches (~ +20 % launch overhead)
  g=$tmp/gate2; mkdir -p "$g"
  export TRITON_CACHE_DIR=$tmp/triton-gate2
  run() { # name variant
    VARIANT=$2 SPIN_NS=2000 capture "gate_$1" -t cuda,nvtx -- \
      taskset -c 4-7 python3 gate_steps.py "$g/gate_$1.facts.json"
    mv "$out/gate_$1.sqlite" "$g/"
  }
  run base1_cold base
  for i in 2 3 4 5 6; do
    run "base$i" base
    if [ "$i" -le 4 ]; then
      j=$((i - 1)); run "slow_gemm$j" slow_gemm; run "sync$j" sync; run "launch$j" launch
    fi
  done
  tar -C "$g" -cJf "$out/gate_runs2.tar.xz" .
  ls -l "$out/gate_runs2.tar.xz"
fi
if [ "$what" = gate3 ]; then
  g=$tmp/gate3; mkdir -p "$g"
  run() { # name variant
    VARIANT=$2 python3 gate_mlp.py "$g/gate3_$1.facts.json" "$g/gate3_$1.pt.trace.json"
    gzip -9 "$g/gate3_$1.pt.trace.json"
  }
  run base1_cold base
  for i in 2 3 4 5 6; do
    run "base$i" base
    if [ "$i" -le 4 ]; then
      j=$((i - 1))
      for v in slow_gemm sync launch spin; do run "$v$j" "$v"; done
    fi
  done
  if [ "${NOPROF:-1}" = 1 ]; then
    for i in 1 2 3 4 5 6 7 8; do
      VARIANT=base python3 gate_mlp.py "$g/gate3_noprof$i.facts.json" -
    done
  fi
  tar -C "$g" -cJf "$out/gate_runs3.tar.xz" .
  ls -l "$out/gate_runs3.tar.xz"
fi
"$NSYS" --version > "$out/nsys_version_round2.txt"
rm -rf "$tmp"
