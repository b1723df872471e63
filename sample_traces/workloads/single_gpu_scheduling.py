"""Single-GPU workload with one NVTX range per scheduling symptom the advisor measures.

Top-level NVTX ranges (each wraps a few repetitions, each repetition a nested "step" range):
  warmup                 Triton compilation, cuBLAS handles, first-touch allocations (startup)
  tail_gemm              Triton tiled GEMM, 133 tiles of 128x256 at 1 CTA/SM:
                         waves 1.008, tail ~0.50
  full_wave_gemm         same kernel and tile, 132 tiles -> exactly one full wave, no tail
  underfilled_long_k     Triton tiled GEMM, 4 tiles of 128x128 and K=65536 (1024 K-iterations)
  tiny_kernels_eager     a chain of 100 tiny elementwise kernels, launched eagerly, 5 times
  tiny_kernels_graph     the same chain captured once into a CUDA graph, replayed 5 times
  sync_in_loop           small kernel, then .item() (a blocking D2H copy) and host work, 20 times
  cublas_gemm_shapes     torch.matmul under emit_nvtx(record_shapes=True): shapes in NVTX text

Writes the Triton launch facts (grid, registers, shared memory) to the JSON path given as
the first argument so tests can compare the trace with what the compiler reported.
Set WORKLOAD_PARTS=tiny to run only the tiny-kernel ranges (the graph-level sample).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
import torch
from markers import nvtx
from tiled_gemm import tiled_gemm

REPS = 5
TINY_CHAIN = 50  # pairs of ops -> 100 kernels per chain


def tiny_chain(x: torch.Tensor) -> torch.Tensor:
    for _ in range(TINY_CHAIN):
        x = x * 1.0001
        x = x + 0.001
    return x


def gemm_ranges(facts: dict) -> None:
    dev = "cuda"
    cases = {
        # name: (M, N, K, BM, BN, BK, warps, stages)
        "tail_gemm": (7 * 128, 19 * 256, 8192, 128, 256, 64, 8, 3),
        "full_wave_gemm": (6 * 128, 22 * 256, 8192, 128, 256, 64, 8, 3),
        "underfilled_long_k": (256, 256, 65536, 128, 128, 64, 4, 3),
    }
    inputs = {}
    with nvtx("warmup"):
        for name, (m, n, k, bm, bn, bk, w, s) in cases.items():
            a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
            c, compiled = tiled_gemm(a, b, bm, bn, bk, w, s)
            ref = a.float() @ b.float()
            rel = ((c.float() - ref).norm() / ref.norm()).item()
            assert rel < 2e-2, (name, rel)
            inputs[name] = (a, b)
            facts[name] = {
                "M": m,
                "N": n,
                "K": k,
                "BLOCK_M": bm,
                "BLOCK_N": bn,
                "BLOCK_K": bk,
                "num_warps": w,
                "num_stages": s,
                "grid": [(m + bm - 1) // bm, (n + bn - 1) // bn, 1],
                "block_threads": 32 * w,
                "n_regs": compiled.n_regs,
                "shared_bytes": compiled.metadata.shared,
                "rel_error_vs_fp32": rel,
            }
        tail_m, _, tail_k = cases["tail_gemm"][:3]
        torch.matmul(*inputs["tail_gemm"])
    for name, (_m, _n, _k, bm, bn, bk, w, s) in cases.items():
        a, b = inputs[name]
        with nvtx(name):
            for i in range(REPS):
                with nvtx(f"step {i}", sync=False):
                    tiled_gemm(a, b, bm, bn, bk, w, s)
    with nvtx("cublas_gemm_shapes"):
        a, b = inputs["tail_gemm"]
        with torch.autograd.profiler.emit_nvtx(record_shapes=True):
            for _ in range(3):
                torch.matmul(a, b)
        facts["cublas_gemm_shapes"] = {"M": tail_m, "N": b.shape[1], "K": tail_k}


def tiny_ranges(facts: dict) -> None:
    x = torch.randn(4096, device="cuda")
    with nvtx("warmup"):
        tiny_chain(x)
        static_in = x.clone()
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            tiny_chain(static_in)  # warm the side stream before capture
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            static_out = tiny_chain(static_in)
    with nvtx("tiny_kernels_eager"):
        for i in range(REPS):
            with nvtx(f"step {i}", sync=False):
                tiny_chain(x)
    with nvtx("tiny_kernels_graph"):
        for i in range(REPS):
            with nvtx(f"step {i}", sync=False):
                graph.replay()
    torch.testing.assert_close(static_out, tiny_chain(static_in))
    facts["tiny_chain"] = {"kernels_per_chain": 2 * TINY_CHAIN, "reps": REPS}


def sync_range(facts: dict) -> None:
    x = torch.randn(1 << 20, device="cuda")
    rng = np.random.default_rng(0)
    host = rng.random(200_000)
    with nvtx("sync_in_loop"):
        for i in range(20):
            with nvtx(f"step {i}", sync=False):
                y = torch.sin(x)
                value = y.sum().item()  # blocking device-to-host copy
                np.sort(host + value)  # host work while the GPU idles
    facts["sync_in_loop"] = {"iterations": 20}


def main() -> None:
    out_path = sys.argv[1] if len(sys.argv) > 1 else "facts.json"
    parts = os.environ.get("WORKLOAD_PARTS", "all")
    facts: dict = {"device": torch.cuda.get_device_name(0)}
    props = torch.cuda.get_device_properties(0)
    facts["sm_count"] = props.multi_processor_count
    t0 = time.time()
    if parts == "all":
        gemm_ranges(facts)
    tiny_ranges(facts)
    if parts == "all":
        sync_range(facts)
    facts["wall_s"] = time.time() - t0
    with open(out_path, "w") as fh:
        json.dump(facts, fh, indent=2)
    print(json.dumps(facts, indent=2))


if __name__ == "__main__":
    main()
