"""Measure emitted GEMM configs against the traced kernels on a GPU (issue 3 verification).

    python benchmarks/verify_emitted.py EMIT_DIR [--out results.json]

For every emitted GEMM script in EMIT_DIR: run ``--check --bench`` at the trace's shape, and
time the sample workload's own tiled Triton kernel (sample_traces/workloads/tiled_gemm.py)
at the same shape and tile with the same do_bench settings (the trace's time was taken
under the profiler). Prints a markdown table: shape, baseline kernel time (trace and
re-measured), emitted config time, torch.matmul time, speed-ups.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sample_traces" / "workloads"))


def baseline_ms(m: int, n: int, k: int, tile: tuple[int, ...]) -> float:
    import torch
    import triton.testing
    from tiled_gemm import tiled_gemm

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    bm, bn, bk, warps, stages = tile
    return triton.testing.do_bench(
        lambda: tiled_gemm(a, b, bm, bn, bk, warps, stages),
        warmup=100,
        rep=400,
        return_mode="median",
    )


# the traced kernels' tiles, from sample_traces/h200_scheduling.facts.json
TRACED_TILES = {
    (896, 4864, 8192): (128, 256, 64, 8, 3),
    (768, 5632, 8192): (128, 256, 64, 8, 3),
    (256, 256, 65536): (128, 128, 64, 4, 3),
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("emit_dir")
    p.add_argument("--out", default=None)
    p.add_argument("--extra", action="append", default=[], help="extra args per script")
    args = p.parse_args()
    rows = []
    for script in sorted(Path(args.emit_dir).glob("*.py")):
        meta = (
            json.loads(script.with_suffix(".json").read_text())
            if script.with_suffix(".json").exists()
            else None
        )
        if meta is None:
            continue
        knobs = meta["knobs"]
        for extra in [[]] + [e.split() for e in args.extra]:
            proc = subprocess.run(
                [sys.executable, str(script), "--check", "--bench", *extra],
                capture_output=True,
                text=True,
                timeout=600,
            )
            out = proc.stdout + proc.stderr
            mine = re.search(rf"{knobs['strategy']}\s+([\d.]+) ms", out)
            torch_ms = re.search(r"torch\.matmul\s+([\d.]+) ms", out)
            row = {
                "script": script.name,
                "extra": " ".join(extra),
                "rc": proc.returncode,
                "strategy": knobs["strategy"],
                "shape": [knobs["M"], knobs["N"], knobs["K"]],
                "trace_ms": (knobs.get("trace_kernel_ns") or 0) / 1e6,
                "config_ms": float(mine.group(1)) if mine else None,
                "torch_ms": float(torch_ms.group(1)) if torch_ms else None,
                "log": out[-3000:],
            }
            shape = tuple(row["shape"])
            if shape in TRACED_TILES:
                row["baseline_ms"] = baseline_ms(*shape, TRACED_TILES[shape])
            rows.append(row)
            print(out, flush=True)
    print(
        "| script | extra | shape MxNxK | traced kernel (trace) | traced kernel (do_bench) "
        "| emitted config | torch.matmul | speed-up vs traced (do_bench) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        base = r.get("baseline_ms")
        speed = f"{base / r['config_ms']:.2f}x" if base and r["config_ms"] else "-"
        cfg = f"{r['config_ms']:.4f} ms" if r["config_ms"] else f"failed (rc {r['rc']})"
        print(
            f"| {r['script']} | {r['extra']} | {'x'.join(map(str, r['shape']))} | "
            f"{r['trace_ms']:.4f} ms | {base or 0:.4f} ms | {cfg} | "
            f"{r['torch_ms'] or 0:.4f} ms | {speed} |"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
