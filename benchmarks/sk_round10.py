"""Issue 29 round 10: what the emitted Stream-K script could still gain, measured in a CUDA
graph against cuBLAS (every variant checked against a float32 matmul first).

    python benchmarks/sk_round10.py STREAM_K_SCRIPT --align [--out rows.jsonl]
    python benchmarks/sk_round10.py STREAM_K_SCRIPT --sweep [--out rows.jsonl]

--align: at the shapes whose operand rows are not 128-byte aligned (K or N not a multiple
of 64 elements), the script's choice run as emitted against the same knobs run on A and/or
B copied into storage whose rows are padded to 64 elements (a view of the same shape: the
kernel's TMA descriptors take the padded row stride, the logical K and N stay, so nothing
else is copied); the copy is timed inside the graph with the GEMM. "+C64" also writes the
output into such storage (a view; not what the script returns, for information).

--sweep: at the shapes where round 9's scripts sit at 0.95-0.99x cuBLAS, every Gluon tile
the planner can emit x every Stream-K policy (the data-parallel-only tiles under policy 0),
to see whether any config the planner could choose beats cuBLAS there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replan_table import DTYPES, _module  # noqa: E402

ALIGN_SHAPES = [
    (1000, 3000, 5000, "bf16"),
    (3000, 1000, 10000, "bf16"),
    (768, 5120, 7000, "fp16"),
    (2304, 2304, 9000, "bf16"),
    (1280, 2560, 12000, "bf16"),
    (999, 4865, 8191, "bf16"),
]
SWEEP_SHAPES = [
    (896, 4864, 8192, "bf16"),
    (1408, 1664, 16384, "bf16"),
    (768, 5120, 7000, "fp16"),
    (1536, 1792, 4096, "bf16"),
    (4224, 512, 20480, "bf16"),
    (2304, 2304, 9000, "bf16"),
    (3072, 1152, 16384, "fp16"),
    (2048, 2176, 8192, "fp16"),
]
# Gluon tiles of gemm_tiles: (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)
TILES = [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 64, 8, 4),
         (128, 192, 64, 8, 4), (192, 128, 64, 8, 4)]  # fmt: skip


_SINK: list = []  # --out's path, where each row is appended as it is measured


def _emit(row: dict) -> None:
    print(json.dumps({k: v for k, v in row.items() if "rel_error" not in k}), flush=True)
    if _SINK:
        with open(_SINK[0], "a") as f:
            f.write(json.dumps(row) + "\n")


def _graph_us(fn, rep: int = 100) -> float:
    """Median GPU time of ``fn`` in a CUDA graph (us), over a ``rep`` ms window."""
    import triton.testing

    return triton.testing.do_bench_cudagraph(fn, rep=rep, return_mode="median") * 1e3


def view64(t, align: int = 64):
    """``t`` copied into storage whose rows are padded to ``align`` elements, as a view of
    ``t``'s shape (only the row stride differs)."""
    import torch

    rows, cols = t.shape
    store = torch.empty((rows, -(-cols // align) * align), device=t.device, dtype=t.dtype)
    store[:, :cols] = t
    return store[:, :cols]


def _tma_ok(t):
    """``t``, or a view of 8-element-aligned rows where its row stride is not a 16-byte
    multiple (TMA's requirement)."""
    return t if t.stride(0) * t.element_size() % 16 == 0 else view64(t, 8)


def direct(mod, a, b, cfg, c64: bool = False):
    """The script's Gluon path on ``a`` and ``b`` as given (no ``padded`` copies: their row
    strides must be 16-byte multiples), C contiguous or (``c64``) a view of 64-aligned rows."""
    import torch

    hopper = mod._hopper(a, cfg)
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    if mod.data_parallel_only(cfg["BLOCK_M"], cfg["BLOCK_N"]) and mod.plan(m, n, k, hopper)[
            "sk_tiles"]:  # fmt: skip
        hopper = mod._hopper(a, mod.power_of_two_tile(cfg))
    if c64:
        c = torch.empty((m, -(-n // 64) * 64), device=a.device, dtype=a.dtype)[:, :n]
    else:
        c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    p = mod.plan(m, n, k, hopper)
    if mod.data_parallel_only(hopper["BLOCK_M"], hopper["BLOCK_N"]):
        mod.gluon_dp2(a, b, c, hopper, p["progs"])
    else:
        mod.gluon_stream_k(a, b, c, hopper, p)
    return c


def _inputs(m, n, k, dt):
    import torch

    dtype, tol = getattr(torch, DTYPES[dt][0]), DTYPES[dt][1]
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(m, k, generator=g).to("cuda", dtype)
    b = torch.randn(k, n, generator=g).to("cuda", dtype)
    return a, b, (a.float() @ b.float()).double(), tol


def _timed_row(row: dict, runs: dict, ref, tol: float, rounds: int = 3, rep: int = 100) -> dict:
    """Check every run against ``ref`` (relative error within ``tol``), then time those that
    pass in ``rounds`` interleaved rounds (medians, us) into ``row``."""
    timed = {}
    for label, fn in runs.items():
        try:
            err = float((fn().double() - ref).norm() / ref.norm())
            row[f"{label} rel_error"] = err
            if err <= tol:
                timed[label] = []
            else:
                row[label] = f"wrong ({err:.1e})"
        except Exception as exc:  # reported, not hidden
            row[label] = f"{type(exc).__name__}: {str(exc)[:200]}"
    for _ in range(rounds):  # interleaved rounds
        for label in timed:
            timed[label].append(_graph_us(runs[label], rep))
    for label, t in timed.items():
        row[label] = round(statistics.median(t), 2)
    return row


def align_rows(mod) -> list[dict]:
    rows = []
    for m, n, k, dt in ALIGN_SHAPES:
        a, b, ref, tol = _inputs(m, n, k, dt)
        cfg = {**mod.CONFIG, **mod.replan(m, n, k), "GLUON": 1}
        runs = {"cublas": lambda a=a, b=b: a @ b,
                "script": lambda a=a, b=b, cfg=cfg: mod.gemm(a, b, cfg),
                "A64": lambda a=a, b=b, cfg=cfg: direct(mod, view64(a), _tma_ok(b), cfg),
                "B64": lambda a=a, b=b, cfg=cfg: direct(mod, _tma_ok(a), view64(b), cfg),
                "AB64": lambda a=a, b=b, cfg=cfg: direct(mod, view64(a), view64(b), cfg),
                "AB64+C64": lambda a=a, b=b, cfg=cfg: direct(mod, view64(a), view64(b), cfg,
                                                             True)}  # fmt: skip
        knobs = {key: cfg[key] for key in mod.KNOBS if key in cfg}
        row = {"M": m, "N": n, "K": k, "dtype": dt, "knobs": knobs}
        rows.append(_timed_row(row, runs, ref, tol))
        _emit(row)
    return rows


def sweep_rows(mod) -> list[dict]:
    rows = []
    for m, n, k, dt in SWEEP_SHAPES:
        a, b, ref, tol = _inputs(m, n, k, dt)
        chosen = {**mod.CONFIG, **mod.replan(m, n, k)}
        runs = {
            "cublas": lambda a=a, b=b: a @ b,
            "chosen": lambda a=a, b=b, cfg=chosen: mod.gemm(a, b, cfg),
        }
        for bm, bn, bk, warps, stages in TILES:
            dp_only = mod.data_parallel_only(bm, bn)
            for policy in (0,) if dp_only else (0, 1, 2, -1):
                cfg = {**mod.CONFIG, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                       "num_warps": warps, "num_stages": stages, "GROUP_M": 8,
                       "NUM_PROGS": 132, "GLUON": 1, "SK_TILES": policy}  # fmt: skip
                label = f"{bm}x{bn}x{bk} {warps}w{stages}s p{policy}"
                runs[label] = lambda a=a, b=b, cfg=cfg: mod.gemm(a, b, cfg)
        knobs = {key: chosen[key] for key in mod.KNOBS if key in chosen}
        row = {"M": m, "N": n, "K": k, "dtype": dt, "chosen_knobs": knobs}
        _timed_row(row, runs, ref, tol)
        best = min(
            (v, key)
            for key, v in row.items()
            if isinstance(v, float) and key not in ("cublas",) and "rel_error" not in key
        )
        row["best"] = best[1]
        row["best_vs_cublas"] = round(row["cublas"] / best[0], 3)
        row["chosen_vs_cublas"] = round(row["cublas"] / row["chosen"], 3)
        rows.append(row)
        _emit(row)
    return rows


def warmed_module(script: str):
    """The emitted script ``script`` as a module, after a warm-up of the GPU (a bf16
    8192^2 GEMM timed in a CUDA graph)."""
    import torch

    mod = _module(Path(script))
    warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    _graph_us(lambda: warm @ warm)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--align", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    mod = warmed_module(a.script)
    if a.out:
        Path(a.out).write_text("")
        _SINK.append(a.out)
    if a.align:
        align_rows(mod)
    if a.sweep:
        sweep_rows(mod)


if __name__ == "__main__":
    main()
