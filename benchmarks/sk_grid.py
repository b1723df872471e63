"""Stream-K policy x tile x kernel, measured: the rows the planner's joint choice of tile
and Stream-K policy is fitted to (issue 29, Stream-K++; round 7 of docs/verification).

    python benchmarks/sk_grid.py STREAM_K_SCRIPT --out rows.jsonl [--deadline SECONDS]

STREAM_K_SCRIPT is an emitted Stream-K script (`advisor analyze ... --emit DIR`); its
``gemm`` runs every config. At each shape of replan_table.py's Stream-K lists (12 + 4 held
out), every tile of TILES per kernel (Gluon on Hopper, Triton) under every Stream-K policy
(SK_POLICIES; policies that give the same schedule are run once and the row lists them
all), with NUM_PROGS the tile's resident CTAs (one per SM for Gluon). Each config is
checked against a float32 matmul (relative error <= 1e-2 bf16, 5e-3 fp16; a wrong one is a
row with its status), then timed inside a CUDA graph (do_bench_cudagraph, median); cuBLAS
(torch.matmul) likewise before and after each shape's configs. Gluon rows for every shape
first, then Triton ones, so a run stopped at the deadline keeps the complete Gluon table.
One JSON line per config, written as it is measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replan_table import DTYPES, HELD_OUT, SHAPES, _module, checked_time  # noqa: E402

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) per kernel; the Gluon kernel lowers
# num_stages where the ring and the output tile would not fit its shared memory
TILES = {
    "gluon": [
        (128, 256, 64, 8, 4),
        (256, 128, 64, 8, 3),
        (128, 128, 64, 4, 4),
        (128, 128, 64, 8, 4),
        (128, 128, 128, 8, 3),
        (64, 256, 64, 4, 4),
    ],
    "triton": [
        (128, 256, 64, 8, 4),
        (256, 128, 64, 8, 3),
        (128, 128, 64, 4, 4),
        (128, 128, 128, 8, 3),
    ],
}
REP_MS = 30


def _graph_ms(fn) -> float:
    import triton.testing

    return triton.testing.do_bench_cudagraph(fn, rep=REP_MS, return_mode="median")


def configs(mod, m: int, n: int, k: int, kernel: str, sms: int):
    """(cfg, policies) per distinct schedule of each tile of ``kernel``."""
    for bm, bn, bk, warps, stages in TILES[kernel]:
        ctas = mod.tile_ctas_per_sm(bm, bn, bk, warps, stages, mod.GPU)
        if ctas == 0:
            continue
        slots = sms if kernel == "gluon" else ctas * sms
        tiles = -(-m // bm) * -(-n // bn)
        progs = min(slots, tiles * -(-k // bk))
        by_dp: dict[int, list[int]] = {}
        for policy in mod.SK_POLICIES:
            by_dp.setdefault(mod.sk_data_parallel_tiles(tiles, progs, policy), []).append(policy)
        for dp_tiles, policies in by_dp.items():
            cfg = {**mod.CONFIG, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                   "num_warps": warps, "num_stages": stages, "GROUP_M": 8,
                   "NUM_PROGS": slots, "SK_TILES": policies[0],
                   "GLUON": int(kernel == "gluon")}  # fmt: skip
            yield cfg, policies, dict(tiles=tiles, progs=progs, dp_tiles=dp_tiles)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, default=540.0, help="seconds, then stop")
    ap.add_argument("--kernels", default="gluon,triton")
    a = ap.parse_args()
    import torch

    t0 = time.monotonic()
    mod = _module(Path(a.script))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        _graph_ms(lambda: warm @ warm)  # a warm GPU first
    with Path(a.out).open("a") as out:
        measure(mod, a, out, t0, sms)


def measure(mod, a, out, t0: float, sms: int) -> None:
    """The rows, Gluon for every shape first, appended to ``out`` as they are measured."""
    import torch

    shapes = SHAPES["stream_k"] + HELD_OUT["stream_k"]
    held = set(HELD_OUT["stream_k"])
    for kernel in a.kernels.split(","):
        for shape in shapes:
            m, n, k, dt = shape
            if time.monotonic() - t0 > a.deadline:
                print(f"deadline: stopped before {kernel} {shape}", flush=True)
                return
            dtype, tol = getattr(torch, DTYPES[dt][0]), DTYPES[dt][1]
            g = torch.Generator(device="cpu").manual_seed(0)
            x = torch.randn(m, k, generator=g).to("cuda", dtype)
            y = torch.randn(k, n, generator=g).to("cuda", dtype)
            ref = (x.float() @ y.float()).double()
            cublas = [_graph_ms(lambda x=x, y=y: torch.matmul(x, y))]
            rows = []
            for cfg, policies, sched in configs(mod, m, n, k, kernel, sms):
                tile = [cfg[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps",
                                             "num_stages")]  # fmt: skip
                row = {"M": m, "N": n, "K": k, "dtype": dt, "held_out": shape in held,
                       "kernel": kernel, "tile": tile, "policies": policies, **sched}  # fmt: skip
                row.update(checked_time(lambda cfg=cfg, x=x, y=y: mod.gemm(x, y, cfg), ref, tol,
                                        _graph_ms, width=100))  # fmt: skip
                rows.append(row)
            cublas.append(_graph_ms(lambda x=x, y=y: torch.matmul(x, y)))
            for row in rows:
                row["cublas_ms"] = statistics.mean(cublas)
                if "ms" in row:
                    row["vs_cublas"] = row["cublas_ms"] / row["ms"]
                out.write(json.dumps(row) + "\n")
            out.flush()
            best = max((r for r in rows if "ms" in r), key=lambda r: r["vs_cublas"], default={})
            print(f"{kernel} {m}x{n}x{k} {dt}: {len(rows)} configs, cuBLAS "
                  f"{cublas[0] * 1e3:.1f}/{cublas[1] * 1e3:.1f} us, best "
                  f"{best.get('tile')} {best.get('policies')} "
                  f"{best.get('ms', 0) * 1e3:.1f} us {best.get('vs_cublas', 0):.3f}x "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
