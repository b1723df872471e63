"""Run every metric over one Trace and collect the tables the renderers and rules use.

``analyze(trace)`` computes per launch, per device and per top-level NVTX range (region);
``Analysis.select(range_text, device)`` narrows the result to some regions/devices and
recomputes the summary over them. All times are ns; every column is defined in
docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from advisor.metrics import intervals as iv
from advisor.metrics.comm import (
    classify_ops,
    collective_skew,
    device_segments,
    same_stream_comm,
    window_comm,
)
from advisor.metrics.gaps import (
    OVERHEAD_CAUSES,
    attribute_gaps,
    device_ops,
    gap_breakdown,
    launch_sequences,
    stream_summary,
)
from advisor.metrics.gemm import ShapeOption, shape_columns
from advisor.metrics.regions import assign_ops, region_windows, top_level_ranges
from advisor.metrics.waves import kernel_groups, launch_waves
from advisor.trace.model import Trace

WINDOW_COLUMNS = [
    "gpu_busy_ns",
    "idle_ns",
    "tail_idle_ns",
    "underfill_idle_ns",
    "launch_overhead_ns",
    "sync_idle_ns",
    "sync_gaps",
    "startup_idle_ns",
    "unattributed_idle_ns",
    "comm_ns",
    "compute_ns",
    "overlap_ns",
    "exposed_comm_ns",
    "comm_wait_ns",
    "same_stream_comm_ns",
]


# idle time the strategies address (tail, under-fill, launch overhead, sync, exposed comm)
RECOVERABLE = ["tail_idle_ns", "underfill_idle_ns", "launch_overhead_ns", "sync_idle_ns",
               "exposed_comm_ns"]  # fmt: skip

# the per-device tables of an Analysis, narrowed together by Analysis.select
_DEVICE_TABLES = ("ops", "launches", "devices", "regions", "sequences", "gaps", "streams",
                  "collectives")  # fmt: skip


@dataclass
class Analysis:
    """Everything measured on one trace (see docs/metrics.md for each column)."""

    trace: Trace
    ops: pd.DataFrame  # every GPU op: gap, cause, class, tail idle, range_id
    launches: pd.DataFrame  # kernel launches with wave columns and range_id
    devices: pd.DataFrame  # one window per device: first..last op
    regions: pd.DataFrame  # one window per (top-level NVTX range, device)
    sequences: pd.DataFrame  # launch sequences (gaps.launch_sequences)
    gaps: pd.DataFrame  # gap breakdown per (device, cause)
    streams: pd.DataFrame  # per (device, stream): ops, busy, own gaps
    collectives: pd.DataFrame  # comm ops matched across devices
    selection: dict = field(default_factory=dict)
    _tables: dict = field(default_factory=dict, repr=False)  # kernel_table cache

    def kernel_table(self, by_region: bool = False) -> pd.DataFrame:
        """Kernel groups of the current selection (optionally split per region name)."""
        if by_region in self._tables:
            return self._tables[by_region].copy()
        if self.launches.empty:
            return self.launches
        shape = ("batch", "m", "n", "k", "shape_source")
        by = ("region", *shape) if by_region else shape
        self._tables[by_region] = kernel_groups(self.launches, by=by)
        return self._tables[by_region].copy()

    def region_totals(self) -> pd.DataFrame:
        """Per (top-level range name, device), in group order: ``instances``, the sums of
        WINDOW_COLUMNS and ``window_ns`` over its instances, and ``recoverable_ns`` (the sum
        of RECOVERABLE: the idle time the strategies address)."""
        r = self.regions.assign(window_ns=self.regions["end_ns"] - self.regions["start_ns"])
        g = r.groupby(["name", "device"], as_index=False).agg(
            instances=("start_ns", "size"),
            **{c: (c, "sum") for c in (*WINDOW_COLUMNS, "window_ns")},
        )
        g["recoverable_ns"] = g[RECOVERABLE].sum(axis=1)
        return g

    def summary(self) -> dict:
        """Totals over the selected windows (regions when a range is selected, else devices)."""
        windows = self.regions if self.selection.get("range") else self.devices
        if windows.empty:
            return {"span_ns": 0, "window_ns": 0, **{c: 0 for c in WINDOW_COLUMNS}, "devices": 0}
        out = {
            "span_ns": int(windows["end_ns"].max() - windows["start_ns"].min()),
            "window_ns": int((windows["end_ns"] - windows["start_ns"]).sum()),
        }
        for col in WINDOW_COLUMNS:
            out[col] = int(round(float(windows[col].sum())))
        comm = out["comm_ns"]
        out["overlap_ratio"] = out["overlap_ns"] / comm if comm else None
        out["devices"] = int(windows["device"].nunique())
        return out

    def select(self, range_text: str | None = None, device: int | None = None) -> Analysis:
        """A view restricted to regions whose name contains ``range_text`` and/or one device."""
        t = {name: getattr(self, name) for name in _DEVICE_TABLES}
        if device is not None:
            t = {name: df[df["device"] == device] for name, df in t.items()}
        if range_text:
            regions = t["regions"]
            regions = regions[regions["name"].str.contains(range_text, regex=False)]
            ids = set(regions["range_id"])
            ops = t["ops"][t["ops"]["range_id"].isin(ids)]
            lo, hi = regions["start_ns"].min(), regions["end_ns"].max()
            seq, coll = t["sequences"], t["collectives"]
            t.update(
                regions=regions,
                ops=ops,
                launches=t["launches"][t["launches"]["range_id"].isin(ids)],
                sequences=seq[(seq["start_ns"] >= lo) & (seq["end_ns"] <= hi)],
                gaps=gap_breakdown(ops),
                streams=stream_summary(ops),
                collectives=coll[coll["start"].between(lo, hi)],
            )
        return replace(self, **t, selection={"range": range_text, "device": device}, _tables={})


def window_metrics(ops: pd.DataFrame, windows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Fill WINDOW_COLUMNS for windows (device, start_ns, end_ns + ``keys``).

    Busy/idle/comm come from all of the device's work clipped to the window; tail idle,
    gaps and comm waits from the window's own ops (those whose keys match), and a gap counts
    only when it opens inside the window.
    """
    out = windows.copy()
    if out.empty:
        for col in WINDOW_COLUMNS:
            out[col] = pd.Series(dtype="float64")
        out["overlap_ratio"] = pd.Series(dtype="float64")
        return out
    busy = np.zeros(len(out), dtype=np.int64)
    segments = device_segments(ops, np.ones(len(ops), dtype=bool))
    empty = (np.array([], np.int64), np.array([], np.int64))
    for device, rows in out.groupby("device").indices.items():
        seg = segments.get(int(device), empty)
        busy[rows] = iv.covered_in_windows(
            seg, out["start_ns"].to_numpy()[rows], out["end_ns"].to_numpy()[rows]
        )
    out["gpu_busy_ns"] = busy
    out["idle_ns"] = (out["end_ns"] - out["start_ns"]) - busy

    win = out[keys + ["start_ns"]].rename(columns={"start_ns": "_win_start"})
    win_start = ops[keys].merge(win, on=keys, how="left")["_win_start"].to_numpy()
    gap = ops["gap_ns"].where(ops["gap_start"].to_numpy() >= win_start, 0)
    sums = pd.DataFrame(
        {
            "tail_idle_ns": ops["tail_idle_ns"],
            "underfill_idle_ns": ops["underfill_idle_ns"],
            "launch_overhead_ns": gap.where(ops["cause"].isin(OVERHEAD_CAUSES), 0),
            "sync_idle_ns": gap.where(ops["cause"].eq("synchronization"), 0),
            "sync_gaps": ((gap > 0) & ops["cause"].eq("synchronization")).astype(int),
            "startup_idle_ns": gap.where(ops["cause"].eq("startup"), 0),
            "unattributed_idle_ns": gap.where(ops["cause"].eq("unattributed"), 0),
            "comm_wait_ns": ops["wait_ns"],
            "same_stream_comm_ns": (ops["end"] - ops["start"]).where(ops["same_stream_comm"], 0),
        }
    ).astype("float64")
    totals = pd.concat([ops[keys], sums], axis=1).groupby(keys).sum().reset_index()
    merged = out[keys].merge(totals, on=keys, how="left").fillna(0)
    for col in sums.columns:
        out[col] = merged[col].to_numpy()
    comm = window_comm(ops, ops["op_class"], out)
    for col in comm.columns:
        out[col] = comm[col].to_numpy()
    return out


def analyze(trace: Trace, shapes: Sequence[ShapeOption] = ()) -> Analysis:
    """Compute every metric of one trace (unfiltered). ``shapes``: --shape options."""
    ops = attribute_gaps(device_ops(trace), trace.api)
    ops["op_class"] = classify_ops(ops)
    ops["same_stream_comm"] = same_stream_comm(ops, ops["op_class"])
    skew = collective_skew(ops, ops["op_class"])
    ops["wait_ns"] = 0.0
    ops["last_device"] = np.nan
    if len(skew):
        key = ops.set_index(["device", "start", "name"]).index
        matched = skew.set_index(["device", "start", "name"]).reindex(key)
        ops["wait_ns"] = matched["wait_ns"].fillna(0).to_numpy()
        ops["last_device"] = matched["last_device"].to_numpy(dtype="float64")

    ranges = top_level_ranges(trace.nvtx)
    ops["range_id"] = assign_ops(ops, ranges)
    names = ranges.set_index("range_id")["text"] if len(ranges) else pd.Series(dtype=str)
    ops["region"] = ops["range_id"].map(names)

    kernels = trace.kernels
    waves = launch_waves(kernels, trace.gpus) if len(kernels) else pd.DataFrame()
    is_kernel = ops["kind"].eq("kernel")
    ops["tail_idle_ns"] = 0.0
    ops["underfill_idle_ns"] = 0.0
    launches = pd.DataFrame()
    if len(kernels):
        src = ops.loc[is_kernel, "src"].to_numpy()
        ops.loc[is_kernel, "tail_idle_ns"] = waves["tail_idle_ns"].to_numpy()[src]
        ops.loc[is_kernel, "underfill_idle_ns"] = waves["underfill_idle_ns"].to_numpy()[src]
        launches = pd.concat([kernels, waves], axis=1)
        launches["range_id"] = -1
        launches.loc[src, "range_id"] = ops.loc[is_kernel, "range_id"].to_numpy()
        launches["region"] = launches["range_id"].map(names)
        for col in ("api_start", "api_tid"):
            launches[col] = np.nan
            launches.loc[src, col] = ops.loc[is_kernel, col].to_numpy(dtype="float64")
        launches = pd.concat([launches, shape_columns(launches, trace.nvtx, shapes)], axis=1)

    dev = ops.groupby("device").agg(start_ns=("start", "min"), end_ns=("end", "max"))
    devices = window_metrics(ops, dev.reset_index(), ["device"])
    regions = window_metrics(ops, region_windows(ops, ranges), ["range_id", "device"])
    return Analysis(
        trace=trace,
        ops=ops,
        launches=launches,
        devices=devices,
        regions=regions,
        sequences=launch_sequences(ops),
        gaps=gap_breakdown(ops),
        streams=stream_summary(ops),
        collectives=skew,
    )
