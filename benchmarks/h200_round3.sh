#!/usr/bin/env bash
# Issue 15 measurements on an H200 (run by the device tool from the repository root).
#
#   bash benchmarks/h200_round3.sh tail|tune|table|grid|verify|host|misses|ws|gluon OUT
#
# tail:  capture sample_traces/workloads/wave_tail.py (torch.profiler), analyse it, emit,
#        run the grid-stride script (--check --bench)
# tune:  emit the GEMM scripts of sample_traces/h200_scheduling.sqlite and run --tune and
#        --bench on the split-K and Stream-K ones
# table: benchmarks/replan_table.py on those scripts (re-planned at 24 shapes vs cuBLAS,
#        GLUON=1 and 0, per call and inside a CUDA graph)
# grid:  benchmarks/tile_grid.py: every tile of its grid x both kernels at the 24 + 8 shapes,
#        in a CUDA graph and per call (the data gpus.yaml's gemm_tiles are fitted to;
#        RESUME=old.jsonl skips rows measured already, DEADLINE=s stops cleanly)
# verify: with the fitted gemm_tiles: replan_table.py (the planner's own GLUON, per call and
#        in a CUDA graph) at the 24 and the 8 held-out shapes; Stream-K --check --bench at
#        issue 15's 896x2432x32768 and the traced 896x4864x8192; --tune at the traced shape
# host:  benchmarks/host_launch.py: host time per call of each launch path, and its profile
# misses: --tune at the 4 shapes below 0.7x cuBLAS
# ws:    the warp_specialization script (Gluon producer/consumer kernel on Hopper) at
#        8192^3 and a few more shapes: --check, then --bench with WARP_SPECIALIZE=1 (Gluon)
#        and =0 (the Triton persistent TMA kernel it replaces), each against cuBLAS
# gluon: the split-K and Stream-K scripts with GLUON=1 (the Gluon warp-specialized kernel
#        computes the partials / runs the Stream-K schedule) and GLUON=0 (the Triton
#        kernels), --check then --bench against cuBLAS, at the traced shapes and round 3's
#        misses
set -euo pipefail
what=${1:?tail|tune|table|misses|ws|gluon}
out=${2:?OUT}
mkdir -p "$out"
deps=/tmp/deps
[ -d $deps ] || pip install -q --no-index --find-links .gpu-wheels --target $deps \
  msgspec orjson adbc-driver-sqlite sqlite-utils pydantic > /dev/null 2>&1
export PYTHONPATH=$deps:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/$what.gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
  | tee -a "$out/$what.gpu.txt"
emit_gemms() {
  rm -rf /tmp/emit_s
  python3 -m advisor analyze sample_traces/h200_scheduling.sqlite \
    --shape tail_gemm=896x4864x8192 --shape underfilled=256x256x65536 --emit /tmp/emit_s \
    --format json > /tmp/emit_s.json
}
case $what in
gluon)
  emit_gemms
  s=$(ls /tmp/emit_s/*_split_k_*.py); t=$(ls /tmp/emit_s/*_stream_k_*.py)
  for args in "$s 256 256 65536" "$s 1000 600 50000" "$s 128 128 131072" "$s 333 777 99999" \
              "$t 896 4864 8192" "$t 1000 3000 5000" "$t 2304 2304 9000" "$t 999 4865 8191" \
              "$t 8192 8192 8192"; do
    set -- $args
    for g in 1 0; do
      echo "== $(basename $1) M=$2 N=$3 K=$4 GLUON=$g" | tee -a "$out/gluon.txt"
      timeout 90 python3 "$1" --m $2 --n $3 --k $4 --set GLUON=$g --check --bench 2>&1 \
        | grep -v "^  File\|^    " | tail -7 | tee -a "$out/gluon.txt" || echo "rc $?" | tee -a "$out/gluon.txt"
    done
  done
  ;;
ws)
  rm -rf /tmp/emit_ws
  python3 - <<'PY'
from advisor.configs.emit import emit
from advisor.rules.finding import EmitRequest, Finding
from advisor.trace.gpus import match_gpu

f = Finding(rule="ws", title="t", strategy="warp_specialization", explains=(), severity="low",
            kernel="gemm", region="r", device=0, est_savings_ns=1, at_ns=None, at_rel_ns=None,
            summary="s", gemm_by="name", confidence="confirmed", confirm=None, evidence={},
            rationale="r", watch_for="w", references=(),
            emit=EmitRequest("gemm", row={"m": 8192, "n": 8192, "k": 8192, "median_ns": 1e6}))
print(emit([f], {0: match_gpu("H200")}, "/tmp/emit_ws")[0].config)
PY
  s=$(ls /tmp/emit_ws/*.py)
  cp "$s" "$out/"
  python3 -c "import inspect, triton.experimental.gluon.language as gl; print(inspect.signature(gl.warp_specialize))" | tee "$out/ws.txt"
  for shape in "8192 8192 8192" "4096 4096 4096" "8192 8192 1024" "2048 8192 8192" "4096 4096 12288"; do
    set -- $shape
    for w in 1 0; do
      echo "== M=$1 N=$2 K=$3 WARP_SPECIALIZE=$w" | tee -a "$out/ws.txt"
      timeout 300 python3 "$s" --m $1 --n $2 --k $3 --set WARP_SPECIALIZE=$w --check --bench 2>&1 \
        | tail -8 | tee -a "$out/ws.txt" || echo "rc $?" | tee -a "$out/ws.txt"
    done
  done
  ;;
tail)
  python3 sample_traces/workloads/wave_tail.py "$out/h200_wave_tail.facts.json" /tmp/wt.json
  gzip -9 -c /tmp/wt.json > "$out/h200_wave_tail.pt.trace.json.gz"
  rm -rf /tmp/emit_wt
  python3 -m advisor analyze "$out/h200_wave_tail.pt.trace.json.gz" --emit /tmp/emit_wt \
    --format json > "$out/h200_wave_tail.analysis.json"
  COLUMNS=120 python3 -m advisor analyze "$out/h200_wave_tail.pt.trace.json.gz" \
    > "$out/h200_wave_tail.terminal.txt"
  ls /tmp/emit_wt
  for s in /tmp/emit_wt/*_persistent_*.py; do
    echo "== $s"; python3 "$s" --check --bench 2>&1 | tee -a "$out/tail_bench.txt"
    cp "$s" "$out/"
  done
  ;;
tune)
  emit_gemms
  for s in /tmp/emit_s/*_stream_k_*.py /tmp/emit_s/*_split_k_*.py; do
    echo "== $s" | tee -a "$out/tune.txt"
    timeout 240 python3 "$s" --tune 2>&1 | tee -a "$out/tune.txt" || echo "tune rc $?" | tee -a "$out/tune.txt"
  done
  ;;
host)
  emit_gemms
  python3 benchmarks/host_launch.py /tmp/emit_s | tee "$out/host_launch.txt"
  ;;
verify)
  emit_gemms
  python3 benchmarks/replan_table.py /tmp/emit_s --graph --out "$out/verify_rows.json" \
    | tee "$out/verify_table.md"
  python3 benchmarks/replan_table.py /tmp/emit_s --graph --held-out \
    --out "$out/verify_rows_heldout.json" | tee "$out/verify_table_heldout.md"
  t=$(ls /tmp/emit_s/*_stream_k_*.py)
  for shape in "896 2432 32768" "896 4864 8192"; do
    set -- $shape
    echo "== stream_k M=$1 N=$2 K=$3" | tee -a "$out/verify_bench.txt"
    python3 "$t" --m $1 --n $2 --k $3 --check --bench 2>&1 | tee -a "$out/verify_bench.txt"
  done
  timeout 200 python3 "$t" --tune 2>&1 | tee "$out/verify_tune.txt" || true
  ;;
grid)
  emit_gemms
  python3 benchmarks/tile_grid.py /tmp/emit_s --out "$out/grid.jsonl" \
    ${RESUME:+--resume "$RESUME"} --deadline-s "${DEADLINE:-520}" | tail -5
  ;;
table)
  emit_gemms
  python3 benchmarks/replan_table.py /tmp/emit_s --gluon both --graph --out "$out/replan_rows.json" \
    | tee "$out/replan_table.md"
  ;;
esac
# misses: --tune at the shapes where the re-planned knobs ran below 0.7x cuBLAS
if [ "$what" = misses ]; then
  emit_gemms
  s=$(ls /tmp/emit_s/*_split_k_*.py); t=$(ls /tmp/emit_s/*_stream_k_*.py)
  for args in "$s 1000 600 50000" "$s 128 128 131072" "$t 1000 3000 5000" "$t 2304 2304 9000"; do
    set -- $args
    echo "== $1 --m $2 --n $3 --k $4" | tee -a "$out/misses.txt"
    timeout 130 python3 "$1" --m "$2" --n "$3" --k "$4" --tune 2>&1 \
      | grep -E "re-planned|\(chosen\)|re-timed|winner|^\{" | tee -a "$out/misses.txt" || true
  done
fi
