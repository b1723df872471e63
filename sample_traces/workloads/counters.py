"""Kernels whose Nsight Compute counters decide the advice (issue 29), each phase under an
NVTX range and run twice (the first launch warms the compiler and the caches; the profilers
capture both):

  triton_full_wave   monolithic Triton GEMM (no TMA, no warp specialization), 132 tiles of
                     128x256 at 1 CTA/SM: exactly one wave on an H200 (M=768, N=5632, K=8192)
  triton_tail        the same kernel, 133 tiles: one wave plus one tile (M=896, N=4864)
  cublas_full_wave   torch.matmul at the full-wave shape (cuBLAS nvjet: TMA + warp-specialized)
  cublas_tail        torch.matmul at the tail shape
  memory_bound       a 1 GiB bf16 elementwise add (DRAM bound: no compute-side strategy helps)

    python3 counters.py FACTS.json [kineto TRACE.json]

Writes FACTS.json (shapes, grids, compiled registers and shared memory, device facts). With
``kineto``, the run is recorded by torch.profiler into TRACE.json as well.
"""

from __future__ import annotations

import json
import sys

import torch
from tiled_gemm import tiled_gemm

CASES = {  # name -> (M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)
    "triton_full_wave": (6 * 128, 22 * 256, 8192, 128, 256, 64, 8, 3),
    "triton_tail": (7 * 128, 19 * 256, 8192, 128, 256, 64, 8, 3),
}
ELEMENTS = 1 << 29  # 512M bf16 elements per operand: 1 GiB each


def run(facts: dict) -> None:
    torch.manual_seed(0)
    dev = torch.device("cuda")
    inputs = {}
    for name, (m, n, k, *_rest) in CASES.items():
        inputs[name] = (torch.randn(m, k, device=dev, dtype=torch.bfloat16),
                        torch.randn(k, n, device=dev, dtype=torch.bfloat16))  # fmt: skip
    for name, (m, n, k, bm, bn, bk, w, s) in CASES.items():
        a, b = inputs[name]
        torch.cuda.nvtx.range_push(name)
        for _ in range(2):
            c, compiled = tiled_gemm(a, b, bm, bn, bk, w, s)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        err = float((c.float() - a.float() @ b.float()).abs().max())
        facts[name] = {"M": m, "N": n, "K": k, "tile": [bm, bn, bk], "num_warps": w,
                       "num_stages": s, "grid": [-(-m // bm), -(-n // bn), 1],
                       "registers": compiled.n_regs, "shared_bytes": compiled.metadata.shared,
                       "max_abs_error": err}  # fmt: skip
    for name, src in (("cublas_full_wave", "triton_full_wave"), ("cublas_tail", "triton_tail")):
        a, b = inputs[src]
        torch.cuda.nvtx.range_push(name)
        for _ in range(2):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        facts[name] = {"M": a.shape[0], "N": b.shape[1], "K": a.shape[1]}
    x = torch.randn(ELEMENTS, device=dev, dtype=torch.bfloat16)
    y = torch.randn(ELEMENTS, device=dev, dtype=torch.bfloat16)
    torch.cuda.nvtx.range_push("memory_bound")
    for _ in range(2):
        z = x + y
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    facts["memory_bound"] = {"elements": ELEMENTS, "bytes_moved": 3 * 2 * ELEMENTS,
                             "checksum": float(z[:1000].float().sum())}  # fmt: skip
    p = torch.cuda.get_device_properties(0)
    facts["device"] = {"name": p.name, "sms": p.multi_processor_count,
                       "torch": torch.__version__, "cuda": torch.version.cuda}  # fmt: skip


def main() -> None:
    facts: dict = {}
    if len(sys.argv) > 3 and sys.argv[2] == "kineto":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     record_shapes=True) as prof:  # fmt: skip
            run(facts)
        prof.export_chrome_trace(sys.argv[3])
    else:
        run(facts)
    with open(sys.argv[1], "w") as fh:
        json.dump(facts, fh, indent=1)


if __name__ == "__main__":
    main()
