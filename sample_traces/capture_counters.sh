#!/usr/bin/env bash
# Capture the issue-29 counter samples on an NVIDIA GPU machine with Nsight Compute:
#
#   bash sample_traces/capture_counters.sh OUTDIR
#
# workloads/counters.py (monolithic Triton GEMMs at a full-wave and a one-wave-plus-one-tile
# shape, cuBLAS at the same shapes, a DRAM-bound elementwise add) runs three times: under
# Nsight Systems (the timeline, exported to SQLite), under torch.profiler (Kineto JSON) and
# under Nsight Compute (`--set full`, every launch of those kernels: the counters). The
# Gluon warp-specialized GEMM that advisor emits (workloads/counters_ws_gemm.py, written by
# `advisor analyze ... --emit` for a warp_specialization finding at 896x4864x8192 on an
# H200) runs under Nsight Compute too. Each report is also exported with
# `ncu --import R --csv --page raw` and `--page details`. Needs what capture.sh needs (NSYS,
# .gpu-libs) and ncu (CUDA's bin folder).
set -uo pipefail
out=${1:?usage: capture_counters.sh OUTDIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
export LD_LIBRARY_PATH="$here/../.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
tmp=$(mktemp -d)
cd "$here/workloads"
echo "== nsys"
timeout 100 "$NSYS" profile -t cuda,nvtx,osrt --sample=none --cpuctxsw=none -f true \
  -o "$tmp/counters" python3 counters.py "$tmp/counters.nsys.facts.json" > "$tmp/nsys.log" 2>&1 \
  || tail -20 "$tmp/nsys.log"
timeout 40 "$NSYS" export --type sqlite -f true -o "$out/counters.sqlite" "$tmp/counters.nsys-rep" \
  > /dev/null 2>&1 || echo "nsys export failed"
echo "== kineto"
timeout 100 python3 counters.py "$tmp/counters.kineto.facts.json" kineto "$tmp/counters.pt.trace.json" \
  > "$tmp/kineto.log" 2>&1 || tail -20 "$tmp/kineto.log"
gzip -9 -c "$tmp/counters.pt.trace.json" > "$out/counters.pt.trace.json.gz"
echo "== ncu (workload)"
timeout 220 "$NCU" --clock-control none --set full -f -o "$tmp/counters" \
  -k 'regex:tiled_gemm_kernel|nvjet|vectorized_elementwise' \
  python3 counters.py "$tmp/counters.ncu.facts.json" > "$tmp/ncu.log" 2>&1 || tail -30 "$tmp/ncu.log"
[ -f "$tmp/counters.ncu-rep" ] && cp "$tmp/counters.ncu-rep" "$out/"
echo "== ncu (emitted Gluon warp-specialized GEMM)"
timeout 120 "$NCU" --clock-control none --set full -f -o "$tmp/ws" -k 'regex:ws_gemm_kernel' -c 2 \
  python3 counters_ws_gemm.py --check > "$tmp/ws.log" 2>&1 || tail -30 "$tmp/ws.log"
[ -f "$tmp/ws.ncu-rep" ] && xz -9 -c "$tmp/ws.ncu-rep" > "$out/ws.ncu-rep.xz"  # (3 MB -> 0.1 MB)
for r in counters ws; do
  if [ -f "$tmp/$r.ncu-rep" ]; then
    "$NCU" --import "$tmp/$r.ncu-rep" --csv --page raw > "$tmp/$r.raw.csv"
    "$NCU" --import "$tmp/$r.ncu-rep" --csv --page details > "$tmp/$r.details.csv"
  fi
done
"$NCU" --version | tail -1 > "$tmp/ncu_version.txt"
"$NSYS" --version >> "$tmp/ncu_version.txt"
python3 -c 'import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__)' \
  >> "$tmp/ncu_version.txt"
# (the CSV pages, the facts, the logs and the versions: one archive)
tar -C "$tmp" -cJf "$out/counters_extra.tar.xz" $(cd "$tmp" && ls *.csv *.json *.log *.txt 2>/dev/null)
ls -l "$out" "$tmp"
rm -rf "$tmp"
