"""Hand-built traces for tests whose expected numbers are computed by hand."""

from __future__ import annotations

import pandas as pd

from advisor.trace.gpus import match_gpu
from advisor.trace.model import Trace

KERNEL_DEFAULTS = dict(
    device=0,
    stream=7,
    name="k",
    grid_x=1,
    grid_y=1,
    grid_z=1,
    block_x=128,
    block_y=1,
    block_z=1,
    registers=32,
    static_smem=0,
    dynamic_smem=0,
    smem_executed=float("nan"),
    cluster_x=float("nan"),
    cluster_y=float("nan"),
    cluster_z=float("nan"),
    correlation=float("nan"),
    pid=1,
    graph_node=float("nan"),
)


def kernels(rows: list[dict]) -> pd.DataFrame:
    """Kernel table from partial rows (start, end required; ``demangled``, the full name,
    defaults to the name)."""
    df = pd.DataFrame([{**KERNEL_DEFAULTS, **r} for r in rows])
    df["demangled"] = df["demangled"].fillna(df["name"]) if "demangled" in df else df["name"]
    return df


def api(rows: list[tuple]) -> pd.DataFrame:
    """API table from (name, start, end, correlation) tuples on pid 1, thread 10."""
    return pd.DataFrame(
        [
            {"start": s, "end": e, "name": n, "tid": 10, "pid": 1, "correlation": c}
            for n, s, e, c in rows
        ]
    )


def nvtx(rows: list[tuple]) -> pd.DataFrame:
    """NVTX ranges from (text, start, end) on pid 1, thread 10."""
    return pd.DataFrame(
        [{"start": s, "end": e, "text": t, "tid": 10, "pid": 1, "domain": ""} for t, s, e in rows]
    )


def trace(kernel_rows: list[dict], api_rows=(), nvtx_rows=(), gpu: str = "H200") -> Trace:
    t = Trace(
        path="<hand-built>", format="test", producer_version="test", kernels=kernels(kernel_rows)
    )
    if api_rows:
        t.api = api(list(api_rows))
    if nvtx_rows:
        t.nvtx = nvtx(list(nvtx_rows))
    spec = match_gpu(gpu)
    t.gpus = {d: spec for d in t.devices}
    return t


def two_device_steps(steps: list[list[tuple]], gap_us: int = 1000) -> Trace:
    """Two devices' steps one after another (gap_us apart), each inside a 'train_step' range
    per device (one process per device, every kernel launched 4-2 us before it starts).
    ``steps``: per step, (device, kernel name, start, end) rows in us from the step's start."""
    kernels, api, nvtx, offset, corr = [], [], [], 0, 1
    for rows in steps:
        end = max(r[3] for r in rows)
        for d in (0, 1):
            nvtx.append(
                {
                    "start": (offset - 5) * 1000,
                    "end": (offset + end + 5) * 1000,
                    "text": "train_step",
                    "tid": 10 + d,
                    "pid": 1 + d,
                    "domain": "",
                }
            )
        for d, name, s, e in sorted(rows, key=lambda r: (r[2], r[0])):
            kernels.append(
                {
                    **KERNEL_DEFAULTS,
                    "device": d,
                    "pid": 1 + d,
                    "name": name,
                    "start": (offset + s) * 1000,
                    "end": (offset + e) * 1000,
                    "correlation": corr,
                    "grid_x": 1056,  # one full wave on an H200 (8 CTAs x 132 SMs)
                    "block_x": 256,
                }
            )
            api.append(
                {
                    "start": (offset + s) * 1000 - 4000,
                    "end": (offset + s) * 1000 - 2000,
                    "name": "cudaLaunchKernel",
                    "tid": 10 + d,
                    "pid": 1 + d,
                    "correlation": corr,
                }
            )
            corr += 1
        offset += end + gap_us
    k = pd.DataFrame(kernels)
    k["demangled"] = k["name"]
    t = Trace(path="<hand-built pipeline>", format="test", producer_version="test", kernels=k)
    t.api = pd.DataFrame(api).sort_values("start", ignore_index=True)
    t.nvtx = pd.DataFrame(nvtx)
    t.gpus = {d: match_gpu("H200") for d in (0, 1)}
    return t
