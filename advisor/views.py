"""Summary views an Nsight Systems or HTA user expects beside the findings (pure functions of
an Analysis, in ns and bytes; every column is defined in docs/json.md):

- ``top_kernels``: kernels by GPU time, with their share of the device's kernel time
  (what ``nsys stats --report cuda_gpu_kern_sum`` lists);
- ``copies``: memory copies and sets per device, direction and host memory kind (pageable
  host memory makes a copy synchronous and slow): count, bytes, time, GB/s;
- ``sync_stalls``: which blocking host calls held the GPU idle (cudaStreamSynchronize,
  cudaMemcpy, the copy behind PyTorch's ``.item()``, ...);
- ``pipeline_stages``: the stages of a pipeline recognised from point-to-point kernels, their
  bubble per step against the schedule's ideal (metrics/pipeline.py);
- ``collectives``: per collective kernel name, the skew of its instances across devices;
- what the report's timeline draws: ``busy_shares`` (busy share per device and time bin);
  the charts' other data is built in render/charts.py (docs/charts.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.analysis import Analysis, TraceAnalysis
from advisor.metrics import intervals as iv
from advisor.metrics.keys import group_medians, pack, sorted_codes
from advisor.metrics.pipeline import pipeline_stages as _pipeline
from advisor.metrics.pipeline import point_to_point, stage_steps, step_windows

SEQUENCES_SHOWN = 50  # launch sequences the JSON document lists (most overhead first)
TOP_KERNEL_COLUMNS = ["name", "device", "launches", "total_ns", "median_ns", "share"]
COPY_COLUMNS = ["device", "kind", "host_memory", "count", "bytes", "total_ns", "gb_per_s"]
SYNC_COLUMNS = ["device", "call", "gaps", "total_ns", "median_ns", "max_ns", "worst_at_ns"]
PIPELINE_COLUMNS = ["name", "device", "stage", "stages", "microbatches", "steps", "step_ns",
                    "compute_ns", "bubble_ns", "bubble_fraction", "ideal_fraction",
                    "bubble_per_step_ns"]  # fmt: skip


def top_kernels(a: Analysis) -> pd.DataFrame:
    """Per (kernel name, device) of the selection: launches, total_ns (summed launch time),
    median_ns, share (total_ns / all kernel time of that device); largest total first (then
    by name and device)."""
    return a.derived("top_kernels", _top_kernels)


def order_top_kernels(t: pd.DataFrame) -> pd.DataFrame:
    """top_kernels' row order: total_ns descending, then name and device."""
    return t.sort_values(["total_ns", "name", "device"], ascending=[False, True, True],
                         ignore_index=True, kind="stable")  # fmt: skip


def _top_kernels(a: TraceAnalysis) -> pd.DataFrame:
    ops = a.ops
    kernel = ops["kind"].eq("kernel").to_numpy()
    if not kernel.any():
        return pd.DataFrame(columns=TOP_KERNEL_COLUMNS)
    names = ops["name"].array  # categorical: grouped by its integer codes, not by strings
    # (name code, device) packed in their own dtypes, numbered in that order: the groups of
    # a sorted groupby, counted and summed by group number (no hash table, no pandas
    # groupby: its temporaries were 0.6 GB at 10M kernels)
    packed = pack((names.codes[kernel], ops["device"].to_numpy()[kernel]))
    group, keys = sorted_codes(packed.keys.pop())  # (its one key array, numbered, then let go)
    took = ops["end"].to_numpy()[kernel]
    took -= ops["start"].to_numpy()[kernel]  # (in place: one array of the kernels' count)
    n = len(keys)
    total = np.zeros(n, dtype=np.int64)
    np.add.at(total, group, took)  # (exact integer sums)
    out = pd.DataFrame({
        "name": np.asarray(names.categories, dtype=object)[packed.column(0, keys)],
        "device": packed.column(1, keys),
        "launches": np.bincount(group, minlength=n),
        "total_ns": total,
        "median_ns": np.round(group_medians(group, took, n)).astype(np.int64),
    })  # fmt: skip
    per_device = out.groupby("device")["total_ns"].transform("sum")
    out["share"] = out["total_ns"] / per_device
    return order_top_kernels(out[TOP_KERNEL_COLUMNS])


def copies(a: Analysis) -> pd.DataFrame:
    """Per (device, kind, host_memory) of the selection's copies and sets: count, bytes,
    total_ns and gb_per_s (bytes / total_ns: GB/s, NaN for zero time). ``kind`` is the copy
    direction (HtoD, DtoH, DtoD, PtoP, ...) or ``memset``; ``host_memory`` is the host side's
    memory (pageable, pinned, managed; ``device`` for device-only copies, ``unknown`` when the
    trace does not say). Most time first (then by device, kind, host memory)."""
    return a.derived("copies", _copies)


def order_by_time(t: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``t`` with total_ns descending, ties in the order of ``keys`` (copies, sync_stalls)."""
    return t.sort_values(["total_ns", *keys], ascending=[False] + [True] * len(keys),
                         ignore_index=True, kind="stable")  # fmt: skip


def _copies(a: TraceAnalysis) -> pd.DataFrame:
    ops = a.ops
    rows = np.flatnonzero(ops["kind"].isin(["memcpy", "memset"]).to_numpy())
    if len(rows) == 0:
        return pd.DataFrame(columns=COPY_COLUMNS)
    t = a.trace
    src = ops["src"].to_numpy()[rows]
    is_copy = np.asarray(ops["kind"].array[rows] == "memcpy", dtype=bool)
    # each copy's direction and host memory as codes into ``labels`` (a few texts), not as
    # a Python text per copy (at 10M kernels, 354K copies: ~40 MB of the command's peak)
    labels = ["memset", "device"]
    direction, host = np.zeros(len(rows), dtype=np.int64), np.ones(len(rows), dtype=np.int64)
    nbytes = np.zeros(len(rows), dtype=np.float64)
    if is_copy.any():
        at = src[is_copy]
        table = t.memcpy.iloc[at]  # (only the selection's copies)
        kind, kinds = pd.factorize(table["kind"].astype(str))  # (a missing kind: -1)
        direction[is_copy] = np.where(kind >= 0, len(labels) + kind, -1)
        labels += list(kinds)
        memory, memories = _host_memory(table)
        host[is_copy] = len(labels) + memory
        labels += list(memories)
        nbytes[is_copy] = table["bytes"].to_numpy(np.float64)
    if (~is_copy).any():
        nbytes[~is_copy] = t.memset["bytes"].to_numpy(np.float64)[src[~is_copy]]
    # (grouped on the texts' ranks: in the texts' order, a copy without a kind left out)
    names, rank = np.unique(np.array(labels, dtype=object), return_inverse=True)
    keep = direction >= 0
    frame = pd.DataFrame(
        {
            "device": ops["device"].to_numpy()[rows][keep],
            "kind": rank[direction[keep]],
            "host_memory": rank[host[keep]],
            "bytes": nbytes[keep],
            "took": (ops["end"].to_numpy()[rows] - ops["start"].to_numpy()[rows])[keep],
        }
    )
    g = frame.groupby(["device", "kind", "host_memory"], sort=True)
    sums = g[["bytes", "took"]].sum()  # (column reductions: a named aggregation is 2x slower)
    out = pd.DataFrame({"count": g.size(), "bytes": sums["bytes"], "total_ns": sums["took"]})
    out = out.reset_index()
    for text in ("kind", "host_memory"):
        out[text] = pd.Series(names[out[text].to_numpy()], index=out.index, dtype=str)
    out["gb_per_s"] = out["bytes"] / out["total_ns"].where(out["total_ns"] > 0)
    out["bytes"] = out["bytes"].astype(np.int64)
    return order_by_time(out[COPY_COLUMNS], ["device", "kind", "host_memory"])


def _host_memory(memcpy: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(a code per copy, the texts the codes number) of the host-side memory kind of each
    copy: the source's for copies from the host, the destination's for copies to it,
    ``device`` when neither side is the host (``unknown`` where the trace does not say)."""
    if "src_memory" not in memcpy or "dst_memory" not in memcpy:
        return np.zeros(len(memcpy), dtype=np.int64), np.array(["unknown"], dtype=object)
    codes, kinds = pd.factorize(memcpy["kind"].astype(str))  # (a few kinds: tested once each)
    from_host = np.array([k.startswith(("Hto", "UVM Hto")) for k in kinds], dtype=bool)[codes]
    to_host = np.array([k.endswith("toH") for k in kinds], dtype=bool)[codes]
    src, srcs = pd.factorize(memcpy["src_memory"])  # (missing: -1, "unknown")
    dst, dsts = pd.factorize(memcpy["dst_memory"])
    texts = [*srcs, "unknown", *dsts, "unknown", "device"]
    src = np.where(src >= 0, src, len(srcs))
    dst = len(srcs) + 1 + np.where(dst >= 0, dst, len(dsts))
    out = np.where(from_host, src, np.where(to_host, dst, len(texts) - 1))
    return out, np.array(texts, dtype=object)


def sync_stalls(a: Analysis) -> pd.DataFrame:
    """Per (device, blocking call) of the selection's idle held by blocking calls
    (synchronization and blocking_copy pieces, metrics/attribution.py): gaps, total_ns,
    median_ns, max_ns (per gap) and worst_at_ns (the trace timestamp where the longest such
    piece began). ``call`` is the host API that blocked and the host op that made it
    (``cudaStreamSynchronize (in aten::item)``; "unknown" when the trace lacks it). Most
    time first (then by device and call)."""
    return a.derived("sync_stalls", _sync_stalls)


def _sync_stalls(a: TraceAnalysis) -> pd.DataFrame:
    p = a.pieces
    rows = np.flatnonzero(p["cause"].isin(["synchronization", "blocking_copy"]).to_numpy())
    if len(rows) == 0:
        return pd.DataFrame(columns=SYNC_COLUMNS)
    began = p["start"].to_numpy()[rows]
    # the calls as codes into their sorted names ('' and a missing detail: "unknown"), not
    # as a Python object per piece (at 10M kernels, 241K pieces: 16-40 MB of the peak)
    detail = p["detail"].array
    names = np.asarray(detail.categories, dtype=object)
    calls, call_of = np.unique(np.append(np.where(names == "", "unknown", names), "unknown"),
                               return_inverse=True)  # fmt: skip
    frame = pd.DataFrame(
        {
            "device": p["device"].to_numpy()[rows],
            "call": pd.Categorical.from_codes(call_of[detail.codes[rows]], calls),
            "gap": p["end"].to_numpy()[rows] - began,
            "began": began,
        }
    )
    g = frame.groupby(["device", "call"], sort=True, observed=True)
    gap = g["gap"]
    out = pd.DataFrame({"gaps": g.size(), "total_ns": gap.sum(), "median_ns": gap.median(),
                        "max_ns": gap.max()})  # fmt: skip
    out["median_ns"] = out["median_ns"].round().astype(np.int64)
    # where the longest piece began (ties: the earliest; the pieces come in cause order)
    longest = frame[frame["gap"].to_numpy() == gap.transform("max").to_numpy()]
    out["worst_at_ns"] = longest.groupby(["device", "call"], sort=True, observed=True)[
        "began"
    ].min()
    out = out.reset_index()
    out["call"] = out["call"].astype(str)  # (text, as the other tables' names)
    return order_by_time(out[SYNC_COLUMNS], ["device", "call"])


def pipeline_stages(a: Analysis) -> pd.DataFrame:
    """One row per stage device of a pipeline recognised in the selection (empty when there
    is none): the step family's name (``''``: the whole trace is one step) and the columns of
    metrics/pipeline.py's ``pipeline_stages`` (computed once per analysis)."""
    return a.stages(_stages)


def stage_ops(a: Analysis) -> pd.DataFrame:
    """The selection's ops on the devices that ran point-to-point kernels (device, start,
    end, kind, name, op_class): what the pipeline stages are measured from."""
    return a.derived("stage_ops", _stage_ops)


STAGE_OP_COLUMNS = ["device", "start", "end", "kind", "name", "op_class"]


def _stage_ops(a: TraceAnalysis) -> pd.DataFrame:
    ops = a.ops
    p2p = point_to_point(ops)
    on = np.isin(ops["device"].to_numpy(), np.unique(ops["device"].to_numpy()[p2p]))
    return ops.loc[on, STAGE_OP_COLUMNS].reset_index(drop=True)


def _stages(a: Analysis) -> pd.DataFrame:
    s = a.streams  # (per device and stream: the selection's first and last op)
    if s.empty or s["device"].nunique() < 2:
        return pd.DataFrame(columns=PIPELINE_COLUMNS)
    ops = stage_ops(a)
    p2p = point_to_point(ops)
    if not p2p.any():
        return pd.DataFrame(columns=PIPELINE_COLUMNS)
    family, windows = step_windows(a.region_table(["name", "device", "start_ns", "end_ns"]),
                                   int(s["first_ns"].min()), int(s["last_ns"].max()))  # fmt: skip
    t = _pipeline(stage_steps(ops, p2p, windows))
    if t.empty:
        return pd.DataFrame(columns=PIPELINE_COLUMNS)
    t.insert(0, "name", family)
    return t


COLLECTIVE_COLUMNS = ["name", "instances", "median_skew_ns", "max_skew_ns",
                      "most_often_last_device"]  # fmt: skip


def collectives(a: Analysis) -> pd.DataFrame:
    """Per collective kernel name (metrics/comm.collective_skew's instances): instances,
    median_skew_ns, max_skew_ns (last arrival - first, per instance) and the device most
    often last; integers, largest max_skew_ns first."""
    per = a.collective_instances()
    if per.empty:
        return pd.DataFrame(columns=COLLECTIVE_COLUMNS)
    g = per.groupby("name").agg(
        instances=("skew_ns", "size"),
        median_skew_ns=("skew_ns", "median"),
        max_skew_ns=("skew_ns", "max"),
        most_often_last_device=("last", lambda s: s.mode().iloc[0]),
    )
    g = g.sort_values("max_skew_ns", ascending=False).astype(np.int64)
    return g.rename_axis("name").reset_index()[COLLECTIVE_COLUMNS]


CUT_SHARE = 0.02  # start-up gaps longer than this share of the steady time are cut out
LONG_IDLE = 0.25  # an all-devices-idle stretch longer than this share of the span is cut too


def busy_shares(a: TraceAnalysis, edges: np.ndarray) -> dict[int, np.ndarray]:
    """Per device: the share (0..1) of each time bin [edges[i], edges[i+1]) (trace ns) in
    which it ran any op."""
    segments = a.busy_segments()
    none = (np.array([], np.int64), np.array([], np.int64))
    lo, hi = edges[:-1], edges[1:]
    return {
        int(d): iv.covered_in_windows(segments.get(int(d), none), lo, hi) / np.maximum(hi - lo, 1)
        for d in sorted(a.ops["device"].unique())
    }
