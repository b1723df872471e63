"""Single-GPU workload: GEMMs that names do not give away (held-out capture for issue 12).

    python3 gemm_evidence.py FACTS.json {nsys|kineto|none} [KINETO_OUT.json.gz]

Ranges (each a few repetitions; everything is compiled and warmed before the capture window):
  underfilled_bare    a Triton GEMM named just ``_kernel`` (block pointers, 64x128 tiles,
                      K=98304): 3x3 = 9 CTAs on 132 SMs, each walking 1536 K-iterations
  tail_bare           the same ``_kernel`` at 1408x1664x16384 with 128x128 tiles, 4 stages
                      (1 CTA/SM): 11x13 = 143 tiles = 1.083 waves
  small_bare          the same ``_kernel`` at 256x256x8192 (2x2 grid): a --shape meant for
                      the tail launch must not land here
  compiled_addmm      relu(addmm) through torch.compile(mode="max-autotune-no-cudagraphs")
                      with Triton templates only: an inductor ``triton_tem_fused_*`` GEMM
  linear_op_shapes    F.linear under emit_nvtx(record_shapes=True): cuBLAS kernels whose
                      launching op (aten::linear/addmm) and shapes are in the range text

FACTS.json gets each launch's grid, registers and shared memory as Triton reports them.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from markers import nvtx, profiler_window

REPS = 4


@triton.jit
def _kernel(A, B, C, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """One CTA per output tile, block pointers (a style the tutorials do not use)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a = tl.make_block_ptr(A, (M, K), (sam, sak), (pid_m * BM, 0), (BM, BK), (1, 0))
    b = tl.make_block_ptr(B, (K, N), (sbk, sbn), (0, pid_n * BN), (BK, BN), (1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(tl.load(a, boundary_check=(0, 1)), tl.load(b, boundary_check=(0, 1)), acc)
        a = tl.advance(a, (0, BK))
        b = tl.advance(b, (BK, 0))
    c = tl.make_block_ptr(C, (M, N), (scm, scn), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    tl.store(c, acc.to(C.dtype.element_ty), boundary_check=(0, 1))


# name: (M, N, K, BM, BN, BK, num_warps, num_stages)
CASES = {
    "underfilled_bare": (192, 384, 98304, 64, 128, 64, 4, 4),
    "tail_bare": (1408, 1664, 16384, 128, 128, 64, 8, 4),
    "small_bare": (256, 256, 8192, 128, 128, 64, 8, 4),
}


def bare_gemm(a, b, bm, bn, bk, warps, stages):
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    compiled = _kernel[grid](a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride(),
                             BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=stages)  # fmt: skip
    return c, compiled, grid


def main() -> None:
    facts_path, kind = sys.argv[1], sys.argv[2]
    dev = "cuda"
    torch.manual_seed(0)
    facts: dict = {"device": torch.cuda.get_device_name(0), "mode": kind}
    facts["sm_count"] = torch.cuda.get_device_properties(0).multi_processor_count
    inputs = {}
    for name, (m, n, k, bm, bn, bk, w, s) in CASES.items():
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        c, compiled, grid = bare_gemm(a, b, bm, bn, bk, w, s)
        ref = a.float() @ b.float()
        rel = ((c.float() - ref).norm() / ref.norm()).item()
        assert rel < 2e-2, (name, rel)
        inputs[name] = (a, b)
        facts[name] = {
            "kernel": "_kernel", "M": m, "N": n, "K": k, "BLOCK_M": bm, "BLOCK_N": bn,
            "BLOCK_K": bk, "num_warps": w, "num_stages": s, "grid": [*grid, 1],
            "block_threads": 32 * w, "n_regs": compiled.n_regs,
            "shared_bytes": compiled.metadata.shared, "rel_error_vs_fp32": rel,
        }  # fmt: skip

    import torch._inductor.config as inductor_config

    inductor_config.max_autotune_gemm_backends = "TRITON"
    x = torch.randn(2000, 3000, device=dev, dtype=torch.bfloat16)
    w = torch.randn(3000, 5000, device=dev, dtype=torch.bfloat16)
    bias = torch.randn(5000, device=dev, dtype=torch.bfloat16)
    fused = torch.compile(
        lambda x, w, b: torch.relu(torch.addmm(b, x, w)), mode="max-autotune-no-cudagraphs"
    )
    t0 = time.time()
    try:
        fused(x, w, bias)
        facts["compiled_addmm"] = {"M": 2000, "N": 5000, "K": 3000, "compile_s": time.time() - t0}
    except Exception as exc:  # keep the rest of the capture if inductor fails here
        facts["compiled_addmm"] = {"error": repr(exc)[:500]}
        fused = None
    lin_x = torch.randn(1000, 5000, device=dev, dtype=torch.bfloat16)
    lin_w = torch.randn(3000, 5000, device=dev, dtype=torch.bfloat16)  # out x in
    F.linear(lin_x, lin_w)
    facts["linear_op_shapes"] = {"M": 1000, "N": 3000, "K": 5000, "op": "aten::linear"}
    torch.cuda.synchronize()

    window = profiler_window(kind)
    with window:
        for name, (_m, _n, _k, bm, bn, bk, w_, s) in CASES.items():
            a, b = inputs[name]
            with nvtx(name):
                for i in range(REPS):
                    with nvtx(f"step {i}", sync=False):
                        bare_gemm(a, b, bm, bn, bk, w_, s)
        with nvtx("compiled_addmm"):
            for i in range(REPS if fused else 0):
                with nvtx(f"step {i}", sync=False):
                    fused(x, w, bias)
        with nvtx("linear_op_shapes"):
            # (torch.profiler records the ops and their shapes itself)
            shapes = (
                nullcontext()
                if kind == "kineto"
                else torch.autograd.profiler.emit_nvtx(record_shapes=True)
            )
            with shapes:
                for _ in range(REPS):
                    F.linear(lin_x, lin_w)
    if kind == "kineto":
        window.export_chrome_trace(sys.argv[3])
    with open(facts_path, "w") as fh:
        json.dump(facts, fh, indent=2)
    print(json.dumps(facts, indent=2))


if __name__ == "__main__":
    main()
