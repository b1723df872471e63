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
    """Kernel table from partial rows (start, end required)."""
    df = pd.DataFrame([{**KERNEL_DEFAULTS, **r} for r in rows])
    df["demangled"] = df["name"]
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
