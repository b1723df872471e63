"""Summary views an Nsight Systems or HTA user expects beside the findings (pure functions of
an Analysis, in ns and bytes; every column is defined in docs/json.md):

- ``top_kernels``: kernels by GPU time, with their share of the device's kernel time
  (what ``nsys stats --report cuda_gpu_kern_sum`` lists);
- ``copies``: memory copies and sets per device, direction and host memory kind (pageable
  host memory makes a copy synchronous and slow): count, bytes, time, GB/s;
- ``sync_stalls``: which blocking host calls the synchronization gaps waited in
  (cudaStreamSynchronize, cudaMemcpy, the copy behind PyTorch's ``.item()``, ...);
- ``pipeline_stages``: the stages of a pipeline recognised from point-to-point kernels, their
  bubble per step against the schedule's ideal (metrics/pipeline.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.analysis import Analysis
from advisor.metrics.pipeline import pipeline_stages as _pipeline
from advisor.metrics.pipeline import point_to_point, stage_steps, step_windows

TOP_KERNEL_COLUMNS = ["name", "device", "launches", "total_ns", "median_ns", "share"]
COPY_COLUMNS = ["device", "kind", "host_memory", "count", "bytes", "total_ns", "gb_per_s"]
SYNC_COLUMNS = ["device", "call", "gaps", "total_ns", "median_ns", "max_ns", "worst_at_ns"]
PIPELINE_COLUMNS = ["name", "device", "stage", "stages", "microbatches", "steps", "step_ns",
                    "compute_ns", "bubble_ns", "bubble_fraction", "ideal_fraction",
                    "bubble_per_step_ns"]  # fmt: skip


def top_kernels(a: Analysis) -> pd.DataFrame:
    """Per (kernel name, device) of the selection: launches, total_ns (summed launch time),
    median_ns, share (total_ns / all kernel time of that device); largest total first."""
    ops = a.ops
    rows = np.flatnonzero(ops["kind"].eq("kernel").to_numpy())
    if rows.size == 0:
        return pd.DataFrame(columns=TOP_KERNEL_COLUMNS)
    names = ops["name"].array  # categorical: group by its integer codes, not by strings
    codes = names.codes[rows].astype(np.int64)
    device = ops["device"].to_numpy()[rows].astype(np.int64)
    devices = np.unique(device)
    key = codes * len(devices) + np.searchsorted(devices, device)
    took = ops["end"].to_numpy()[rows] - ops["start"].to_numpy()[rows]
    g = pd.Series(took).groupby(key, sort=True)
    out = pd.DataFrame({"launches": g.size(), "total_ns": g.sum(), "median_ns": g.median()})
    keys = out.index.to_numpy()
    out = out.reset_index(drop=True)
    out.insert(0, "device", devices[keys % len(devices)])
    out.insert(0, "name", np.asarray(names.categories, dtype=object)[keys // len(devices)])
    out["median_ns"] = out["median_ns"].round().astype(np.int64)
    per_device = out.groupby("device")["total_ns"].transform("sum")
    out["share"] = out["total_ns"] / per_device
    out = out.sort_values(["total_ns", "name"], ascending=[False, True], ignore_index=True)
    return out[TOP_KERNEL_COLUMNS]


def copies(a: Analysis) -> pd.DataFrame:
    """Per (device, kind, host_memory) of the selection's copies and sets: count, bytes,
    total_ns and gb_per_s (bytes / total_ns: GB/s, NaN for zero time). ``kind`` is the copy
    direction (HtoD, DtoH, DtoD, PtoP, ...) or ``memset``; ``host_memory`` is the host side's
    memory (pageable, pinned, managed; ``device`` for device-only copies, ``unknown`` when the
    trace does not say)."""
    ops = a.ops
    rows = np.flatnonzero(ops["kind"].isin(["memcpy", "memset"]).to_numpy())
    if len(rows) == 0:
        return pd.DataFrame(columns=COPY_COLUMNS)
    t = a.trace
    kind = np.asarray(ops["kind"].array[rows], dtype=object)
    src = ops["src"].to_numpy()[rows]
    is_copy = kind == "memcpy"
    direction = np.full(len(rows), "memset", dtype=object)
    host = np.full(len(rows), "device", dtype=object)
    nbytes = np.zeros(len(rows), dtype=np.float64)
    if is_copy.any():
        at = src[is_copy]
        table = t.memcpy.iloc[at]  # (only the selection's copies: the strings are per row)
        direction[is_copy] = table["kind"].astype(str).to_numpy()
        host[is_copy] = _host_memory(table).to_numpy()
        nbytes[is_copy] = table["bytes"].to_numpy(np.float64)
    if (~is_copy).any():
        nbytes[~is_copy] = t.memset["bytes"].to_numpy(np.float64)[src[~is_copy]]
    frame = pd.DataFrame(
        {
            "device": ops["device"].to_numpy()[rows],
            "kind": direction,
            "host_memory": host,
            "bytes": nbytes,
            "took": (ops["end"].to_numpy() - ops["start"].to_numpy())[rows],
        }
    )
    g = frame.groupby(["device", "kind", "host_memory"], sort=True)
    out = g.agg(count=("took", "size"), bytes=("bytes", "sum"), total_ns=("took", "sum"))
    out = out.reset_index()
    out["gb_per_s"] = out["bytes"] / out["total_ns"].where(out["total_ns"] > 0)
    out["bytes"] = out["bytes"].astype(np.int64)
    return out.sort_values("total_ns", ascending=False, ignore_index=True)[COPY_COLUMNS]


def _host_memory(memcpy: pd.DataFrame) -> pd.Series:
    """The host-side memory kind of each copy: the source's for copies from the host, the
    destination's for copies to it, ``device`` when neither side is the host."""
    if "src_memory" not in memcpy or "dst_memory" not in memcpy:
        return pd.Series("unknown", index=memcpy.index)
    kind = memcpy["kind"].astype(str)
    src = memcpy["src_memory"].astype(object).fillna("unknown")
    dst = memcpy["dst_memory"].astype(object).fillna("unknown")
    from_host = kind.str.startswith("Hto") | kind.str.startswith("UVM Hto")
    to_host = kind.str.endswith("toH")
    out = np.where(from_host, src, np.where(to_host, dst, "device"))
    return pd.Series(out, index=memcpy.index)


def sync_stalls(a: Analysis) -> pd.DataFrame:
    """Per (device, blocking call) of the selection's synchronization gaps: gaps, total_ns,
    median_ns, max_ns and worst_at_ns (the trace timestamp where the longest such gap
    began). ``call`` is the host API that blocked ("unknown" when the trace lacks it)."""
    ops = a.ops
    rows = np.flatnonzero(ops["cause"].eq("synchronization").to_numpy())
    if len(rows) == 0:
        return pd.DataFrame(columns=SYNC_COLUMNS)
    gap = ops["gap_ns"].to_numpy()[rows]
    frame = pd.DataFrame(
        {
            "device": ops["device"].to_numpy()[rows],
            "call": pd.Series(np.asarray(ops["sync_call"].array[rows], dtype=object)).fillna(
                "unknown"
            ),
            "gap": gap,
            "began": ops["start"].to_numpy()[rows] - gap,
        }
    )
    g = frame.groupby(["device", "call"], sort=True)
    out = g.agg(
        gaps=("gap", "size"), total_ns=("gap", "sum"), median_ns=("gap", "median"),
        max_ns=("gap", "max"),
    )  # fmt: skip
    out["median_ns"] = out["median_ns"].round().astype(np.int64)
    out["worst_at_ns"] = frame.loc[g["gap"].idxmax().to_numpy(), "began"].to_numpy()
    out = out.reset_index().sort_values("total_ns", ascending=False, ignore_index=True)
    return out[SYNC_COLUMNS]


def pipeline_stages(a: Analysis) -> pd.DataFrame:
    """One row per stage device of a pipeline recognised in the selection (empty when there
    is none): the step family's name (``''``: the whole trace is one step) and the columns of
    metrics/pipeline.py's ``pipeline_stages`` (computed once per analysis)."""
    if "stages" not in a._tables:
        a._tables["stages"] = _stages(a)
    return a._tables["stages"].copy()


def _stages(a: Analysis) -> pd.DataFrame:
    ops = a.ops
    if ops.empty or ops["device"].nunique() < 2:
        return pd.DataFrame(columns=PIPELINE_COLUMNS)
    p2p = point_to_point(ops)
    if not p2p.any():
        return pd.DataFrame(columns=PIPELINE_COLUMNS)
    family, windows = step_windows(a.regions, ops)
    t = _pipeline(stage_steps(ops, p2p, windows))
    if t.empty:
        return pd.DataFrame(columns=PIPELINE_COLUMNS)
    t.insert(0, "name", family)
    return t
