"""Time and memory of the analysis on unusual trace shapes (issue 33: "any trace shape").

    python benchmarks/trace_shapes.py [--kernels 200000] [--shapes base names ...]

Each shape is a synthetic trace of ``--kernels`` GPU ops built in memory (no file: the
readers have their own benchmarks), every op launched by one API call 3-9 us before it
starts and separated from the next by 0.5-8 us of idle, on an H200. ``base``: one device,
one stream, one launching thread, 8 kernel names; each other shape changes one thing:

    names        every kernel a distinct name (an XLA or autotuning run: groups = kernels)
    devices64    the ops spread over 64 devices (one process each)
    streams2000  2,000 streams on the device
    threads1000  the launches from 1,000 host threads
    ranges       a top-level NVTX range around every kernel
    ranges1000   1,000 top-level NVTX ranges
    deep200      200 nested NVTX ranges around everything
    copies       every other op a pageable host-to-device copy (cudaMemcpyAsync)
    graphs100    kernels replayed by CUDA graphs, 100 nodes per cudaGraphLaunch
    syncs        a cudaStreamSynchronize after every launch

For each shape, in a fresh process: seconds to analyse (metrics), to apply the rules and
to make the JSON document (as `analyze --format json` writes it), its size (MB), the
findings, and the process's peak RSS (MB). A shape that costs far more per op than
``base`` is a place to look.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

SHAPES: dict[str, dict] = {
    "base": {},
    "names": {"distinct_names": True},
    "devices64": {"devices": 64},
    "streams2000": {"streams": 2000},
    "threads1000": {"threads": 1000},
    "ranges": {"ranges": -1},
    "ranges1000": {"ranges": 1000},
    "deep200": {"depth": 200},
    "copies": {"copies": True},
    "graphs100": {"graph": 100},
    "syncs": {"syncs": True},
}


def build(
    n: int,
    distinct_names: bool = False,
    devices: int = 1,
    streams: int = 1,
    threads: int = 1,
    ranges: int = 0,
    depth: int = 0,
    copies: bool = False,
    graph: int = 0,
    syncs: bool = False,
    seed: int = 0,
):
    """A Trace of ``n`` GPU ops of the shape the arguments give (module doc); ``ranges``
    -1: one range per kernel."""
    from advisor.trace.gpus import match_gpu
    from advisor.trace.model import Trace

    rng = np.random.default_rng(seed)
    took = rng.integers(2_000, 20_000, n)
    idle = rng.integers(500, 8_000, n)
    device = np.arange(n) % devices
    start = np.zeros(n, np.int64)
    for d in range(devices):  # (each device its own timeline)
        mine = device == d
        start[mine] = 1_000_000 + np.cumsum(idle[mine] + took[mine]) - took[mine]
    end = start + took
    names = np.array([f"kernel_{i}" for i in range(n if distinct_names else 8)], dtype=object)
    ids = np.arange(1, n + 1)
    k = pd.DataFrame({
        "device": device.astype(np.int32), "stream": (7 + ids % streams).astype(np.int32),
        "start": start, "end": end, "name": names[ids % len(names)],
        "grid_x": 1000 + (ids % 7) * 100, "grid_y": 1, "grid_z": 1, "block_x": 256,
        "block_y": 1, "block_z": 1, "registers": 32, "static_smem": 0, "dynamic_smem": 0,
        "smem_executed": np.nan, "cluster_x": np.nan, "cluster_y": np.nan, "cluster_z": np.nan,
        "correlation": ids.astype(np.float64), "pid": (1 + device).astype(np.int32),
        "graph_node": np.nan,
    })  # fmt: skip
    k["demangled"] = k["name"]
    call = start - rng.integers(3_000, 9_000, n)
    api = pd.DataFrame({"start": call, "end": call + 2_000, "name": "cudaLaunchKernel",
                        "tid": 10 + ids % threads, "pid": 1 + device,
                        "correlation": ids})  # fmt: skip
    t = Trace(path=f"<{n} ops>", format="test", producer_version="test", kernels=k)
    if graph:  # (a graph's nodes share its launch's correlation id)
        k["graph_node"] = ids.astype(np.float64)
        k["correlation"] = ((ids - 1) // graph * graph + 1).astype(np.float64)
        api = api[(ids - 1) % graph == 0].assign(name="cudaGraphLaunch")
    if copies:
        odd = ids % 2 == 0
        c = k[odd]
        t.memcpy = pd.DataFrame({
            "device": c["device"], "stream": c["stream"], "start": c["start"], "end": c["end"],
            "bytes": 1 << 20, "kind": "HtoD", "correlation": c["correlation"], "pid": c["pid"],
            "src_memory": "pageable", "dst_memory": "device",
        }).reset_index(drop=True)  # fmt: skip
        k = k[~odd].reset_index(drop=True)
        api.loc[odd, "name"] = "cudaMemcpyAsync"
    if syncs:
        after = api["end"].to_numpy() + 100
        waits = pd.DataFrame({"start": after, "end": end[: len(after)] + 500,
                              "name": "cudaStreamSynchronize", "tid": api["tid"].to_numpy(),
                              "pid": api["pid"].to_numpy(), "correlation": ids + n})  # fmt: skip
        api = pd.concat([api, waits], ignore_index=True)
    t.kernels = k
    t.api = api.sort_values("start", kind="stable", ignore_index=True)
    t.nvtx = _ranges(n, ranges, depth, device, devices, call, end)
    spec = match_gpu("H200")
    t.gpus = {d: spec for d in t.devices}
    return t


def _ranges(n, ranges, depth, device, devices, call, end) -> pd.DataFrame:
    """NVTX ranges: ``ranges`` per device around consecutive launches (-1: one a launch),
    and ``depth`` nested ranges around everything."""
    rows = []
    if ranges:
        per = 1 if ranges < 0 else max(n // ranges, 1)
        for d in range(devices):
            at = np.flatnonzero(device == d)
            first, last = at[::per], at[np.minimum(np.arange(per - 1, len(at) + per - 1, per),
                                                    len(at) - 1)]  # fmt: skip
            last = last[: len(first)]
            rows.append(pd.DataFrame({"start": call[first] - 100, "end": call[last] + 2_100,
                                      "text": [f"step_{i % 50}" for i in range(len(first))],
                                      "tid": 10, "pid": 1 + d, "domain": ""}))  # fmt: skip
    if depth:
        lo, hi = call.min() - 10_000, end.max() + 10_000
        level = np.arange(depth)
        rows.append(pd.DataFrame({"start": lo + level * 10, "end": hi - level * 10,
                                  "text": [f"level_{i}" for i in level], "tid": 10, "pid": 1,
                                  "domain": ""}))  # fmt: skip
    if not rows:
        return pd.DataFrame(columns=["start", "end", "text", "tid", "pid", "domain"])
    return pd.concat(rows, ignore_index=True)


def run_shape(shape: str, n: int) -> dict:
    """Analyse one shape in this process: seconds per stage, document size, findings."""
    import resource
    import time

    from advisor.launch import python_strings

    python_strings()  # (as the console entry point has it)
    from advisor.api import Result
    from advisor.findings import find_on_device
    from advisor.options import AnalysisOptions
    from advisor.pipeline import analysis_of

    trace = build(n, **SHAPES[shape])
    t0 = time.perf_counter()
    a = analysis_of(trace, AnalysisOptions()).select(None, None)
    t1 = time.perf_counter()
    findings = find_on_device(a, None)
    t2 = time.perf_counter()
    parts = Result(a, findings).json_parts()  # (what `analyze --format json` writes)
    t3 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"shape": shape, "kernels": n, "analysis_s": round(t1 - t0, 2),
            "rules_s": round(t2 - t1, 2), "json_s": round(t3 - t2, 2),
            "json_mb": round(sum(map(len, parts)) / 1e6, 1), "findings": len(findings),
            "peak_mb": round(peak)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=200_000)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--one", help=argparse.SUPPRESS)  # (the child: one shape)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_shape(args.one, args.kernels)))
        return
    print("| shape | analysis (s) | rules (s) | JSON (s) | JSON (MB) | findings | peak (MB) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for shape in args.shapes:
        out = subprocess.run([sys.executable, __file__, "--one", shape, "--kernels",
                              str(args.kernels)], capture_output=True, text=True, check=True,
                             cwd=ROOT)  # fmt: skip
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {shape} | {r['analysis_s']} | {r['rules_s']} | {r['json_s']} | "
              f"{r['json_mb']} | {r['findings']} | {r['peak_mb']:,} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
