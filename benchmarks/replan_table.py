"""Emitted GEMM scripts re-planned at many shapes, against cuBLAS (issue 15 verification).

    python benchmarks/replan_table.py EMIT_DIR [--out rows.json]

For each emitted split-K and Stream-K script in EMIT_DIR, and each shape of its family's
list below: the script's own planner chooses the knobs (``replan``, as ``--m/--n/--k`` do),
the result is checked against a float32 matmul (relative error <= 1e-2 bf16, 5e-3 fp16),
and ``gemm`` and ``torch.matmul`` are timed with do_bench (median of 3 medians,
interleaved). Prints one markdown row per shape, losses included.

    --gluon 1|0|both   the scripts' GLUON knob (Hopper: the Gluon warp-specialized kernel;
                       0: the Triton kernels); both: a row for each
    --graph            also time both inside a CUDA graph (do_bench_cudagraph): the GPU
                       time without the Python launch cost (descriptors, argument binding)
    --held-out         8 other shapes (not used to calibrate gpus.yaml's gluon_launch)
    --family F         only the scripts of family F (split_k or stream_k)
    --shapes MxNxK,..  these bf16 shapes instead of the family's list
    --host N           also the host time per call (us): N calls issued back to back
                       after a synchronize, timed on the CPU up to the last issue (the
                       Python launch: what a short kernel cannot hide outside a graph)
    --profile PATH     with --host: cProfile of those N calls, the top functions by own
                       time, appended to PATH per row
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

# (M, N, K, dtype) per family: traced shapes, skinny, unaligned, fp16 and bf16
SHAPES = {
    "split_k": [
        (256, 256, 65536, "bf16"),
        (256, 256, 262144, "bf16"),
        (1000, 600, 50000, "bf16"),
        (128, 128, 131072, "bf16"),
        (512, 384, 131072, "fp16"),
        (64, 4096, 65536, "bf16"),
        (4096, 64, 65536, "fp16"),
        (333, 777, 99999, "bf16"),
        (256, 1024, 32768, "fp16"),
        (768, 768, 40000, "bf16"),
        (96, 96, 500000, "bf16"),
        (1024, 256, 81920, "fp16"),
    ],
    "stream_k": [
        (896, 4864, 8192, "bf16"),
        (896, 2432, 32768, "bf16"),
        (1408, 1664, 16384, "bf16"),
        (1000, 3000, 5000, "bf16"),
        (2048, 2176, 8192, "fp16"),
        (1792, 1536, 12288, "bf16"),
        (999, 4865, 8191, "bf16"),
        (3072, 1152, 16384, "fp16"),
        (1152, 3584, 6144, "bf16"),
        (4224, 512, 20480, "bf16"),
        (640, 6912, 8192, "fp16"),
        (2304, 2304, 9000, "bf16"),
    ],
}
# shapes not used to calibrate gpus.yaml's gluon_launch threshold (a held-out check of it)
HELD_OUT = {
    "split_k": [
        (192, 320, 70000, "bf16"),
        (512, 512, 40960, "fp16"),
        (2000, 128, 60000, "bf16"),
        (384, 1536, 24576, "bf16"),
    ],
    "stream_k": [
        (1280, 2560, 12000, "bf16"),
        (768, 5120, 7000, "fp16"),
        (3000, 1000, 10000, "bf16"),
        (1536, 1792, 4096, "bf16"),
    ],
}
DTYPES = {"bf16": ("bfloat16", 1e-2), "fp16": ("float16", 5e-3)}


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def checked_time(gemm, ref, tol: float, timer, width: int = 80) -> dict:
    """A config's row fields: ``rel_error`` of ``gemm()`` against the float64 ``ref``;
    ``status`` "ok" (then ``ms``: ``timer(gemm)``), "wrong" (error above ``tol``), or the
    exception that stopped it (reported as a row, not hidden)."""
    row: dict = {}
    try:
        err = float((gemm().double() - ref).norm() / ref.norm())
        row["rel_error"] = err
        if not err <= tol:
            row["status"] = "wrong"
        else:
            row["status"] = "ok"
            row["ms"] = timer(gemm)
    except Exception as exc:
        row["status"] = f"{type(exc).__name__}: {str(exc)[:width]}"
    return row


def print_row(row: dict) -> None:
    """One benchmark row as a JSON line (floats to 2 decimals, accuracy columns left out)."""
    print(json.dumps({key: (round(v, 2) if isinstance(v, float) else v)
                      for key, v in row.items() if "rel_error" not in key}),
          flush=True)  # fmt: skip


def _median_ms(fn, graph: bool = False, rounds: int = 3) -> float:
    """Median of ``rounds`` do_bench medians (ms): per call, or inside a CUDA graph
    (do_bench_cudagraph: the GPU time without the Python launch)."""
    import triton.testing

    def once() -> float:
        if graph:
            return triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")
        return triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median")

    return statistics.median(once() for _ in range(rounds))


def host_us(fn, calls: int, profile: str | None = None, label: str = "") -> float:
    """CPU time per call of ``calls`` calls issued back to back (no synchronize between
    them), after a synchronize; with ``profile``, their cProfile appended to that file."""
    import cProfile
    import io
    import pstats
    import time

    import torch

    fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    for _ in range(calls):
        fn()
    if prof:
        prof.disable()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    if prof:
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
        with open(profile, "a") as f:
            f.write(f"==== {label}: {(t1 - t0) / calls * 1e6:.1f} us/call (profiled)\n")
            f.write(text.getvalue())
    return (t1 - t0) / calls * 1e6


def rows_for(
    script: Path,
    family: str,
    gluon: int | None,
    graph: bool,
    shapes: list,
    host: int = 0,
    profile: str | None = None,
) -> list[dict]:
    import torch

    mod = _module(script)
    out = []
    warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    _median_ms(lambda: warm @ warm)  # a warm GPU first: cold clocks slow the first rows
    for m, n, k, dt in shapes:
        dtype, tol = getattr(torch, DTYPES[dt][0]), DTYPES[dt][1]
        cfg = {**mod.CONFIG, **mod.replan(m, n, k)}
        if gluon is not None:
            cfg["GLUON"] = gluon
        g = torch.Generator(device="cpu").manual_seed(0)
        a = torch.randn(m, k, generator=g).to("cuda", dtype)
        b = torch.randn(k, n, generator=g).to("cuda", dtype)
        knobs = {key: cfg[key] for key in mod.KNOBS if key in cfg}
        row = {"family": family, "M": m, "N": n, "K": k, "dtype": dt, "knobs": knobs}
        try:
            ref = (a.float() @ b.float()).double()
            err = float((mod.gemm(a, b, cfg).double() - ref).norm() / ref.norm())
            row["rel_error"] = err
            if not err <= tol:
                row["status"] = "wrong"
                out.append(row)
                continue
            row["status"] = "ok"
            for prefix, in_graph in (("", False), ("graph_", True))[: 1 + graph]:
                mine = _median_ms(lambda a=a, b=b, cfg=cfg: mod.gemm(a, b, cfg), in_graph)
                base = _median_ms(lambda a=a, b=b: torch.matmul(a, b), in_graph)
                row.update({f"{prefix}ms": mine, f"{prefix}cublas_ms": base,
                            f"{prefix}vs_cublas": base / mine})  # fmt: skip
            if host:
                row["host_us"] = host_us(lambda a=a, b=b, cfg=cfg: mod.gemm(a, b, cfg), host)
                row["cublas_host_us"] = host_us(lambda a=a, b=b: torch.matmul(a, b), host)
                if profile:
                    label = f"{family} {m}x{n}x{k} " + " ".join(
                        f"{key}={v}" for key, v in knobs.items()
                    )
                    host_us(lambda a=a, b=b, cfg=cfg: mod.gemm(a, b, cfg), host, profile, label)
        except Exception as exc:  # reported as a row, not hidden
            row.update(status=f"{type(exc).__name__}: {str(exc)[:80]}")
        out.append(row)
        tail = (f" host {row['host_us']:.1f} us (cuBLAS {row['cublas_host_us']:.1f})"
                if "host_us" in row else "")  # fmt: skip
        print(_markdown(row) + tail, flush=True)
    return out


def _markdown(r: dict) -> str:
    knobs = " ".join(f"{k}={v}" for k, v in r["knobs"].items())
    if r.get("status") != "ok":
        return f"| {r['family']} | {r['M']}x{r['N']}x{r['K']} | {r['dtype']} | {knobs} | " \
               f"{r.get('status')} | | | |"  # fmt: skip
    graph = (f" {r['graph_ms']:.4f} | {r['graph_cublas_ms']:.4f} | {r['graph_vs_cublas']:.2f}x |"
             if "graph_ms" in r else "")  # fmt: skip
    return (f"| {r['family']} | {r['M']}x{r['N']}x{r['K']} | {r['dtype']} | {knobs} | ok "
            f"({r['rel_error']:.1e}) | {r['ms']:.4f} | {r['cublas_ms']:.4f} | "
            f"{r['vs_cublas']:.2f}x |" + graph)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("emit_dir")
    p.add_argument("--out")
    p.add_argument("--gluon", choices=["1", "0", "both"])
    p.add_argument("--graph", action="store_true")
    p.add_argument("--held-out", action="store_true", help="the held-out shapes instead")
    p.add_argument("--family", choices=list(SHAPES))
    p.add_argument("--shapes", help="MxNxK,... (bf16) instead of the family's shapes")
    p.add_argument("--host", type=int, default=0, help="host time per call over N calls")
    p.add_argument("--profile", help="with --host: append the calls' cProfile here")
    args = p.parse_args()
    given = [(*map(int, s.split("x")), "bf16") for s in args.shapes.split(",")] if args.shapes \
        else None  # fmt: skip
    rows = []
    head = "| family | M x N x K | dtype | re-planned knobs | check | ms | cuBLAS ms | vs cuBLAS |"
    if args.graph:
        head += " graph ms | graph cuBLAS ms | graph vs cuBLAS |"
    print(head + "\n" + "|---" * head.count(" | ") + "|---|")
    variants = {None: [None], "1": [1], "0": [0], "both": [1, 0]}[args.gluon]
    for family in [args.family] if args.family else SHAPES:
        scripts = sorted(Path(args.emit_dir).glob(f"*_{family}_*.py"))
        if not scripts:
            print(f"no {family} script in {args.emit_dir}", file=sys.stderr)
            continue
        for gluon in variants:
            shapes = given or (HELD_OUT if args.held_out else SHAPES)[family]
            rows += rows_for(scripts[0], family, gluon, args.graph, shapes, args.host, args.profile)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
