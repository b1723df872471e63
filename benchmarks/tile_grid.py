"""Measure a grid of GEMM tiles per shape: the data the planner's tile table is fitted to.

    python benchmarks/tile_grid.py EMIT_DIR --out grid.jsonl [--resume old.jsonl]
        [--deadline-s 540] [--held-out]

For each emitted split-K and Stream-K script in EMIT_DIR, each shape of its family in
benchmarks/replan_table.py (then the held-out shapes), each tile of GRID_TILES below and each
kernel (GLUON=0: the Triton kernel; GLUON=1: the Gluon warp-specialized one, where it runs):
the script's own planner picks the rest of the knobs for that one tile (SPLITS, NUM_PROGS),
the result is checked against a float32 matmul, and the call is timed inside a CUDA graph
(``graph_ms``: GPU time, do_bench_cudagraph median) and per call (``call_ms``: do_bench
median, Python launch included). torch.matmul (cuBLAS) is timed the same way per shape.
One JSON object per line, written as it is measured; stops cleanly at the deadline so that a
second run can ``--resume`` with the rows of the first (rows already there are skipped).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from replan_table import DTYPES, HELD_OUT, SHAPES, _module  # noqa: E402

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): the planner's table and neighbours
GRID_TILES = [
    (128, 256, 64, 8, 3),
    (256, 128, 64, 8, 3),
    (128, 256, 64, 8, 4),
    (128, 128, 64, 8, 4),
    (128, 128, 64, 8, 3),
    (128, 128, 64, 4, 4),
    (128, 128, 128, 8, 3),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (64, 64, 64, 4, 4),
    (64, 64, 128, 4, 4),
]


def _key(row: dict) -> tuple:
    return (row["family"], row["M"], row["N"], row["K"], row["dtype"], row["kernel"],
            tuple(row.get("tile") or ()))  # fmt: skip


def _time(fn) -> tuple[float, float]:
    import triton.testing

    graph = triton.testing.do_bench_cudagraph(fn, rep=25, return_mode="median")
    call = triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")
    return graph, call


def _plan_for_tile(mod, family: str, tile: tuple, m: int, n: int, k: int) -> dict | None:
    """The script's planner restricted to one tile: its SPLITS / NUM_PROGS choice."""
    saved = mod.CANDIDATES
    mod.CANDIDATES = [(*tile, 1.0, 1.0)]
    try:
        cfg = mod.CHOOSERS[family](mod.Problem(m, n, k, mod.GPU))
    except ValueError:  # (min() of nothing: the tile does not fit)
        return None
    finally:
        mod.CANDIDATES = saved
    return {key: cfg[key] for key in mod.KNOBS if key in cfg}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("emit_dir")
    p.add_argument("--out", required=True)
    p.add_argument("--resume")
    p.add_argument("--deadline-s", type=float, default=540)
    args = p.parse_args()
    import torch

    start = time.monotonic()
    done = set()
    if args.resume and Path(args.resume).exists():
        done = {_key(json.loads(line)) for line in Path(args.resume).read_text().splitlines()}
    out = open(args.out, "a")  # noqa: SIM115 (rows flushed as measured, kept on a deadline)
    warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    _time(lambda: warm @ warm)  # a warm GPU first
    for family in SHAPES:
        mod = _module(sorted(Path(args.emit_dir).glob(f"*_{family}_*.py"))[0])
        for m, n, k, dt in SHAPES[family] + HELD_OUT[family]:
            dtype, tol = getattr(torch, DTYPES[dt][0]), DTYPES[dt][1]
            g = torch.Generator(device="cpu").manual_seed(0)
            a = torch.randn(m, k, generator=g).to("cuda", dtype)
            b = torch.randn(k, n, generator=g).to("cuda", dtype)
            ref, seen = None, set()
            base = {"family": family, "M": m, "N": n, "K": k, "dtype": dt,
                    "held_out": (m, n, k, dt) in HELD_OUT[family]}  # fmt: skip
            todo = [("cublas", None)] + [
                (kern, t) for t in GRID_TILES for kern in ("triton", "gluon")
            ]
            for kernel, tile in todo:
                row = dict(base, kernel=kernel, tile=list(tile) if tile else None)
                if _key(row) in done:
                    continue
                if time.monotonic() - start > args.deadline_s:
                    print("deadline reached", flush=True)
                    return
                try:
                    if kernel == "cublas":
                        fn = lambda a=a, b=b: torch.matmul(a, b)  # noqa: E731
                    else:
                        knobs = _plan_for_tile(mod, family, tile, m, n, k)
                        if knobs is None:
                            continue
                        cfg = {**mod.CONFIG, **knobs, "GLUON": int(kernel == "gluon")}
                        fit = None
                        if kernel == "gluon":
                            fit = mod.gluon_config(
                                a, cfg, 0 if family == "split_k" else a.element_size()
                            )
                            if not fit:
                                continue
                            row["gluon_stages"] = fit["num_stages"]
                        same = (kernel, tuple(sorted({**knobs, **(fit or {})}.items())))
                        if same in seen:  # (stages lowered to what fits: measured already)
                            continue
                        seen.add(same)
                        row["knobs"] = knobs
                        if ref is None:
                            ref = (a.float() @ b.float()).double()
                        err = float((mod.gemm(a, b, cfg).double() - ref).norm() / ref.norm())
                        row["rel_error"] = err
                        if not err <= tol:
                            row["status"] = "wrong"
                            out.write(json.dumps(row) + "\n")
                            continue
                        fn = lambda a=a, b=b, cfg=cfg, mod=mod: mod.gemm(a, b, cfg)  # noqa: E731
                    row["graph_ms"], row["call_ms"] = _time(fn)
                    row["status"] = "ok"
                except Exception as exc:  # reported as a row, not hidden
                    row["status"] = f"{type(exc).__name__}: {str(exc)[:80]}"
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(f"{family} {m}x{n}x{k} {dt} {kernel} {tile} {row.get('knobs', '')} "
                      f"{row['status']} {row.get('graph_ms', 0):.4f} {row.get('call_ms', 0):.4f}",
                      flush=True)  # fmt: skip
    print("grid complete", flush=True)


if __name__ == "__main__":
    main()
