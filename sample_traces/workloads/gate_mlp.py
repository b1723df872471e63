"""Held-out gate workload (issue 19): torch.profiler (Kineto) traces of an MLP-like step.

    VARIANT=base|slow_gemm|sync|launch|spin python3 gate_mlp.py FACTS.json TRACE.json
    VARIANT=base python3 gate_mlp.py FACTS.json -        (no profiler: host timing only)

Differs from gate_steps.py (Nsight, Triton GEMM, NVTX ``step``) in format, range names
(``ProfilerStep#N`` from ``prof.step()``) and kernels (cuBLAS GEMMs, ATen pointwise and
layer norm). 30 steps, all profiled from the first (cold: cuBLAS handles and workspaces
are created inside step 0). Each step: two bf16 GEMMs (4096x4096 @ 4096x4096, then the
first 3840 columns of its GELU @ 3840x1024), layer norm, 40 small pointwise ops, a
reduction. Variants plant one regression each:
  slow_gemm  the second GEMM's K 3840 -> 4096 (+6.7 % work in one kernel, same launches)
  sync       a blocking .item() of the reduction in every step
  launch     48 small pointwise ops instead of 40 (+8 launches: ~ +20 % launch overhead)
  spin       2 us of host busy-wait before each small pointwise op (slower host launches)
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
from markers import spin

STEPS = 30


def main() -> None:
    variant = os.environ.get("VARIANT", "base")
    facts_path, trace_path = sys.argv[1], sys.argv[2]
    k2 = 4096 if variant == "slow_gemm" else 3840
    small_ops = 48 if variant == "launch" else 40
    spin_ns = 2000 if variant == "spin" else 0
    torch.manual_seed(0)
    dev = "cuda"
    x = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    w1 = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16) / 64
    w2 = torch.randn(k2, 1024, device=dev, dtype=torch.bfloat16) / 64
    v0 = torch.randn(8192, device=dev)
    reads = []

    def step() -> None:
        h = torch.nn.functional.gelu(x @ w1)
        y = torch.nn.functional.layer_norm(h[:, :k2] @ w2, (1024,))  # (a strided view)
        v = v0
        for i in range(small_ops):
            spin(spin_ns)
            v = v * 1.0001 if i % 2 == 0 else v + 0.001
        total = v.sum() + y.float().mean()
        if variant == "sync":
            reads.append(total.item())

    host_s = []
    t0 = time.time()
    if trace_path == "-":
        for _ in range(STEPS):
            s0 = time.perf_counter()
            step()
            host_s.append(time.perf_counter() - s0)
        torch.cuda.synchronize()
    else:
        from torch.profiler import ProfilerActivity, profile, schedule

        # a schedule makes prof.step() record ProfilerStep#N ranges; every step is active,
        # the first one included (cold)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=0, warmup=0, active=STEPS, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(trace_path),
                     record_shapes=True) as prof:  # fmt: skip
            for _ in range(STEPS):
                s0 = time.perf_counter()
                step()
                host_s.append(time.perf_counter() - s0)
                prof.step()
            torch.cuda.synchronize()
    facts = {
        "device": torch.cuda.get_device_name(0), "variant": variant, "k2": k2,
        "small_ops": small_ops, "spin_ns": spin_ns, "steps": STEPS,
        "wall_s": time.time() - t0, "host_step_s": host_s,
    }  # fmt: skip
    with open(facts_path, "w") as fh:
        json.dump(facts, fh, indent=2)
    med = sorted(host_s[1:])[len(host_s[1:]) // 2]
    print(json.dumps({"variant": variant, "median_host_step_us": round(med * 1e6, 1)}))


if __name__ == "__main__":
    main()
