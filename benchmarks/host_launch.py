"""Host (Python) time per call of the emitted GEMM scripts' launch paths, and where it goes.

    python benchmarks/host_launch.py EMIT_DIR [--calls 400]

For the split-K and Stream-K scripts in EMIT_DIR, with GLUON=1 and 0, at a shape whose GPU
time is small (so that the loop is host-bound): the host time per call of ``gemm`` (calls
enqueued without synchronising), against torch.matmul, one empty Triton kernel launch and a
torch.empty; then cProfile's top functions by own time for each path.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from replan_table import _module  # noqa: E402


def per_call_us(fn, calls: int) -> float:
    """Host time per call (us): ``calls`` calls enqueued back to back, then one sync."""
    import torch

    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = time.perf_counter() - t0
    torch.cuda.synchronize()
    return host / calls * 1e6


def report(label: str, fn, calls: int, profile: bool = False) -> None:
    print(f"{label}: {per_call_us(fn, calls):.1f} us per call (host)")
    if not profile:
        return
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(200):
        fn()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(14)
    print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))


def main() -> None:
    import torch
    import triton
    import triton.language as tl

    globals()["tl"] = tl  # (Triton resolves a kernel's globals in this module)

    p = argparse.ArgumentParser()
    p.add_argument("emit_dir")
    p.add_argument("--calls", type=int, default=400)
    args = p.parse_args()

    @triton.jit
    def empty(x_ptr, n, BLOCK: tl.constexpr):
        pass

    x = torch.empty(16, device="cuda")
    report("empty Triton launch", lambda: empty[(1,)](x, 16, BLOCK=16), args.calls)
    report("torch.empty 256x256 fp32", lambda: torch.empty((256, 256), device="cuda"), args.calls)
    for family, (m, n, k) in (("split_k", (256, 256, 8192)), ("stream_k", (512, 512, 4096))):
        mod = _module(sorted(Path(args.emit_dir).glob(f"*_{family}_*.py"))[0])
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        report(f"torch.matmul {m}x{n}x{k}", lambda a=a, b=b: torch.matmul(a, b), args.calls)
        for gluon in (1, 0):
            cfg = {**mod.CONFIG, **mod.replan(m, n, k), "GLUON": gluon}
            fn = lambda a=a, b=b, cfg=cfg, mod=mod: mod.gemm(a, b, cfg)  # noqa: E731
            report(f"{family} GLUON={gluon} {m}x{n}x{k}", fn, args.calls, profile=True)


if __name__ == "__main__":
    main()
