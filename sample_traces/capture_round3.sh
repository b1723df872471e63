#!/usr/bin/env bash
# Capture the third-round held-out traces (why the GPU waited) on an NVIDIA GPU machine.
#
#   bash sample_traces/capture_round3.sh OUTDIR [PART...]
#
# Each part of workloads/why_idle.py runs twice: under Nsight Systems (exported to SQLite)
# and under torch.profiler (Kineto JSON, gzipped); the profilers cannot share CUPTI. Writes
# OUTDIR/why_PART.sqlite, why_PART.pt.trace.json.gz and why_PART.{nsys,kineto}.facts.json,
# packed into OUTDIR/why_idle.tar.xz. Needs what capture.sh needs (NSYS, .gpu-libs).
set -uo pipefail
out=${1:?usage: capture_round3.sh OUTDIR [PART...]}
shift
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(short_chains pageable_copy copy_after_idle devprops nongemm dataloader
                                 dp_allreduce event_wait startup_host_work startup_short_chains
                                 between_ranges step_host_work late_template mixed_training)
T_RUN=${T_RUN:-60}     # seconds each profiled run may take (a hung part is killed, the rest go on)
T_EXPORT=${T_EXPORT:-40}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH="$here/../.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tmp=$(mktemp -d)
pack=$tmp/pack
mkdir -p "$pack"
cd "$here/workloads"
for part in "${parts[@]}"; do
  echo "== $part"
  timeout "$T_RUN" "$NSYS" profile -t cuda,nvtx,osrt --sample=none --cpuctxsw=none -f true -o "$tmp/$part" \
    python3 why_idle.py "$part" "$pack/why_$part.nsys.facts.json" nsys > "$tmp/$part.log" 2>&1 \
    || { echo "nsys run failed"; tail -20 "$tmp/$part.log"; }
  if [ -f "$tmp/$part.nsys-rep" ]; then
    timeout "$T_EXPORT" "$NSYS" export --type sqlite -f true -o "$pack/why_$part.sqlite" "$tmp/$part.nsys-rep" \
      > /dev/null 2>&1 || echo "export failed"
  fi
  timeout "$T_RUN" python3 why_idle.py "$part" "$pack/why_$part.kineto.facts.json" kineto \
    "$tmp/why_$part.pt.trace.json" > "$tmp/$part.kineto.log" 2>&1 \
    || { echo "kineto run failed"; tail -20 "$tmp/$part.kineto.log"; }
  [ -f "$tmp/why_$part.pt.trace.json" ] && gzip -9 -c "$tmp/why_$part.pt.trace.json" \
    > "$pack/why_$part.pt.trace.json.gz"
  ls -l "$pack" | grep "why_$part"
  cp "$tmp/$part.log" "$tmp/$part.kineto.log" "$pack/" 2>/dev/null
  [ -f "$out/capture.log" ] || true
  tar -C "$pack" -cJf "$out/why_idle.tar.xz" .   # (after each part: a later hang loses nothing)
done
"$NSYS" --version > "$pack/nsys_version_round3.txt"
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' >> "$pack/nsys_version_round3.txt"
tar -C "$pack" -cJf "$out/why_idle.tar.xz" .
ls -l "$out/why_idle.tar.xz"
rm -rf "$tmp"
