"""Repeated training-like steps for the CI-gate noise study (issue 19).

    VARIANT=base|slow_gemm|sync|launch python3 gate_steps.py FACTS.json

30 ranges ``step`` (after one range ``warmup``), each: one Triton GEMM (2048x2048x4096,
tiled_gemm_kernel 128x128 tiles), 40 host-launched pointwise kernels on a 4096-element
tensor, one reduction. Variants plant one regression each:
  base       unchanged
  slow_gemm  K 4096 -> 4352 (+6.25 % GEMM work: a ~6 % slower kernel, same name and grid)
  sync       a blocking .item() read of the reduction in every step
  launch     SPIN_NS (default 1000) of host busy-wait before every pointwise launch
             (more host time per launch: launch overhead up)
The first (cold) run of a fresh process compiles the Triton kernel inside the trace.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
from markers import nvtx, spin
from tiled_gemm import tiled_gemm

STEPS = 30
POINTWISE_PAIRS = 20


def main() -> None:
    variant = os.environ.get("VARIANT", "base")
    spin_ns = int(os.environ.get("SPIN_NS", "1000")) if variant == "launch" else 0
    k = 4352 if variant == "slow_gemm" else 4096
    torch.manual_seed(0)
    a = torch.randn(2048, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, 2048, device="cuda", dtype=torch.bfloat16)
    x0 = torch.randn(4096, device="cuda")
    reads = []
    t0 = time.time()
    with nvtx("warmup"):
        tiled_gemm(a, b, 128, 128, 64, 8, 3)
    step_s = []
    for _ in range(STEPS):
        s0 = time.perf_counter()
        with nvtx("step", sync=False):
            tiled_gemm(a, b, 128, 128, 64, 8, 3)
            x = x0
            for _ in range(POINTWISE_PAIRS):
                spin(spin_ns)
                x = x * 1.0001
                spin(spin_ns)
                x = x + 0.001
            total = x.sum()
            if variant == "sync":
                reads.append(total.item())
        step_s.append(time.perf_counter() - s0)
    torch.cuda.synchronize()
    facts = {
        "device": torch.cuda.get_device_name(0), "variant": variant, "K": k,
        "spin_ns": spin_ns, "steps": STEPS, "wall_s": time.time() - t0,
        "host_step_s": step_s,
    }  # fmt: skip
    with open(sys.argv[1], "w") as fh:
        json.dump(facts, fh, indent=2)
    print(json.dumps({k: v for k, v in facts.items() if k != "host_step_s"}))


if __name__ == "__main__":
    main()
