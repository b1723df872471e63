"""Run every metric over one Trace and collect the tables the renderers and rules use.

``analyze(trace)`` computes per launch, per device and per top-level NVTX range (region)
into a TraceAnalysis; ``TraceAnalysis.select(range_text, device)`` narrows it to some
regions/devices and recomputes the summary over them. A job analysed rank by rank is merged
into a MergedAnalysis (parts.py); both are an ``Analysis``, what the renderers and rules
read. All times are ns; every column is defined in docs/metrics.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal, NamedTuple, Protocol, get_args

import numpy as np
import pandas as pd

from advisor.data import name_matches
from advisor.errors import AdvisorInputError
from advisor.metrics import intervals as iv
from advisor.metrics.ahead import analysis_threads, beside
from advisor.metrics.columns import column
from advisor.metrics.comm import (
    class_segments,
    classify_ops,
    collective_skew,
    overlap_ratio,
    same_stream_comm,
    sorted_codes,
    window_comm,
)
from advisor.metrics.comm_regions import RegionCommSums, region_comm_sums
from advisor.metrics.counters import GROUP_AGGREGATES, add_group_counters, launch_counters
from advisor.metrics.gaps import (
    OP_DTYPES,
    OVERHEAD_CAUSES,
    attribute_gaps,
    device_ops,
    gap_breakdown,
    launch_sequences,
    piece_segments,
    stream_summary,
)
from advisor.metrics.gemm import GemmOption, ShapeOption, launch_shapes, nvtx_shapes
from advisor.metrics.grouping import rows_by_value
from advisor.metrics.keys import distinct, first_rows, pack, row_dtype
from advisor.metrics.regions import (
    OUTSIDE_RANGES,
    measured_start,
    region_windows,
    top_level_ranges,
)
from advisor.metrics.waves import (
    CONFIG_KEYS,
    kernel_groups,
    launch_idle,
    wave_configs,
    with_configuration,
    without_configuration,
)
from advisor.trace.model import Trace
from advisor.trace.quality import coverage_counts, coverage_notes, unknown_resources

WINDOW_COLUMNS = [
    "gpu_busy_ns",
    "idle_ns",
    "tail_idle_ns",
    "underfill_idle_ns",
    "launch_overhead_ns",
    "sync_idle_ns",
    "sync_gaps",
    "copy_idle_ns",
    "input_idle_ns",
    "host_busy_idle_ns",
    "queued_idle_ns",
    "startup_idle_ns",
    "unattributed_idle_ns",
    "comm_ns",
    "compute_ns",
    "overlap_ns",
    "exposed_comm_ns",
    "startup_exposed_comm_ns",
    "comm_wait_ns",
    "same_stream_comm_ns",
]

# what a summary reads of each window (Analysis.summary)
_SUMMARY_COLUMNS = ["device", "start_ns", "end_ns", "lead_ns", *WINDOW_COLUMNS]


# per-op columns that only the analysis's own windows (window_metrics) and launch sequences
# read: dropped from the ops once those are measured (10M ops: 9 bytes each, 0.09 GB)
WINDOW_ONLY_OP_COLUMNS = ("same_stream_comm", "correlation")
# a range's counts that its totals sum over its instances (region_windows' ops, launches)
OP_COUNTS = ("ops", "launches")
# per-launch idle (waves.launch_idle) the windows sum over their kernel ops
LAUNCH_IDLE_COLUMNS = ("tail_idle_ns", "underfill_idle_ns")
# kernel columns that only device_ops reads (it makes the ops' ``graph``, ``correlation``),
# or nothing does (cluster dims): not in the launch table
OPS_ONLY_KERNEL_COLUMNS = ("correlation", "graph_node", "cluster_x", "cluster_y", "cluster_z")
# kernel columns device_ops copies into the ops: the launch table's, gathered back from the
# ops where the trace's kernels are released (analyze's release_api)
OP_KERNEL_COLUMNS = ("device", "stream", "start", "end", "pid")
# a launch's columns that its kernel op holds: read through the launch table's ``op``
# (launch_columns), not held by it
LAUNCH_OP_COLUMNS = (*OP_KERNEL_COLUMNS, "range_id", "region")
# what launch_columns adds to the launch table's own columns (and, asked for by name,
# ``duration``: the kernel op's end - start, ns)
LAUNCH_DERIVED_COLUMNS = (*LAUNCH_OP_COLUMNS, *LAUNCH_IDLE_COLUMNS)
# idle time the strategies address (tail, under-fill, launch overhead, sync, blocking
# copies, the input pipeline, exposed comm)
RECOVERABLE = ["tail_idle_ns", "underfill_idle_ns", "launch_overhead_ns", "sync_idle_ns",
               "copy_idle_ns", "input_idle_ns", "exposed_comm_ns"]  # fmt: skip

# the per-device tables of an Analysis, narrowed together by Analysis.select
_DEVICE_TABLES = ("ops", "launches", "devices", "regions", "sequences", "gaps", "streams",
                  "collectives", "totals")  # fmt: skip


# the tables of an analysis that need every GPU op (views.py, rules/tables.py), computed once
# by TraceAnalysis.derived; a MergedAnalysis holds them as its ranks computed them (parts.py)
DerivedName = Literal["top_kernels", "copies", "sync_stalls", "stage_ops", "steps",
                      "graph_saving", "held_by", "interleaving"]  # fmt: skip
DERIVED_NAMES: tuple[DerivedName, ...] = get_args(DerivedName)


@dataclass
class Analysis(ABC):
    """Everything measured on a trace or a job, as the renderers, rules and gate read it (see
    docs/metrics.md for each column): a TraceAnalysis (``analyze``: one Trace, every GPU op
    at hand) or a MergedAnalysis (parts.merge_parts: the ranks of a job analysed apart)."""

    trace: Trace
    # every GPU op: gap, cause, class, range_id, region, and where the trace has comm ops
    # wait_ns and last_device (merged: comm ops)
    ops: pd.DataFrame
    pieces: pd.DataFrame  # the idle gaps split by cause (gaps.attribute_gaps), rows = ops' index
    launches: pd.DataFrame  # kernel launches: config and shape ids, idle, range_id, region
    devices: pd.DataFrame  # one window per device: first..last op
    regions: pd.DataFrame  # one window per (top-level NVTX range, device)
    sequences: pd.DataFrame  # launch sequences (gaps.launch_sequences)
    gaps: pd.DataFrame  # gap breakdown per (device, cause)
    streams: pd.DataFrame  # per (device, stream): ops, busy, own gaps
    collectives: pd.DataFrame  # comm ops matched across devices
    notes: list[str] = field(default_factory=list)  # data-quality notes (quality.coverage_notes)
    coverage: dict = field(default_factory=dict)  # what the notes count (coverage_counts)
    configs: pd.DataFrame = field(default_factory=pd.DataFrame)  # waves.wave_configs
    shapes: pd.DataFrame = field(default_factory=pd.DataFrame)  # gemm.launch_shapes
    selection: dict = field(default_factory=dict)
    origin_ns: int = 0  # the trace's first GPU op start (ns): where relative times count from
    # per (range name, device): range_totals (union-measured), filtered with the regions
    totals: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the pipeline stages (views.pipeline_stages), once computed: see stages()
    _stages: pd.DataFrame | None = field(default=None, init=False, repr=False)

    def launch_table(self, columns: Sequence[str] = LAUNCH_DERIVED_COLUMNS) -> pd.DataFrame:
        """The selection's kernel launches with ``columns`` of LAUNCH_DERIVED_COLUMNS besides
        their own (launch_columns)."""
        return launch_columns(self.launches, self.ops, self.configs, columns)

    @abstractmethod
    def kernel_table(self, by_region: bool = False) -> pd.DataFrame:
        """Kernel groups of the current selection (optionally split per region name), with
        the GEMM shape columns (batch, m, n, k, shape_source; NaN where unknown) and, for the
        table the rules read, ``worst_start_ns``."""

    @abstractmethod
    def derived(
        self, key: DerivedName, compute: Callable[[TraceAnalysis], pd.DataFrame]
    ) -> pd.DataFrame:
        """The table ``key`` of this analysis (a copy): ``compute`` of a TraceAnalysis, once;
        a MergedAnalysis holds it from its ranks."""

    def stages(self, compute: Callable[[Analysis], pd.DataFrame]) -> pd.DataFrame:
        """The pipeline stages (a copy), ``compute(self)`` once: computed from the stage ops
        and windows of either kind of analysis (views.pipeline_stages)."""
        if self._stages is None:
            self._stages = compute(self)
        return self._stages.copy()

    @property
    def warnings(self) -> list[str]:
        """What the reader warned about, then what the trace lacks (each says what it limits)."""
        return [*self.trace.warnings, *self.notes]

    def region_totals(self) -> pd.DataFrame:
        """Per (top-level range name, device) of the selection (range_totals)."""
        return self.totals.copy()

    def comm_by_region(self) -> RegionCommSums:
        """Per (region, device) sums of the selection's comm ops (metrics/comm_regions.py)."""
        return region_comm_sums(self.ops, self.devices.set_index("device")["steady_start_ns"])

    def collective_instances(self) -> pd.DataFrame:
        """One row per collective instance (metrics/comm.collective_skew's name#n) of the
        selection: name, skew_ns (its last arrival's start - the first's) and last (the
        device last to arrive), in order of first appearance."""
        coll = self.collectives
        # (skew and last device are the instance's, on each of its rows: its first row, in
        # instance order, without grouping every row of a job of many ranks)
        rows = first_rows(coll["instance"].to_numpy()) if len(coll) else np.zeros(0, np.int64)
        return pd.DataFrame({"name": coll["name"].array.take(rows),
                             "skew_ns": coll["skew_ns"].to_numpy()[rows],
                             "last": coll["last_device"].to_numpy()[rows]})  # fmt: skip

    def region_count(self) -> int:
        """How many range instances the selection has."""
        return len(self.regions)

    def region_chunks(
        self, columns: list[str] | None = None, names: list[str] | None = None
    ) -> Iterator[pd.DataFrame]:
        """The selection's range instances (``columns`` of them; ``names``: of these names
        only) in the regions' order, a stretch of rows at a time (none empty)."""
        r = self.regions
        if names is not None:
            r = r[r["name"].isin(names).to_numpy()]
        if len(r):
            yield r if columns is None else r[columns]

    def region_span(self) -> tuple[int, int]:
        """The selection's first range instance's start and last one's end (ns)."""
        return self.regions["start_ns"].min(), self.regions["end_ns"].max()

    def region_table(
        self, columns: list[str] | None = None, names: list[str] | None = None
    ) -> pd.DataFrame:
        """region_chunks as one table."""
        parts = list(self.region_chunks(columns, names))
        if len(parts) == 1:
            return parts[0]
        if not parts:  # (the columns asked for, even where a table has none)
            r = self.regions if self.regions is not None else pd.DataFrame()
            return r.iloc[:0] if columns is None else r.reindex(columns=columns).iloc[:0]
        return pd.concat(parts, ignore_index=True)

    def summary(self) -> dict:
        """Totals over the selected windows (regions when a range is selected, else devices)."""
        if self.selection.get("range"):
            return window_summary(self.region_chunks(_SUMMARY_COLUMNS))
        return window_summary([self.devices] if len(self.devices) else [])

    def _device_tables(self, device: int | None) -> dict[str, pd.DataFrame]:
        """The per-device tables (_DEVICE_TABLES), and ``pieces`` when a device is given,
        narrowed to ``device`` (None: all, as they are)."""
        t = {name: getattr(self, name) for name in _DEVICE_TABLES}
        if device is not None:
            t = {name: df[df["device"] == device] for name, df in t.items() if name != "launches"}
            launches = self.launch_table(["device"])  # (a table without launches: as it is)
            on = launches["device"].to_numpy() == device if "device" in launches else None
            t["launches"] = self.launches if on is None else self.launches[on]
            t["pieces"] = self.pieces[self.pieces["device"] == device]
        return t


@dataclass
class TraceAnalysis(Analysis):
    """Everything measured on one Trace (``analyze``): ``ops`` holds every GPU op, so any
    window can be measured and any range or device selected."""

    # (class_segments, piece_segments) of the selection's ops, once computed: see measure
    _segments: tuple[dict, dict] | None = field(default=None, repr=False)
    # kernel_table's groups, whole (False) and per region (True), once computed
    _kernel_groups: dict[bool, pd.DataFrame] = field(default_factory=dict, init=False, repr=False)
    _derived: dict[DerivedName, pd.DataFrame] = field(default_factory=dict, init=False, repr=False)

    def kernel_table(self, by_region: bool = False, worst: bool | None = None) -> pd.DataFrame:
        """Kernel groups of the current selection (optionally split per region name), with
        the GEMM shape columns (batch, m, n, k, shape_source; NaN where unknown) and, for the
        table the rules read, ``worst_start_ns`` (``worst``: whether to find it; default:
        for the table the rules read)."""
        if worst is None and by_region in self._kernel_groups:
            return self._kernel_groups[by_region].copy()
        if self.launches.empty:
            return self.launches
        by = ("region", "shape") if by_region else ("shape",)
        # the worst launch (where findings point) is wanted by the rules' table only: the
        # per-region one, or the whole one when the trace has no ranges
        explicit = worst is not None
        worst = (by_region or self.regions.empty) if worst is None else worst
        extra = {c: f for c, f in GROUP_AGGREGATES.items() if c in self.launches}
        # (per launch its duration; its device and start read at the rows wanted)
        launches = self.launch_table(["duration", *(["region"] if by_region else [])])
        groups = kernel_groups(launches, self.configs, by=by, worst=worst, extra=extra,
                               read_at=launch_op_reader(launches, self.ops))  # fmt: skip
        del launches
        add_group_counters(groups)
        at = groups.columns.get_loc("shape")
        shape = self.shapes.reindex(groups.pop("shape").to_numpy()).reset_index(drop=True)
        groups = pd.concat([groups.iloc[:, :at], shape, groups.iloc[:, at:]], axis=1)
        if explicit:
            return groups
        self._kernel_groups[by_region] = groups
        return groups.copy()

    def derived(
        self, key: DerivedName, compute: Callable[[TraceAnalysis], pd.DataFrame]
    ) -> pd.DataFrame:
        """The table ``key`` of this analysis, ``compute(self)`` once (cached)."""
        if key not in self._derived:
            self._derived[key] = compute(self)
        return self._derived[key].copy()

    def _busy_and_gaps(self) -> tuple[dict, dict]:
        """(class_segments, gap_segments) of the selection's ops, computed once (_segments:
        a selection of ranges is not every op of its devices)."""
        if self._segments is None:
            every_op = not self.selection.get("range")
            self._segments = (
                _segments(self.ops, self.ops["op_class"], every_op),
                piece_segments(self.pieces),
            )
        return self._segments

    def measure(self, windows: pd.DataFrame) -> pd.DataFrame:
        """CLIPPED_COLUMNS and window_ns over any windows (device, start_ns, end_ns) of the
        selection's ops: busy time, idle split by cause, comm/compute (clipped_metrics)."""
        return clipped_metrics(windows, *self._busy_and_gaps())

    def busy_segments(self) -> dict[int, iv.Segments]:
        """Per device: the merged intervals in which the selection's ops ran (ns)."""
        segments = self._busy_and_gaps()[0]
        return segments["busy"] if "busy" in segments else busy_between_gaps(self.ops)

    def select(self, range_text: str | None = None, device: int | None = None) -> TraceAnalysis:
        """A view restricted to regions whose name contains ``range_text`` and/or one device."""
        t = self._device_tables(device)
        if range_text:
            regions = t["regions"]
            regions = regions[regions["name"].str.contains(range_text, regex=False)]
            ids = set(regions["range_id"])
            ops = t["ops"][t["ops"]["range_id"].isin(ids)]
            pieces = t.get("pieces", self.pieces)
            pieces = pieces[pieces["row"].isin(ops.index)]
            lo, hi = regions["start_ns"].min(), regions["end_ns"].max()
            seq, coll = t["sequences"], t["collectives"]
            launches = t["launches"]  # (its ops: this analysis', narrowed with it)
            range_id = launch_columns(launches, self.ops, self.configs, ["range_id"])["range_id"]
            totals = t["totals"]
            t.update(
                regions=regions,
                totals=totals[totals["name"].isin(set(regions["name"]))],
                ops=ops,
                launches=launches[range_id.isin(ids)],
                sequences=within_device_windows(seq, regions),
                pieces=pieces,
                gaps=gap_breakdown(pieces),
                streams=stream_summary(ops),
                collectives=coll[coll["start"].between(lo, hi)],
            )
        whole = not range_text and device is None  # (the same ops: their segments hold)
        return replace(self, **t, selection={"range": range_text, "device": device},
                       _segments=self._segments if whole else None)  # fmt: skip


class RegionSource(Protocol):
    """Where a MergedAnalysis reads its job's range instances from (regionstore.RegionView:
    kept on disk), as a selection sees them."""

    def __len__(self) -> int: ...

    def span(self) -> tuple[int, int]: ...  # the first start and the last end (ns)

    def chunks(
        self, columns: list[str] | None = None, names: list[str] | None = None
    ) -> Iterator[pd.DataFrame]: ...  # Analysis.region_chunks

    def frame(
        self, columns: list[str] | None = None, names: list[str] | None = None
    ) -> pd.DataFrame: ...  # Analysis.region_table

    def narrowed(self, device: int | None) -> RegionSource: ...  # on one device


class CommSource(Protocol):
    """Where a MergedAnalysis reads its job's comm ops from (commstore.CommView: kept on
    disk), as a selection sees them."""

    def ops(self) -> pd.DataFrame: ...  # the comm ops, with wait_ns and last_device

    def collectives(self) -> pd.DataFrame: ...  # the matched collectives (collective_skew)

    def instances(self) -> pd.DataFrame: ...  # Analysis.collective_instances

    def comm_by_region(self) -> RegionCommSums: ...  # Analysis.comm_by_region

    def narrowed(self, **selection) -> CommSource: ...  # with a device, ranges, span set


@dataclass
class MergedAnalysis(Analysis):
    """A job whose ranks were analysed apart, merged (parts.merge_parts): the per-device
    tables of every rank, and what needs several ranks (collectives, comm waits) computed
    over their communication ops, which are all ``ops`` holds (``pieces`` and ``launches``
    are empty). The tables that need every GPU op come as the ranks computed them (kernel
    groups, DERIVED_NAMES); nothing else can be measured, and the ranges were selected on
    the ranks (on_device selects a device). With ``comm`` (a CommSource: the job's comm
    ops kept on disk, as parts.merged_job makes it), ``ops`` and ``collectives`` are read
    back from it each time they are asked for, and what the rules and the document read of
    them comes from its sums instead."""

    kernel_groups: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    region_kernel_groups: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    precomputed: dict[DerivedName, pd.DataFrame] = field(default_factory=dict, repr=False)
    comm: CommSource | None = field(default=None, repr=False)
    region_source: RegionSource | None = field(default=None, repr=False)

    def region_count(self) -> int:
        """How many range instances the selection has."""
        return super().region_count() if self.region_source is None else len(self.region_source)

    def region_chunks(
        self, columns: list[str] | None = None, names: list[str] | None = None
    ) -> Iterator[pd.DataFrame]:
        """Analysis.region_chunks (read back from ``region_source`` where held there)."""
        if self.region_source is None:
            return super().region_chunks(columns, names)
        return self.region_source.chunks(columns, names)

    def region_span(self) -> tuple[int, int]:
        """The selection's first range instance's start and last one's end (ns)."""
        if self.region_source is None:
            return super().region_span()
        return self.region_source.span()

    def kernel_table(self, by_region: bool = False) -> pd.DataFrame:
        """The ranks' kernel groups (``by_region``: per region name), merged."""
        return (self.region_kernel_groups if by_region else self.kernel_groups).copy()

    def derived(
        self, key: DerivedName, compute: Callable[[TraceAnalysis], pd.DataFrame]
    ) -> pd.DataFrame:
        """The ranks' table ``key``, merged (``compute`` is for a TraceAnalysis)."""
        return self.precomputed[key].copy()

    def comm_by_region(self) -> RegionCommSums:
        """Per (region, device) sums of the selection's comm ops (summed rank by rank)."""
        return self.comm.comm_by_region() if self.comm is not None else super().comm_by_region()

    def collective_instances(self) -> pd.DataFrame:
        """One row per collective instance of the selection (Analysis.collective_instances;
        from the comm store's instances without reading the matched ops back)."""
        return self.comm.instances() if self.comm is not None else super().collective_instances()

    def on_device(self, device: int | None) -> MergedAnalysis:
        """The job narrowed to one device (None: all), its tables and precomputed ones."""

        def narrowed(v: pd.DataFrame) -> pd.DataFrame:
            return v[v["device"] == device] if device is not None and "device" in v else v

        return replace(
            self, **self._device_tables(device), selection={**self.selection, "device": device},
            kernel_groups=narrowed(self.kernel_groups),
            region_kernel_groups=narrowed(self.region_kernel_groups),
            precomputed={k: narrowed(v) for k, v in self.precomputed.items()},
        )  # fmt: skip

    def _device_tables(self, device: int | None) -> dict:
        """Analysis._device_tables; the tables read back from a store (_READ_BACK) left to
        be read back, from its view narrowed to ``device``."""
        back = {name for name, (source, _) in _READ_BACK.items()
                if getattr(self, source) is not None}  # fmt: skip
        if not back:
            return super()._device_tables(device)
        t = {name: getattr(self, name) for name in _DEVICE_TABLES if name not in back}
        if device is not None:
            t = {name: df[df["device"] == device] for name, df in t.items()}
        t.update(dict.fromkeys(back))
        if self.comm is not None:
            t["comm"] = self.comm.narrowed(device=device)
        if self.region_source is not None:
            t["region_source"] = self.region_source.narrowed(device)
        return t


# the tables a MergedAnalysis reads back from a store when asked for (None held): table ->
# (the attribute holding its source, the source's method that reads it)
_READ_BACK = {"ops": ("comm", "ops"), "collectives": ("comm", "collectives"),
              "regions": ("region_source", "frame")}  # fmt: skip


def _read_back(name: str) -> property:
    """A MergedAnalysis table held as given, or (None) read back from its source's view."""
    source, method = _READ_BACK[name]

    def get(self: MergedAnalysis) -> pd.DataFrame:
        held = self.__dict__.get(f"_held_{name}")
        if held is None and getattr(self, source) is not None:
            return getattr(getattr(self, source), method)()
        return held

    def put(self: MergedAnalysis, value: pd.DataFrame | None) -> None:
        self.__dict__[f"_held_{name}"] = value

    return property(get, put, doc=f"The job's {name} (held, or read back from ``{source}``).")


for _name in _READ_BACK:
    setattr(MergedAnalysis, _name, _read_back(_name))


def window_summary(chunks: Iterable[pd.DataFrame]) -> dict:
    """Analysis.summary's totals over windows given a stretch of rows at a time (device,
    start_ns, end_ns, lead_ns where known, WINDOW_COLUMNS): span_ns (the last end - the
    first measured start), window_ns (their sum), each column's sum (rounded to ns),
    overlap_ratio and the devices (how many)."""
    sums = dict.fromkeys(WINDOW_COLUMNS, 0.0)
    lo, hi, window, devices = None, None, 0, set()
    for w in chunks:
        start = measured_start(w)
        end = w["end_ns"].to_numpy()
        lo = start.min() if lo is None else min(lo, start.min())
        hi = end.max() if hi is None else max(hi, end.max())
        window += int((end - start).sum())
        for col in WINDOW_COLUMNS:
            sums[col] += float(w[col].sum())
        devices.update(w["device"].unique().tolist())
    if lo is None or hi is None:
        return {"span_ns": 0, "window_ns": 0, **{c: 0 for c in WINDOW_COLUMNS}, "devices": 0}
    out = {"span_ns": int(hi - lo), "window_ns": window,
           **{c: int(round(sums[c])) for c in WINDOW_COLUMNS}}  # fmt: skip
    out["overlap_ratio"] = overlap_ratio(out["overlap_ns"], out["comm_ns"])
    out["devices"] = len(devices)
    return out


def check_device(trace: Trace, device: int | None) -> None:
    """AdvisorInputError when --device names a device without GPU work in ``trace``."""
    if device is not None and device not in trace.devices:
        raise AdvisorInputError(
            trace.path,
            f"--device {device}: no GPU work on that device (devices: "
            f"{', '.join(map(str, trace.devices))})",
        )


def check_range(a: Analysis, range_text: str | None) -> None:
    """AdvisorInputError when --range selected no top-level range of ``a``."""
    if range_text and not a.region_count():
        raise AdvisorInputError(
            a.trace.path, f"--range {range_text!r}: no top-level NVTX range matches"
        )


def within_device_windows(rows: pd.DataFrame, regions: pd.DataFrame) -> pd.DataFrame:
    """The ``rows`` (device, start_ns, end_ns) that lie within their device's span of the
    ``regions``: from its first selected region's start to its last one's end."""
    span = regions.groupby("device").agg(lo=("start_ns", "min"), hi=("end_ns", "max"))
    lo = rows["device"].map(span["lo"]).to_numpy(np.float64)
    hi = rows["device"].map(span["hi"]).to_numpy(np.float64)
    return rows[(rows["start_ns"].to_numpy() >= lo) & (rows["end_ns"].to_numpy() <= hi)]


def range_totals(regions: pd.DataFrame, segments: dict, gaps: dict) -> pd.DataFrame:
    """Per (top-level range name, device), in group order: ``instances``; the time columns
    of WINDOW_COLUMNS measured once over the *union* of its instances' GPU windows (async
    work of one instance can overlap the next: nothing is counted twice); the per-op columns
    (tail, under-fill, comm waits, same-stream comm, sync gap count) and the OP_COUNTS (ops,
    launch calls) summed over instances;
    ``window_ns`` (the union's length); ``recoverable_ns`` (the sum of RECOVERABLE: the idle
    time the strategies address), ``worst_start_ns`` (the start of the instance with the
    most of it) and ``overlap_ratio`` (overlap_ns / comm_ns, NaN without communication)."""
    r = regions.assign(start_ns=measured_start(regions), lead_ns=0)
    r["window_ns"] = r["end_ns"] - r["start_ns"]
    r["recoverable_ns"] = r[RECOVERABLE].sum(axis=1)
    groups = r.groupby(["name", "device"], as_index=False)
    counts = [c for c in OP_COUNTS if c in r]  # (the instances' ops and launches, summed)
    g = groups[[*WINDOW_COLUMNS, "window_ns", *counts]].sum()  # (not one aggregation a column)
    g.insert(2, "instances", groups.size()["size"].to_numpy())
    if g.empty:
        return g.assign(
            worst_start_ns=pd.Series(dtype="int64"), recoverable_ns=0.0, overlap_ratio=0.0
        )
    # the instance with the most recoverable idle (the first on ties)
    worst = groups["recoverable_ns"].idxmax()["recoverable_ns"].to_numpy()
    g["worst_start_ns"] = regions["start_ns"].to_numpy()[r.index.get_indexer(worst)]
    union = _union_windows(r, g)
    if union is not None:
        clipped = clipped_metrics(union, segments, gaps)
        per_group = clipped.groupby("group")[CLIPPED_COLUMNS + ["window_ns"]].sum()
        per_group = per_group.reindex(range(len(g))).fillna(0)
        for col in per_group.columns:
            g[col] = per_group[col].to_numpy()
    g["recoverable_ns"] = g[RECOVERABLE].sum(axis=1)
    g["overlap_ratio"] = overlap_ratio(g["overlap_ns"], g["comm_ns"])
    return g


def with_outside_ranges(
    totals: pd.DataFrame,
    ops: pd.DataFrame,
    devices: pd.DataFrame,
    regions: pd.DataFrame,
    segments: dict,
    gaps: dict,
    idle: KernelOpIdle,
) -> pd.DataFrame:
    """``totals`` (range_totals) with, when the trace has ranges, one OUTSIDE_RANGES row per
    device: its window's time outside every range's window (measured from each range's lead
    gap), as one range of ``instances`` windows. Busy, idle by cause and comm/compute are
    clipped to those windows; the per-op columns (tail and under-fill idle, comm waits,
    same-stream comm, sync gaps) are summed over the ops launched outside every range. So
    the host work, waits and launch gaps between ranges reach the rules (a range around each
    kernel call, and the host's own work between them, is a common layout)."""
    if regions.empty or devices.empty:
        return totals
    windows = _outside_windows(regions, devices)
    if windows.empty:
        return totals
    clipped = clipped_metrics(windows, segments, gaps)
    g = clipped.groupby("device", as_index=False, sort=True)
    rows = g[[*CLIPPED_COLUMNS, "window_ns"]].sum()
    rows.insert(0, "name", OUTSIDE_RANGES)
    rows["instances"] = g.size()["size"].to_numpy()
    clipped["recoverable_ns"] = clipped[[c for c in RECOVERABLE if c in clipped]].sum(axis=1)
    worst = clipped.loc[clipped.groupby("device")["recoverable_ns"].idxmax()]
    worst_start = worst.set_index("device")["start_ns"]
    rows["worst_start_ns"] = worst_start.reindex(rows["device"]).to_numpy()
    # the per-op columns, over the ops launched outside every range (range_id -1): as
    # window_metrics sums them for a range, over one window per device that holds them all
    whole = rows[["device"]].merge(devices[["device", "start_ns", "end_ns"]]).assign(range_id=-1)
    for col, values in _op_sums(ops, whole, ["range_id", "device"], idle).items():
        rows[col] = values
    for col, values in _outside_counts(ops, rows["device"].to_numpy()).items():
        rows[col] = values
    rows["recoverable_ns"] = rows[RECOVERABLE].sum(axis=1)
    rows["overlap_ratio"] = overlap_ratio(rows["overlap_ns"], rows["comm_ns"])
    rows = rows[[c for c in totals.columns if c in rows.columns]]
    return pd.concat([totals, rows], ignore_index=True)


def _outside_counts(ops: pd.DataFrame, devices: np.ndarray) -> dict[str, np.ndarray]:
    """Per device of ``devices``: its ops launched outside every range (range_id -1) and
    their launch calls (distinct correlation ids: a CUDA-graph replay is one launch, as
    region_windows counts a range's)."""
    rows = np.flatnonzero(ops["range_id"].to_numpy() < 0)
    device = ops["device"].to_numpy()[rows]
    corr = ops["correlation"].to_numpy(np.float64)[rows]
    order = np.lexsort((corr, device))
    device, corr = device[order], corr[order]
    first = iv.run_heads(device)
    per = pd.DataFrame(
        {"ops": np.diff(np.append(first, len(device))),
         "launches": iv.distinct_in_runs(corr, first) if len(first) else first},
        index=device[first],
    )  # fmt: skip
    return {c: per[c].reindex(devices).fillna(0).to_numpy(np.int64) for c in OP_COUNTS}


def _outside_windows(regions: pd.DataFrame, devices: pd.DataFrame) -> pd.DataFrame:
    """Per device: the parts of its window outside the union of its ranges' windows
    (device, start_ns, end_ns; empty parts left out)."""
    start = measured_start(regions)
    parts = []
    for dev, lo, hi in zip(devices["device"].to_numpy(), measured_start(devices),
                           devices["end_ns"].to_numpy(), strict=True):  # fmt: skip
        mine = regions["device"].to_numpy() == dev
        s, e = iv.union(start[mine], regions["end_ns"].to_numpy()[mine])
        lo_, hi_ = np.clip(np.append(lo, e), lo, hi), np.clip(np.append(s, hi), lo, hi)
        keep = hi_ > lo_
        parts.append(pd.DataFrame({"device": int(dev), "start_ns": lo_[keep], "end_ns": hi_[keep]}))
    return pd.concat(parts, ignore_index=True)


# window columns measured by clipping device-wide intervals to a window (busy segments by
# class, idle gaps by cause); the other WINDOW_COLUMNS come from the window's own ops
CLIPPED_COLUMNS = ["gpu_busy_ns", "idle_ns", "launch_overhead_ns", "sync_idle_ns",
                   "copy_idle_ns", "input_idle_ns", "host_busy_idle_ns", "queued_idle_ns",
                   "startup_idle_ns", "unattributed_idle_ns", "comm_ns", "compute_ns",
                   "overlap_ns", "exposed_comm_ns", "startup_exposed_comm_ns"]  # fmt: skip
# the clipped idle columns and the causes each sums (metrics/attribution.py): together they
# are a window's idle_ns
IDLE_COLUMNS = {
    "launch_overhead_ns": OVERHEAD_CAUSES,
    "sync_idle_ns": ("synchronization",),
    "copy_idle_ns": ("blocking_copy",),
    "input_idle_ns": ("input_pipeline",),
    "host_busy_idle_ns": ("host_busy",),
    "queued_idle_ns": ("queued_wait",),
    "startup_idle_ns": ("startup",),
    "unattributed_idle_ns": ("unattributed",),
}


def clipped_metrics(windows: pd.DataFrame, segments: dict, gaps: dict) -> pd.DataFrame:
    """CLIPPED_COLUMNS and window_ns for windows (device, start_ns, end_ns): busy time and
    comm/compute from the device's busy segments clipped to each window, idle split by the
    cause of the gap covering each idle nanosecond (so idle = the sum of its causes)."""
    n = len(windows)
    empty = (np.array([], np.int64), np.array([], np.int64))
    lo_all, hi_all = windows["start_ns"].to_numpy(), windows["end_ns"].to_numpy()
    busy = np.zeros(n, dtype=np.int64)
    by_cause = {c: np.zeros(n, dtype=np.int64) for c in gaps}
    spans = segments.get("span")  # (_segments: busy time from the idle, without "busy")
    for device, rows in rows_by_value(windows["device"].to_numpy()).items():
        lo, hi = lo_all[rows], hi_all[rows]
        for c, per in gaps.items():
            by_cause[c][rows] = iv.covered_in_windows(per.get(int(device), empty), lo, hi)
        if spans is None:
            busy[rows] = iv.covered_in_windows(segments["busy"].get(int(device), empty), lo, hi)
            continue
        first, last = spans.get(int(device), (0, 0))
        busy[rows] = np.maximum(np.minimum(hi, last) - np.maximum(lo, first), 0)
        for per_cause in by_cause.values():
            busy[rows] -= per_cause[rows]
    window_ns = hi_all - lo_all
    # the columns made at once (one table built, not a column inserted at a time)
    cols: dict[str, np.ndarray] = {"window_ns": window_ns, "gpu_busy_ns": busy,
                                   "idle_ns": window_ns - busy}  # fmt: skip

    def causes(*names: str) -> np.ndarray:
        return sum((by_cause[c] for c in names if c in by_cause), np.zeros(n, dtype=np.int64))

    for col, names in IDLE_COLUMNS.items():
        cols[col] = causes(*names)
    comm = window_comm(segments, windows) if n else None
    for col in ("comm_ns", "compute_ns", "overlap_ns", "exposed_comm_ns"):
        if comm is None:
            cols[col] = np.zeros(0, dtype=np.int64)
        elif col == "compute_ns":  # (busy time less the busy time no compute op covers)
            cols[col] = busy - comm["not_compute_ns"].to_numpy()
        else:
            cols[col] = comm[col].to_numpy()
    cols["startup_exposed_comm_ns"] = _startup_exposed_comm(windows, segments)
    return with_columns(windows, cols)


def with_columns(frame: pd.DataFrame, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """A copy of ``frame`` given ``columns`` as by assigning them one at a time (a column of
    ``frame`` with one of those names replaced in its place, the others appended in order),
    built as one table; ``frame``'s own columns keep their dtypes (as Series: pandas infers
    no new dtype for them)."""
    data: dict = {c: frame[c] for c in frame.columns}
    data.update(columns)
    return pd.DataFrame(data, index=frame.index)


def _startup_exposed_comm(windows: pd.DataFrame, segments: dict) -> np.ndarray:
    """Per window (device, start_ns, end_ns): its exposed comm before its device's steady
    start (ns; segments' ``steady_start``, _segments): the first collectives, NCCL's
    set-up among them, are start-up, as the idle before the steady state is."""
    out = np.zeros(len(windows), dtype=np.int64)
    steady = segments.get("steady_start")
    if not steady or not len(windows):
        return out
    until = windows["device"].map(steady).to_numpy(np.float64)  # (NaN: no start-up)
    lo = windows["start_ns"].to_numpy()
    hi = np.fmin(windows["end_ns"].to_numpy(np.float64), until)
    part = np.flatnonzero(hi > lo)
    if part.size:
        before = pd.DataFrame(
            {"device": windows["device"].to_numpy()[part], "start_ns": lo[part],
             "end_ns": hi[part].astype(np.int64)}
        )  # fmt: skip
        out[part] = window_comm(segments, before)["exposed_comm_ns"].to_numpy()
    return out


def _segments(ops: pd.DataFrame, op_class: pd.Series, every_op: bool = False) -> dict[str, dict]:
    """class_segments of ``ops``, and ``steady_start``: per device, the first ns of its
    steady state (steady_start_ns). With ``every_op`` (``ops`` are all the ops of their
    devices, each with its idle gap ``gap_ns``), no busy segments where every op ends at or
    after its start (as the readers keep them): ``span`` instead, per device (its first
    start, its last end), and clipped_metrics takes a window's busy time as its part of the
    span less its idle. The gaps are the holes of the busy segments in the span, and the idle
    pieces split each gap without overlap, so this is the same time to the nanosecond,
    without a second union of every op (10M kernels: ~160 MB held and its sums per
    window)."""
    end, start = ops["end"].to_numpy(), ops["start"].to_numpy()
    from_idle = every_op and "gap_ns" in ops and bool((end >= start).all())
    out: dict[str, dict] = dict(class_segments(ops, op_class, busy=not from_idle))
    if from_idle:
        out["span"] = _device_spans(ops)
    devices = distinct(ops["device"].to_numpy())
    starts = steady_start_ns(ops, devices).tolist()
    out["steady_start"] = dict(zip(devices.tolist(), starts, strict=True))
    return out


def _device_spans(ops: pd.DataFrame) -> dict[int, tuple[int, int]]:
    """Per device of a device_ops table (sorted by device and start): (its first op's start,
    the latest end of its ops), ns."""
    device = ops["device"].to_numpy()
    if len(device) == 0:
        return {}
    heads = iv.run_heads(device)
    first = ops["start"].to_numpy()[heads]
    last = np.maximum.reduceat(ops["end"].to_numpy(), heads)
    return {int(d): (int(a), int(b)) for d, a, b in zip(device[heads], first, last, strict=True)}


def busy_between_gaps(ops: pd.DataFrame) -> dict[int, iv.Segments]:
    """Per device of a device_ops table (sorted by device and start, with ``gap_ns``, every
    op ending at or after its start): the merged busy segments (as comm.device_segments
    gives them), made from the idle gaps: the device's span less each gap [start - gap_ns,
    start), empty pieces dropped."""
    out = {}
    device = ops["device"].to_numpy()
    # (the gaps as held, int32 where they fit: start - gap is int64)
    start, gap = ops["start"].to_numpy(np.int64), ops["gap_ns"].to_numpy()
    for d, (first, last) in _device_spans(ops).items():
        a, b = np.searchsorted(device, d, side="left"), np.searchsorted(device, d, side="right")
        holes = a + np.flatnonzero(gap[a:b] > 0)
        seg_start = np.concatenate([[first], start[holes]])
        seg_end = np.concatenate([start[holes] - gap[holes], [last]])
        keep = seg_end > seg_start
        out[d] = (seg_start[keep], seg_end[keep])
    return out


def window_metrics(
    ops: pd.DataFrame,
    windows: pd.DataFrame,
    keys: list[str],
    segments: dict,
    gaps: dict,
    idle: KernelOpIdle,
) -> pd.DataFrame:
    """Fill WINDOW_COLUMNS for windows (device, start_ns, end_ns + ``keys``).

    Busy, idle by cause and comm/compute come from all of the device's work clipped to the
    window (clipped_metrics); tail idle, comm waits, same-stream comm and the number of
    synchronization gaps (gaps a blocking synchronize held in part) from the window's own
    ops (those whose keys match; a sync gap counts when it opens inside the window), the
    tail and under-fill idle of a kernel op from ``idle`` (kernel_op_idle).
    """
    out = windows.copy()
    if out.empty:
        for col in WINDOW_COLUMNS:
            out[col] = pd.Series(dtype="float64")
        out["overlap_ratio"] = pd.Series(dtype="float64")
        return out
    lo = measured_start(out)  # (with the idle its first op held)
    clipped = clipped_metrics(out.assign(start_ns=lo), segments, gaps)
    # the columns made at once (one table built, not a column inserted at a time)
    cols = {col: clipped[col].to_numpy() for col in CLIPPED_COLUMNS}
    cols.update(_op_sums(ops, out, keys, idle))
    cols["overlap_ratio"] = overlap_ratio(cols["overlap_ns"], cols["comm_ns"])
    return with_columns(out, cols)


IDLE_BLOCK_ROWS = 1 << 20  # kernel ops whose launch idle is computed at a time (KernelOpIdle)


class KernelOpIdle(NamedTuple):
    """The kernel ops' launch idle (waves.launch_idle), in op order: ``rows``, their row
    positions in ``ops``, and ``config``, their configurations' rows in ``configs``. The
    idle itself (ns, float64) is computed a block of ops at a time where it is summed
    (``sums``): 10M kernels held 152 MB of it through the windows' metrics otherwise."""

    rows: np.ndarray
    config: np.ndarray
    ops: pd.DataFrame
    configs: pd.DataFrame

    def sums(self, bins: np.ndarray, n: int, block: int = IDLE_BLOCK_ROWS) -> dict:
        """Per LAUNCH_IDLE_COLUMNS, the sums (ns, float64) per bin 0..n-1 of the kernel ops'
        idle, ``bins`` giving each kernel op's bin (negative or n and more: none; the idle of
        those is not computed). Added in op order, as one ``np.bincount`` over every op adds
        them (the same sums to the last bit)."""
        out = {col: np.zeros(n) for col in LAUNCH_IDLE_COLUMNS}
        for b in range(0, len(self.rows), block):
            at = slice(b, b + block)
            to = bins[at]
            inside = (to >= 0) & (to < n)
            rows, config = self.rows[at], self.config[at]
            if not inside.all():  # (the idle of the ops in a bin only)
                rows, config, to = rows[inside], config[inside], to[inside]
            if len(rows):
                values = _launch_idle_at(self.ops, rows, config, self.configs)
                for col in LAUNCH_IDLE_COLUMNS:
                    np.add.at(out[col], to, values[col])
        return out


def kernel_op_idle(
    ops: pd.DataFrame, launches: pd.DataFrame, configs: pd.DataFrame
) -> KernelOpIdle:
    """KernelOpIdle of the launches (_launch_table) of ``ops`` on ``configs``."""
    if "op" not in launches or launches.empty:
        return KernelOpIdle(np.zeros(0, np.int64), np.zeros(0, np.int64), ops, configs)
    rows = op_positions(ops, launches["op"].to_numpy())
    config = launches["config"].to_numpy()
    if not (rows[1:] > rows[:-1]).all():  # (the launches come in op order on most traces)
        order = np.argsort(rows, kind="stable")
        rows, config = rows[order], config[order]
    return KernelOpIdle(rows, config, ops, configs)


def _durations_at(ops: pd.DataFrame, at: np.ndarray, block: int = 1 << 20) -> np.ndarray:
    """The durations (end - start, ns) of the ops at row positions ``at``, gathered
    ``block`` rows at a time (no launch-long gathers of start and end beside the result)."""
    end, start = ops["end"].to_numpy(), ops["start"].to_numpy()
    out = np.empty(len(at), dtype=np.result_type(end, start))
    for b in range(0, len(at), block):
        rows = at[b : b + block]
        np.subtract(end[rows], start[rows], out=out[b : b + block])
    return out


def _launch_idle_at(
    ops: pd.DataFrame, at: np.ndarray, config: np.ndarray, configs: pd.DataFrame
) -> dict[str, np.ndarray]:
    """waves.launch_idle of the kernel ops at row positions ``at`` of ``ops`` (their
    durations, ns) launched with ``config`` (ids into ``configs``)."""
    return launch_idle(_durations_at(ops, at), config, configs)


def _op_sums(
    ops: pd.DataFrame, out: pd.DataFrame, keys: list[str], idle: KernelOpIdle
) -> dict[str, np.ndarray]:
    """The columns of windows ``out`` summed over the ops whose ``keys`` match a window's
    (window_metrics): tail_idle_ns, underfill_idle_ns, comm_wait_ns, same_stream_comm_ns,
    sync_gaps; float64 per window."""
    lo = measured_start(out)
    window = _window_of(ops, out, keys)  # each op's row in ``out``, -1 for none
    inside = window >= 0
    n = len(out)
    cols: dict[str, np.ndarray] = {}

    def per_window(rows: np.ndarray, values=None) -> np.ndarray:
        """Sum of ``values`` (a count without) over ``rows`` of ops, per window."""
        return np.bincount(window[rows], values, n).astype(np.float64)

    # each kernel op's launch idle, summed in op order (the ops outside every window into
    # no window's sum)
    cols.update(idle.sums(window[idle.rows], n))
    if "wait_ns" in ops:  # (ops without comm ops carry no waits: analyze)
        values = ops["wait_ns"].to_numpy()
        rows = np.flatnonzero(inside & (values != 0))
        cols["comm_wait_ns"] = per_window(rows, values[rows])
    else:
        cols["comm_wait_ns"] = np.zeros(n)
    rows = np.flatnonzero(inside & ops["same_stream_comm"].to_numpy(bool))
    took = ops["end"].to_numpy()[rows] - ops["start"].to_numpy()[rows]
    cols["same_stream_comm_ns"] = per_window(rows, took)
    # synchronization gaps that open inside their window
    gap_ns = ops["gap_ns"].to_numpy()
    rows = np.flatnonzero(inside & ops["sync_held"].to_numpy())
    opens = ops["start"].to_numpy()[rows] - gap_ns[rows] >= lo[window[rows]]
    cols["sync_gaps"] = per_window(rows[opens])
    return cols


def _union_windows(r: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame | None:
    """The merged GPU windows of each (name, device) group of region rows ``r``: device,
    start_ns, end_ns and ``group`` (the row of ``groups``); None without rows."""
    if r.empty:
        return None
    index = pd.MultiIndex.from_frame(groups[["name", "device"]])
    group = index.get_indexer(pd.MultiIndex.from_frame(r[["name", "device"]]))
    parts = []
    for g, rows in pd.Series(group).groupby(group).indices.items():
        s, e = iv.union(r["start_ns"].to_numpy()[rows], r["end_ns"].to_numpy()[rows])
        parts.append(pd.DataFrame({"group": g, "device": int(groups["device"].iat[g]),
                                   "start_ns": s, "end_ns": e}))  # fmt: skip
    return pd.concat(parts, ignore_index=True)


# the most packed key values _window_of looks windows up in a table of (int64 each)
WINDOW_TABLE_MAX = 1 << 22
WINDOW_BLOCK = 1 << 20  # ops _window_of looks up at a time


def _window_of(
    ops: pd.DataFrame, windows: pd.DataFrame, keys: list[str], block: int = WINDOW_BLOCK
) -> np.ndarray:
    """Per op: the row in ``windows`` whose integer ``keys`` equal the op's, -1 for none
    (int32 below 2**31 windows: two of these op-long arrays are made at once, the devices'
    and the ranges'); ``block`` ops at a time (_block_windows), so that the only op-long
    array is the result."""
    op_keys = [ops[c].to_numpy() for c in keys]
    window_keys = [windows[c].to_numpy() for c in keys]
    out = np.empty(len(ops), dtype=row_dtype(len(windows)))
    for b in range(0, len(ops), block):
        out[b : b + block] = _block_windows([k[b : b + block] for k in op_keys], window_keys)
    return out


def _block_windows(op_keys: list[np.ndarray], window_keys: list[np.ndarray]) -> np.ndarray:
    """_window_of of a block of ops: the keys packed into one int64 per row, then looked up
    in a table of every packed value where they span at most WINDOW_TABLE_MAX and each
    window's are its own, else a sorted search (no table merge)."""
    keyed = pack(op_keys, window_keys)
    packed, packed_win = keyed.keys
    if keyed.radices is not None and len(packed_win):
        span = int(np.prod(keyed.radices, dtype=object))
        if span <= WINDOW_TABLE_MAX:
            table = np.full(span, -1, dtype=np.int64)
            rows = np.arange(len(packed_win))
            table[packed_win] = rows
            if (table[packed_win] == rows).all():  # (no two windows share their keys)
                return table[packed]
    order = np.argsort(packed_win, kind="stable")
    sorted_win = packed_win[order]
    pos = np.searchsorted(sorted_win, packed)
    np.minimum(pos, len(order) - 1, out=pos)
    found = sorted_win[pos] == packed
    pos = order[pos]
    pos[~found] = -1
    return pos


def analyze(
    trace: Trace,
    shapes: Sequence[ShapeOption] = (),
    release_api: bool = False,
    gemms: Sequence[GemmOption] = (),
    cores: int | None = None,
) -> TraceAnalysis:
    """Compute every metric of one trace (unfiltered). ``shapes``: --shape options,
    ``gemms``: --gemm options.
    ``release_api``: empty ``trace.api`` once the attribution has read it (its correlation
    ids go once the launches are joined: gaps.attribute_gaps); take the launch configuration's
    columns (waves.LAUNCH_CONFIG_COLUMNS) out of ``trace.kernels`` once the configurations
    table holds them, and the kernel columns the ops hold (OP_KERNEL_COLUMNS, gathered back
    from the ops for the launch table) or were made of (OPS_ONLY_KERNEL_COLUMNS) as the
    ops are made (device_ops' release). Nothing later reads them there; ``trace.devices``
    is kept; a caller that owns the trace saves their memory (23 columns of every kernel).
    ``cores``: how many threads the analysis may use (default:
    metrics/ahead.analysis_threads; the result does not depend on it)."""
    api_traced = not trace.api.empty
    threads = analysis_threads(cores)
    # the configurations found beside the ops and their attribution (from the kernels as
    # read: the trace's table loses their columns below), of their own columns alone
    # (waves.CONFIG_KEYS): the times and ids that the ops take are let go once the ops
    # hold them (10M kernels: 520 MB), not held for that thread
    shape_only = trace.kernels[[c for c in CONFIG_KEYS if c in trace.kernels]]
    configurations = beside(partial(_configurations, shape_only, trace.gpus), threads)
    del shape_only
    kernels = without_configuration(trace.kernels)  # (the launches': configs hold the rest)
    launch_columns = [c for c in kernels.columns if c not in OPS_ONLY_KERNEL_COLUMNS]
    if release_api:
        trace.kernels = kernels
        ops = device_ops(trace, release=_op_made_columns(trace))
    else:
        ops = device_ops(trace)
        kernels = kernels[launch_columns]
    found_shapes = nvtx_shapes(trace.nvtx)  # (the ops placed in them at launch, below)
    ops, pieces = attribute_gaps(ops, trace, release_api, threads, found_shapes)
    config, configs, bounded = configurations.result()
    del configurations
    op_class = classify_ops(ops)
    ops["op_class"] = op_class
    ops["same_stream_comm"] = same_stream_comm(ops, op_class)
    skew = collective_skew(ops, op_class)
    if op_class.eq("comm").any():  # (without comm ops every wait is 0: no columns)
        wait, last_device = _comm_waits(ops, op_class, skew)
        ops["wait_ns"], ops["last_device"] = column(ops, wait), column(ops, last_device)
    ranges = top_level_ranges(trace.nvtx)
    ops["region"] = column(ops, _region_names(ops["range_id"].to_numpy(), ranges))
    # the launch sequences and the per-stream sums found beside the launch table and then
    # the per-cause sums (of the ops as they are now: a table of their own, whatever is
    # dropped below; waited for before the busy and idle segments and the windows, whose
    # temporaries would come on top of theirs: 0.3 GB more at 10M kernels)
    per_op = beside(partial(_per_op_tables, ops.copy(deep=False), threads), threads)
    launches, shape_table, shape_notes = _launch_table(
        trace, kernels, launch_columns, ops, config, configs, found_shapes, shapes, gemms
    )
    impossible = unrecorded = 0  # configurations that cannot run / are unknown
    if len(launches):
        impossible = int(configs["impossible"].to_numpy()[config].sum())
        unrecorded = int(configs["unrecorded"].to_numpy()[config].sum())
    coverage = coverage_counts(ops, impossible, api_traced, unrecorded, bounded)
    # (the launch calls' threads told which kernels have no launch call, and the shapes'
    # ranges open at launch gave the launches their shapes: done)
    del kernels, ops["api_tid"]
    if "shape_range" in ops:
        del ops["shape_range"]

    breakdown = gap_breakdown(pieces)  # (10M kernels: 0.3 s here, 1.1 s left beside)
    # the ranges' windows found while the per-op tables finish beside (at 10M kernels this
    # thread waited ~0.5 s for them, their temporaries below the analysis' peak)
    range_windows = region_windows(ops, ranges)
    sequences, streams = per_op.result()
    del per_op
    segments = _segments(ops, op_class, every_op=True)
    gaps = piece_segments(pieces)
    dev = ops.groupby("device").agg(start_ns=("start", "min"), end_ns=("end", "max"))
    idle = kernel_op_idle(ops, launches, configs)
    # the devices' windows measured beside the ranges' (both read the same ops, segments
    # and idle; at 10M kernels 0.3 s beside 0.4 + 0.3 s, each's temporaries ~0.2 GB)
    per_device = beside(partial(window_metrics, ops.copy(deep=False), dev.reset_index(),
                                ["device"], segments, gaps, idle), threads)  # fmt: skip
    regions = window_metrics(ops, range_windows, ["range_id", "device"], segments, gaps, idle)
    del range_windows
    range_sums = range_totals(regions, segments, gaps)
    devices = per_device.result()
    del per_device
    devices["steady_start_ns"] = devices["device"].map(segments["steady_start"]).astype(np.int64)
    totals = with_outside_ranges(range_sums, ops, devices, regions, segments, gaps, idle)
    del range_sums
    del idle
    for col in WINDOW_ONLY_OP_COLUMNS:  # (read by the windows and sequences above alone)
        del ops[col]
    return TraceAnalysis(
        trace=trace,
        ops=ops,
        pieces=pieces,
        launches=launches,
        configs=configs,
        shapes=shape_table,
        devices=devices,
        regions=regions,
        sequences=sequences,
        gaps=breakdown,
        streams=streams,
        collectives=skew,
        notes=[*coverage_notes(coverage), *shape_notes],
        coverage=coverage,
        origin_ns=int(ops["start"].min()) if len(ops) else 0,
        totals=totals,
        _segments=(segments, gaps),  # (TraceAnalysis.measure reuses them)
    )


def _per_op_tables(ops: pd.DataFrame, threads: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(launch sequences, their blocks on up to ``threads`` threads; stream summary) of the
    ops."""
    return launch_sequences(ops, threads=threads), stream_summary(ops)


def steady_start_ns(ops: pd.DataFrame, devices: np.ndarray) -> np.ndarray:
    """Per device of ``devices``: the start of its first op in the steady state (ops'
    ``steady``, metrics/gaps.attribute_gaps; ns, int64): the device's first op's start when
    it has no start-up."""
    steady = np.flatnonzero(ops["steady"].to_numpy(bool))
    device = ops["device"].to_numpy()[steady]
    first, at = np.unique(device, return_index=True)  # (ops are sorted by device and start)
    out = pd.Series(ops["start"].to_numpy(np.int64)[steady[at]], index=first)
    return out.reindex(devices).to_numpy(np.int64)


def _comm_waits(ops: pd.DataFrame, op_class: pd.Series, skew: pd.DataFrame):
    """Per op: wait_ns (how long it waited inside a collective for the last rank) and
    last_device (that rank), from the collective_skew table; 0 and NaN elsewhere. Ops that
    repeat another's (device, start, name) exactly (duplicated rows) share the first one's
    match."""
    wait = np.zeros(len(ops))
    last_device = np.full(len(ops), np.nan, dtype=np.float32)  # (device ids are small)
    if len(skew):
        rows = skew["row"].to_numpy()
        wait[rows] = skew["wait_ns"].to_numpy()
        last_device[rows] = skew["last_device"].to_numpy(dtype="float32")
        share_with_duplicates(ops, op_class, wait, last_device)
    return wait, last_device


def share_with_duplicates(ops, op_class, wait: np.ndarray, last_device: np.ndarray) -> None:
    """Give comm ops equal in (device, start, name) the values of the first of them that
    has a match (in place)."""
    rows = np.flatnonzero(op_class.eq("comm").to_numpy())
    key = [ops["device"].to_numpy()[rows], ops["start"].to_numpy()[rows]]
    order = np.lexsort(key[::-1])
    k0, k1 = key[0][order], key[1][order]
    if not ((k0[1:] == k0[:-1]) & (k1[1:] == k1[:-1])).any():
        return  # (no two comm ops start together on one device: nothing repeats)
    key.append(sorted_codes(ops["name"], rows)[0])
    order = np.lexsort(key[::-1])
    rows = rows[order]
    same = np.ones(len(rows), dtype=bool)
    for k in key:
        k = k[order]
        same[1:] &= k[1:] == k[:-1]
    same[0] = False
    if not same.any():
        return
    group = np.cumsum(~same) - 1  # runs of equal keys
    repeated = np.bincount(group)[group] > 1
    hits = np.flatnonzero(~np.isnan(last_device[rows]) & repeated)
    first = np.full(group[-1] + 1, -1)
    first[group[hits[::-1]]] = rows[hits[::-1]]  # (the earliest matched row of its run)
    source = first[group]
    take = (source >= 0) & repeated
    wait[rows[take]] = wait[source[take]]
    last_device[rows[take]] = last_device[source[take]]


def _region_names(range_id: np.ndarray, ranges: pd.DataFrame) -> pd.Categorical:
    """Per op: the text of its top-level range (categorical; NaN outside ranges).
    ``ranges.range_id`` are the ranges' row positions."""
    if ranges.empty:
        return pd.Categorical.from_codes(np.full(len(range_id), -1), [])
    texts = pd.Categorical(ranges["text"].astype(object))
    codes = np.where(range_id >= 0, texts.codes[np.maximum(range_id, 0)], -1)
    return pd.Categorical.from_codes(codes, texts.categories)


def _op_made_columns(trace: Trace) -> list[str]:
    """The columns of ``trace.kernels`` that device_ops may take out of it as it makes the
    ops (its ``release``): the OPS_ONLY_KERNEL_COLUMNS, and the OP_KERNEL_COLUMNS that the
    ops hold in the same dtype (the launch table gathers those back from the ops; 10M
    kernels: 53 bytes each). The trace's device ids are kept first (Trace.devices reads the
    kernels' devices)."""
    if trace.device_ids is None:
        trace.device_ids = list(trace.devices)
    k = trace.kernels
    held = [c for c in OP_KERNEL_COLUMNS if c in k and k[c].dtype == OP_DTYPES[c]]
    return [c for c in [*OPS_ONLY_KERNEL_COLUMNS, *held] if c in k]


def _at_launches(ops: pd.DataFrame, values, fill: int, launches: int) -> np.ndarray:
    """Per kernel launch (the ``launches`` rows of the trace's kernels): what ``values``
    (per op, mostly ``fill``; an array or a sparse array of row positions) holds at its
    kernel op (keys.row_dtype of the largest: int32 below 2**31 rows), read at the ops
    holding another value alone, not gathered for every launch."""
    if isinstance(values, pd.arrays.SparseArray):
        rows, held = values.sp_index.indices, values.sp_values
    else:
        rows = np.flatnonzero(np.asarray(values) != fill)
        held = np.asarray(values)[rows]
    kernel = ops["kind"].array.take(rows) == "kernel"
    top = max(int(held.max()) if len(held) else 0, fill)
    out = np.full(launches, fill, dtype=row_dtype(top + 1))
    out[ops["src"].to_numpy()[rows[kernel]]] = held[kernel]
    return out


def _configurations(kernels: pd.DataFrame, gpus: dict) -> tuple[np.ndarray, pd.DataFrame, int]:
    """(config id per kernel launch, the configurations table: waves.wave_configs; the
    launches whose registers or shared memory the trace did not record), of a trace's
    ``kernels`` with their configuration columns (a table of the caller's to give away:
    those columns are taken out as they are numbered), on its ``gpus``."""
    if kernels.empty:
        return np.zeros(0, dtype=np.int32), pd.DataFrame(), 0
    config, configs = wave_configs(kernels, gpus, taken=True)
    # (known or not per configuration: its own columns tell, then counted per launch)
    launches = np.bincount(config, minlength=len(configs))
    return config, configs, int(launches[unknown_resources(configs)].sum())


def launch_columns(
    launches: pd.DataFrame,
    ops: pd.DataFrame,
    configs: pd.DataFrame,
    columns: Sequence[str] = LAUNCH_DERIVED_COLUMNS,
) -> pd.DataFrame:
    """``launches`` (a launch table: _launch_table) with its own columns and ``columns`` of
    LAUNCH_DERIVED_COLUMNS: those its kernel op in ``ops`` holds (LAUNCH_OP_COLUMNS, read
    through ``op``) and its launch idle (LAUNCH_IDLE_COLUMNS: waves.launch_idle of its
    configuration in ``configs`` and its duration, ns), or ``duration`` (its op's end -
    start, ns). Made at each call: the table holds each launch's own columns only (at 10M
    launches, 0.45 GB less held). A table without ``op`` (a job's: its ranks hold the
    launches) is returned as it is."""
    if "op" not in launches:
        return launches
    at = op_positions(ops, launches["op"].to_numpy())
    out = {col: launch_op_column(ops, col, at) for col in columns if col in LAUNCH_OP_COLUMNS}
    if any(col in (*LAUNCH_IDLE_COLUMNS, "duration") for col in columns):
        took = _durations_at(ops, at)
        if any(col in LAUNCH_IDLE_COLUMNS for col in columns):  # (not for the duration alone)
            idle = launch_idle(took, launches["config"].to_numpy(), configs)
            out.update({col: idle[col] for col in LAUNCH_IDLE_COLUMNS if col in columns})
        out["duration"] = took
    return launches.assign(**{col: column(launches, out[col]) for col in columns})


def launch_op_column(ops: pd.DataFrame, col: str, at: np.ndarray) -> Any:
    """The column ``col`` (of LAUNCH_OP_COLUMNS) of the ops at row positions ``at`` (a
    categorical stays one)."""
    values = ops[col].array
    return values.take(at) if isinstance(values, pd.Categorical) else ops[col].to_numpy()[at]


def launch_op_reader(launches: pd.DataFrame, ops: pd.DataFrame) -> Callable[[str, np.ndarray], Any]:
    """A reader of the LAUNCH_OP_COLUMNS of ``launches`` (a launch table of ``ops``) at row
    positions: ``read(col, rows)``, gathered for those rows only (kernel_groups' device at
    each group's first launch, start at its worst)."""
    op = launches["op"].to_numpy()
    return lambda col, rows: launch_op_column(ops, col, op_positions(ops, op[rows]))


def op_positions(ops: pd.DataFrame, labels: np.ndarray) -> np.ndarray:
    """The row positions in ``ops`` of the ops with index ``labels`` (each one present): the
    labels themselves in a whole analysis' ops (0..n-1), found in a selection's."""
    index = ops.index
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        return labels
    if index.is_monotonic_increasing:  # (a selection keeps the whole's order)
        return np.searchsorted(index.to_numpy(), labels)
    return index.get_indexer(labels)


def _launch_table(
    trace: Trace,
    kernels: pd.DataFrame,
    columns: list[str],
    ops: pd.DataFrame,
    config: np.ndarray,
    configs: pd.DataFrame,
    found_shapes: pd.DataFrame,
    shapes: Sequence[ShapeOption],
    gemms: Sequence[GemmOption],
):
    """(launches, shapes, notes): the kernel launches (in the trace's kernel order) with
    their own ``columns`` of the trace's kernels (shared, no copy; not their
    configuration's, nor LAUNCH_OP_COLUMNS), ``op`` (their kernel op's row in ``ops``),
    ``config`` (into ``configs``), the hardware counters' columns, ``op_not_gemm`` and the
    ``shape`` id (launch_columns gives the rest); the distinct shapes (launch_shapes), and
    the --shape warnings."""
    if kernels.empty:
        return pd.DataFrame(), pd.DataFrame(), []
    kernel_ops = np.flatnonzero(ops["kind"].eq("kernel").to_numpy())
    if len(kernel_ops) != len(kernels):  # (device_ops holds every kernel once)
        raise RuntimeError("ops and kernels disagree on the number of kernel launches")
    src = ops["src"].to_numpy()[kernel_ops]  # its row position in trace.kernels
    op_of_launch = np.empty(len(kernels), dtype=row_dtype(len(ops)))
    op_of_launch[src] = kernel_ops
    del src, kernel_ops

    def per_launch(values) -> np.ndarray:
        return np.asarray(values)[op_of_launch]

    # the launches' own columns (shared with the kernels, no copy) and their op; what the
    # op holds is read through it where needed (launch_columns), never held twice
    launches = pd.DataFrame({c: kernels[c] for c in columns if c not in LAUNCH_OP_COLUMNS},
                            copy=False)  # fmt: skip
    launches["op"] = column(launches, op_of_launch)
    launches["config"] = column(launches, config)
    if not trace.counters.empty:  # hardware counters of the launches profiled
        for col, values in launch_counters(trace.counters, len(kernels)).items():
            launches[col] = values
    # the CPU op that launched it says it is no matrix multiply (classify.yaml not_gemm_ops)
    launch_op = ops["launch_op"] if "launch_op" in ops else pd.Series("", index=ops.index)
    not_gemm = per_launch(name_matches(launch_op, "not_gemm_ops").to_numpy())
    launches["op_not_gemm"] = column(launches, not_gemm)
    region = ops["region"].array
    calls = launches[["name"]].assign(
        region=pd.Categorical.from_codes(per_launch(region.codes), region.categories)
    )
    if shapes:  # (the grids only where a --shape option asks which launches it fits)
        calls = with_configuration(calls.assign(config=config), configs)
    launch_calls = calls.assign(
        comm=configs["comm"].to_numpy(bool)[config],
        persistent=configs["persistent"].to_numpy(bool)[config],
    )
    if "shape_range" in ops:  # (the nvtx_shapes range open at the launch call)
        at_launch = _at_launches(ops, ops["shape_range"].array, -1, len(kernels))
        launch_calls["shape_range"] = column(launch_calls, at_launch)
    launches["shape"], shape_table, notes = launch_shapes(launch_calls, found_shapes, shapes,
                                                          gemms)  # fmt: skip
    return launches, shape_table, notes
