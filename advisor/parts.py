"""The ranks of a job analysed apart and merged: each rank's trace is read and analysed on
its own (a worker process, or a Dask worker), reduced to a ``RankPart`` of small per-device
tables, and the parts are merged into one MergedAnalysis on the client. Only the parts
travel, never a trace: a part holds per-device tables (windows, regions, kernel groups,
views: tens to thousands of rows) and the rank's communication ops (the cross-rank tables'
inputs).

What needs several ranks at once is computed on the merged parts: the collectives matched
across devices (metrics/comm.collective_skew) and each comm op's wait for the last rank,
hence ``comm_wait_ns`` of every device, region and range window, the stragglers and rank
skew the rules read, and the pipeline stages (from the ops of the devices that ran
point-to-point kernels). Everything else is per device, so the merge concatenates and puts
the rows in the order the whole-trace functions give them. The result is the same analysis
(JSON document, findings, tables) as one Trace holding every rank (multi.merge_traces),
which the tests check on real multi-rank traces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pandas as pd

from advisor import views
from advisor.analysis import (
    Analysis,
    DerivedName,
    MergedAnalysis,
    TraceAnalysis,
    check_device,
    check_range,
)
from advisor.commstore import CommJob, CommStore, CommView
from advisor.errors import AdvisorInputError, error_line
from advisor.frames import compact, concatenated, expand
from advisor.memory import release_freed_memory
from advisor.metrics.attribution import PIECE_COLUMNS
from advisor.metrics.gaps import SEQUENCE_ORDER, order_rows
from advisor.metrics.regions import OUTSIDE_RANGES
from advisor.metrics.waves import order_kernel_groups
from advisor.options import AnalysisOptions
from advisor.regionstore import JOB_ORDER, RegionFiles, RegionView, waits_of_windows
from advisor.rules import tables as rule_tables
from advisor.trace.model import Trace
from advisor.trace.quality import coverage_notes

# the comm ops a part carries (what the cross-rank matching and the rules' region table read)
COMM_COLUMNS = ["device", "start", "end", "name", "kind", "op_class", "range_id", "region"]
# the rank's tables as the selection leaves them, merged by concatenation and one row order
_ORDERS = {
    "devices": lambda t: t.sort_values("device", ignore_index=True, kind="stable"),
    "regions": lambda t: t.sort_values(JOB_ORDER, ignore_index=True, kind="stable"),
    "totals": lambda t: t.sort_values(["name", "device"], ignore_index=True, kind="stable"),
    "gaps": lambda t: order_rows(t, "total_ns", ["device", "cause"]),
    "streams": lambda t: order_rows(t, "gap_ns", ["device", "stream"]),
    "sequences": lambda t: order_rows(t, *SEQUENCE_ORDER),
}
# the derived tables (Analysis.derived), merged by concatenation and one row order
_DERIVED_ORDERS: dict[DerivedName, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "top_kernels": views.order_top_kernels,
    "copies": lambda t: views.order_by_time(t, ["device", "kind", "host_memory"]),
    "sync_stalls": lambda t: views.order_by_time(t, ["device", "call"]),
    "steps": rule_tables.order_steps,
    "stage_ops": lambda t: t.reset_index(drop=True),
    "graph_saving": lambda t: t.reset_index(drop=True),
    "held_by": lambda t: t.reset_index(drop=True),
    "interleaving": lambda t: t.reset_index(drop=True),
}


@dataclass
class RankPart:
    """One rank's trace, analysed and reduced (or the one-line error that replaced it).
    Times in trace ns; device ids as in the rank's trace."""

    path: str
    error: str | None = None
    format: str = ""
    producer_version: str = ""
    gpus: dict = field(default_factory=dict)  # device id -> GpuSpec
    devices: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the reader's
    sources: list[str] = field(default_factory=list)
    coverage: dict = field(default_factory=dict)  # quality.coverage_counts
    shape_notes: list[str] = field(default_factory=list)
    origin_ns: int = 0
    tables: dict = field(default_factory=dict)  # _ORDERS' keys (sequences: unselected)
    # kernel_table's groups: whole (with each group's worst launch) and per region
    kernel_groups: pd.DataFrame = field(default_factory=pd.DataFrame)
    region_kernel_groups: pd.DataFrame = field(default_factory=pd.DataFrame)
    derived: dict[DerivedName, pd.DataFrame] = field(default_factory=dict)  # _DERIVED_ORDERS'
    comm: pd.DataFrame = field(default_factory=pd.DataFrame)  # every comm op (COMM_COLUMNS)
    # the tables the client holds on disk while the other parts arrive (hold_tables: "comm",
    # "regions", "small" -> their file; the part's own emptied or dropped), and how many
    # range ids it uses then
    held: dict[str, str] = field(default_factory=dict)
    range_count: int = 0
    extra: dict | None = None  # rank_part's ``extra`` (the gate's digest), when asked
    rank: int | None = None  # what the trace says (Trace.rank, world_size)
    world_size: int | None = None
    # its GPU work's first start and last end, UTC ns since the epoch (None: not known)
    utc_window: tuple[int, int] | None = None

    def nbytes(self) -> int:
        """Memory of the part's tables (B): what travels from a worker."""
        frames = [*self.tables.values(), self.kernel_groups, self.region_kernel_groups,
                  *self.derived.values(), self.comm]  # fmt: skip
        return int(sum(f.memory_usage(index=True, deep=True).sum() for f in frames))


def summarize(
    a0: TraceAnalysis, range_text: str | None = None, rules: list | None = None
) -> RankPart:
    """The part of one rank's unselected analysis ``a0``, its ranges selected by
    ``range_text`` (the device selection is the job's: applied after the merge). Of the
    launch sequences (tens of thousands in a long trace) it keeps those the document lists
    (each device's SEQUENCES_SHOWN with the most overhead) and those a sequences rule of
    ``rules`` (default: the built-in ones) fires on."""
    a = a0.select(range_text, None) if range_text else a0
    t = a0.trace
    tables = {name: getattr(a, name) for name in _ORDERS}
    tables["devices"] = a0.devices  # (a range selection keeps whole device windows)
    tables["sequences"] = _sequences_that_matter(a, rules)
    kernels = a.kernel_table(False, worst=True)  # (the merge drops worst where not wanted)
    region_kernels = a.kernel_table(True)
    derived: dict[DerivedName, pd.DataFrame] = {
        "top_kernels": views.top_kernels(a),
        "copies": views.copies(a),
        "sync_stalls": views.sync_stalls(a),
        "graph_saving": rule_tables.region_graph_savings(a),
        "held_by": rule_tables.held_by(a),
        "interleaving": rule_tables.interleaving(a),
        "steps": rule_tables.step_table(a),
        "stage_ops": views.stage_ops(a),
    }
    ops = a0.ops
    comm = ops.loc[ops["op_class"].eq("comm").to_numpy(), COMM_COLUMNS]
    comm = comm.astype({"name": object, "region": object, "kind": object})
    return RankPart(
        path=t.path, format=t.format, producer_version=t.producer_version,
        gpus={d: g for d, g in t.gpus.items() if d in t.devices}, devices=t.devices,
        warnings=list(t.warnings), sources=list(t.sources), coverage=dict(a0.coverage),
        shape_notes=a0.notes[len(coverage_notes(a0.coverage)):], origin_ns=a0.origin_ns,
        tables={k: compact(v) for k, v in tables.items()}, kernel_groups=compact(kernels),
        region_kernel_groups=compact(region_kernels),
        derived={k: compact(v) for k, v in derived.items()},
        comm=compact(comm), rank=t.rank, world_size=t.world_size, utc_window=utc_window(a0),
    )  # fmt: skip


def utc_window(a: Analysis) -> tuple[int, int] | None:
    """The first GPU op's start and the last one's end, UTC ns since the epoch; None when
    the trace does not say when it ran (Trace.epoch_offset_ns)."""
    offset, d = a.trace.epoch_offset_ns, a.devices
    if offset is None or d.empty:
        return None
    return int(d["start_ns"].min()) + offset, int(d["end_ns"].max()) + offset


def rank_part(
    path: str,
    options: AnalysisOptions,
    cores: int | None = None,
    extra: Callable[[TraceAnalysis, AnalysisOptions], dict] | None = None,
) -> RankPart:
    """Read and analyse one rank's trace (``cores`` for its reader and analysis) into its
    part; with ``extra`` (a module-level function, so that it pickles), also
    ``extra(analysis, options)`` of the trace on its own, such as the gate's digest. Bad
    input becomes the part's ``error`` (one line)."""
    from advisor.pipeline import analysis_of
    from advisor.trace.load import load_trace

    try:
        trace = load_trace(path, gpu=options.gpu_override, cores=cores, lean=True)
        a0 = analysis_of(trace, options, cores=cores)
        part = summarize(a0, options.range_text, options.rules())
        if extra is not None:
            part.extra = extra(a0, options)
        return part
    except Exception as exc:  # (bad input, or a bug: one trace must not lose the others)
        return RankPart(path=path, error=error_line(path, exc))


def device_maps(devices: list[list[int]]) -> list[dict[int, int]]:
    """Per rank (its device ids, in rank order): its device id -> the job's. Ids are kept
    when distinct across the ranks (ranks profiled on their own GPUs) and renumbered in rank
    order when they collide (every rank's GPU is its device 0)."""
    ids = [d for ds in devices for d in ds]
    if len(ids) == len(set(ids)):
        return [{d: d for d in ds} for ds in devices]
    maps, next_id = [], 0
    for ds in devices:
        maps.append({d: next_id + i for i, d in enumerate(ds)})
        next_id += len(ds)
    return maps


def merge_parts(
    parts: list[RankPart],
    range_text: str | None = None,
    device: int | None = None,
    release: bool = False,
) -> MergedAnalysis:
    """One MergedAnalysis of the readable parts (in rank order), as ``analyze`` of one Trace
    holding every rank followed by ``select(range_text, device)`` gives it: merged_job,
    then selected. Raises AdvisorInputError like the pipeline for a device without work or
    a range that matches nothing. ``release``: as merged_job."""
    return selected(merged_job(parts, release), range_text, device)


# the tables of a part that grow with its trace (its comm ops and range instances): held on
# disk as the part arrives (hold_tables), each in a file
HELD = ("comm", "regions")
# the part's other tables (_ORDERS' but regions, _DERIVED_ORDERS', the kernel groups), held
# together in one file: ~20 small DataFrames, 0.37 MB a part in memory, 50 KB pickled
SMALL = "small"
FOLD_PARTS = 16  # the parts' small tables concatenated every this many parts as merged


def hold_tables(part: RankPart, store: CommStore) -> None:
    """Move an arriving part's tables into ``store``'s folder (the client holds none of
    them while the other parts arrive, only what the part says of its trace); merged_job
    with that store takes them back."""
    if part.error is not None or part.held:
        return
    part.range_count = _range_count(part)
    for key in HELD:
        part.held[key] = str(store.hold(_held_table(part, key)))
        _set_held_table(part, key, _held_table(part, key).iloc[:0].copy())
    part.held[SMALL] = str(store.hold(_small_tables(part)))
    _set_small_tables(part, None)


def _small_tables(part: RankPart) -> dict[str, pd.DataFrame]:
    """The part's small tables by key: ``tables.K``, ``derived.K``, ``kernel_groups`` and
    ``region_kernel_groups``."""
    out = {f"tables.{k}": v for k, v in part.tables.items() if k != "regions"}
    out.update({f"derived.{k}": v for k, v in part.derived.items()})
    out.update(kernel_groups=part.kernel_groups, region_kernel_groups=part.region_kernel_groups)
    return out


def _set_small_tables(part: RankPart, tables: dict[str, pd.DataFrame] | None) -> None:
    """Put ``tables`` (_small_tables' keys) into the part; None: drop them (the part holds
    its range instances' table only, if any)."""
    t = tables or {}
    regions = {"regions": part.tables["regions"]} if "regions" in part.tables else {}
    part.tables = {**{k[7:]: v for k, v in t.items() if k.startswith("tables.")}, **regions}
    part.derived = {cast(DerivedName, k[8:]): v for k, v in t.items() if k.startswith("derived.")}
    part.kernel_groups = t.get("kernel_groups", pd.DataFrame())
    part.region_kernel_groups = t.get("region_kernel_groups", pd.DataFrame())


def _taken_small(part: RankPart, store: CommStore, release: bool) -> dict[str, pd.DataFrame]:
    """A part's small tables (_small_tables): from the store where they are held (the file
    removed with ``release``), else the part's own (emptied with ``release``)."""
    if SMALL in part.held:
        tables = store.take(part.held[SMALL], remove=release)
        if release:
            del part.held[SMALL]
        return tables
    tables = _small_tables(part)
    if release:  # (copies: an empty slice would keep the rows' memory)
        _set_small_tables(part, {k: v.iloc[:0].copy() for k, v in tables.items()})
    return tables


def _merged_small(
    parts: list[RankPart], maps: list[dict[int, int]], store: CommStore, release: bool
) -> dict[str, pd.DataFrame]:
    """The parts' small tables by key, concatenated in rank order with the job's device
    ids, a part's taken at a time (every FOLD_PARTS parts, what is taken is concatenated:
    the client never holds every part's small DataFrames)."""
    folds: dict[str, list[pd.DataFrame]] = {}
    for p, m in zip(parts, maps, strict=True):
        for key, t in _taken_small(p, store, release).items():
            fold = folds.setdefault(key, [])
            fold.append(_renumber(t, m))
            if len(fold) >= FOLD_PARTS:
                folds[key] = [concatenated(fold)]
    return {key: concatenated(fold) for key, fold in folds.items()}


def _held_table(part: RankPart, key: str) -> pd.DataFrame:
    return part.comm if key == "comm" else part.tables[key]


def _set_held_table(part: RankPart, key: str, table: pd.DataFrame) -> None:
    if key == "comm":
        part.comm = table
    else:
        part.tables[key] = table


def _taken(part: RankPart, key: str, store: CommStore, release: bool) -> pd.DataFrame:
    """A part's table ``key``: from the store where it is held (the file removed with
    ``release``), else the part's own (emptied with ``release``: a copy, as an empty slice
    would keep the rows' memory)."""
    if key in part.held:
        table = store.take(part.held[key], remove=release)
        if release:
            del part.held[key]
        return table
    table = _held_table(part, key)
    if release:
        _set_held_table(part, key, table.iloc[:0].copy())
    return table


def merged_job(
    parts: list[RankPart], release: bool = False, store: CommStore | None = None
) -> MergedAnalysis:
    """The readable parts merged into one MergedAnalysis, nothing selected (``selected``
    narrows it, any number of times). With ``release``, each part's tables are emptied
    (rows dropped, columns kept) as soon as they are merged: the parts and the merged job
    are not held at once (the client's memory in a job of many ranks). ``store``: the
    CommStore the parts' comm ops and range instances were held in as they arrived
    (hold_tables), else a new one. Raises AdvisorInputError when none is readable."""
    parts = [p for p in parts if p.error is None]
    if not parts:
        raise AdvisorInputError(None, "no trace could be read")
    maps = device_maps([p.devices for p in parts])
    offsets = np.cumsum([0] + [_range_count(p) for p in parts])
    store = store or CommStore()  # (the comm ops on disk, a rank at a time: millions of them)

    small = _merged_small(parts, maps, store, release)
    tables = {k: small[f"tables.{k}"] for k in _ORDERS if k != "regions"}
    # (range instances in their order as they are merged, the range ids offset per rank)
    tables["regions"] = _merged_regions(parts, maps, offsets, store, release)
    derived = {k: small[f"derived.{k}"] for k in _DERIVED_ORDERS}
    kernels, region_kernels = small["kernel_groups"], small["region_kernel_groups"]
    del small
    for p, m, off in zip(parts, maps, offsets, strict=False):
        store.add(_job_ids(_taken(p, "comm", store, release), m, off))
    if release:  # (the parts' tables, freed in between the merged ones: holes in the heap)
        release_freed_memory()
    tables = {k: _ORDERS[k](v) if len(v) and k != "regions" else v for k, v in tables.items()}
    derived = {k: _DERIVED_ORDERS[k](v) if len(v) else v for k, v in derived.items()}
    kernels = order_kernel_groups(kernels) if len(kernels) else kernels
    region_kernels = order_kernel_groups(region_kernels) if len(region_kernels) else region_kernels
    comm = store.match(tables["devices"].set_index("device")["steady_start_ns"])
    _fill_waits(comm, tables)
    regions = tables["regions"]
    held = isinstance(regions, RegionFiles)  # (read back from its files when asked for)
    return MergedAnalysis(
        trace=_job_trace(parts, maps), ops=None, pieces=pd.DataFrame(columns=PIECE_COLUMNS),
        launches=pd.DataFrame({"device": []}), devices=tables["devices"],
        regions=None if held else regions, sequences=tables["sequences"], gaps=tables["gaps"],
        streams=tables["streams"], collectives=None,
        notes=[*coverage_notes(_coverage(parts)), *_shape_notes(parts)],
        coverage=_coverage(parts), origin_ns=min(p.origin_ns for p in parts),
        totals=tables["totals"], kernel_groups=kernels, region_kernel_groups=region_kernels,
        precomputed=derived, comm=CommView(comm),
        region_source=RegionView(regions) if held else None,
    )  # fmt: skip


def selected(
    job: MergedAnalysis, range_text: str | None = None, device: int | None = None
) -> MergedAnalysis:
    """merged_job's ``job`` narrowed to ``device`` (None: all) and the ranges matching
    ``range_text`` (each rank's parts hold its selected ranges already); ``job`` itself is
    left as it is. Raises AdvisorInputError like the pipeline for a device without work or
    a range that matches nothing."""
    check_device(job.trace, device)
    a = job.on_device(device)
    a.selection = {"range": range_text, "device": device}
    if a.region_count() and len(a.kernel_groups):
        # (as kernel_table: only the rules' per-region table has worst launches then)
        a.kernel_groups = a.kernel_groups.assign(worst_start_ns=np.nan)
    if range_text:  # (each rank's sequences are in its devices' selected spans already)
        check_range(a, range_text)
        ids = np.unique(a.region_table(["range_id"])["range_id"].to_numpy())
        lo, hi = a.region_span()
        if a.comm is not None:  # (read back from the comm store as selected)
            a.comm = a.comm.narrowed(range_text=range_text, range_ids=ids, span=(lo, hi))
        else:
            a.ops = a.ops[a.ops["range_id"].isin(ids)]
            a.collectives = a.collectives[a.collectives["start"].between(lo, hi)]
    return a


def _range_count(p: RankPart) -> int:
    """How many range ids the part uses (its region and comm ids are below it; range_count
    where those tables are held apart)."""
    regions = p.tables.get("regions", ())
    ids = [regions["range_id"].max() if len(regions) else -1,
           p.comm["range_id"].max() if len(p.comm) else -1, p.range_count - 1]  # fmt: skip
    return int(max(ids)) + 1


def _sequences_that_matter(a: TraceAnalysis, rules: list | None) -> pd.DataFrame:
    """The rows of ``a.sequences`` the merged job can show or judge: the first
    SEQUENCES_SHOWN of each device (in the table's order) and every row on which the `when`
    of a sequences rule holds (the conditions are per row, so the other rows fire nothing,
    whichever ranks they are merged with)."""
    seq = a.sequences
    if seq.empty:
        return seq
    keep = (seq.groupby("device").cumcount() < views.SEQUENCES_SHOWN).to_numpy().copy()
    from advisor.rules.engine import load_rules

    table = rule_tables.sequence_table(a)
    for rule in load_rules() if rules is None else rules:
        if rule.spec.scope == "sequences":
            keep |= rule.when.evaluate(table).fillna(False).astype(bool).to_numpy()
    return seq[keep]


def _renumber(t: pd.DataFrame, device_map: dict[int, int]) -> pd.DataFrame:
    """``t`` with its device column mapped to the job's ids."""
    if t.empty or "device" not in t or all(k == v for k, v in device_map.items()):
        return t
    return t.assign(device=t["device"].map(device_map).astype(t["device"].dtype))


# the columns range instances need to be held in files (regionstore.RegionFiles)
_REGION_FILE_KEYS = ("range_id", "name", "device", "start_ns", "end_ns")


def _merged_regions(
    parts: list[RankPart],
    maps: list[dict[int, int]],
    offsets: np.ndarray,
    store: CommStore,
    release: bool,
) -> pd.DataFrame | RegionFiles:
    """The parts' range instances with the job's ids, in _ORDERS' (start_ns, device) order:
    written rank by rank to the store's region files (regionstore.py: the client holds 2
    bytes a row of them, not 0.75 MB a rank). Parts of other columns (or none with an
    instance, or without _REGION_FILE_KEYS) are concatenated and sorted as they come, a
    table in memory. A held part's
    instances are read twice: for its columns, then for its rows."""

    def read(i: int, last: bool) -> pd.DataFrame:
        p = parts[i]
        t = _taken(p, "regions", store, release and last)
        return expand(_job_ids(t, maps[i], offsets[i]))

    heads = []
    for i in range(len(parts)):
        t = read(i, last=False)
        if len(t):
            heads.append(t.iloc[:1].copy())
        del t
    columns = {tuple(h.columns) for h in heads}
    if len(columns) != 1 or not set(_REGION_FILE_KEYS) <= set(next(iter(columns))):
        frames = [read(i, last=True) for i in range(len(parts))]
        out = concatenated(frames)
        return _ORDERS["regions"](out) if len(out) else out
    files = store.region_files(pd.concat(heads, ignore_index=True).dtypes)
    with store.writing():
        for i in range(len(parts)):
            files.add(read(i, last=True))
    files.close()
    return files


def _job_ids(t: pd.DataFrame, device_map: dict[int, int], offset: int) -> pd.DataFrame:
    """A part's table with the job's device ids and its range ids offset by the ranks'
    before it (-1, outside every range, kept)."""
    t = _renumber(t, device_map)
    if not len(t) or "range_id" not in t:
        return t
    ids = t["range_id"].to_numpy()
    return t.assign(range_id=np.where(ids >= 0, ids + offset, -1))


def _fill_waits(comm: CommJob, tables: dict) -> None:
    """The windows' comm_wait_ns in ``tables`` (devices, regions, in memory or in their
    files, and range totals) from the comm ops' waits for the last rank, summed rank by rank
    (commstore.CommJob): as analyze computes them over one Trace holding every rank."""
    d = tables["devices"]
    d["comm_wait_ns"] = d["device"].map(comm.device_waits).fillna(0.0).to_numpy(np.float64)
    r = tables["regions"]
    if not len(r):
        return
    if isinstance(r, RegionFiles):
        with comm.store.writing():
            per_name = r.fill_waits(comm.window_waits)
    else:
        r["comm_wait_ns"] = waits_of_windows(comm.window_waits, r["range_id"].to_numpy(),
                                             r["device"].to_numpy())  # fmt: skip
        per_name = r.groupby(["name", "device"])["comm_wait_ns"].sum()
    t = tables["totals"]
    key = pd.MultiIndex.from_frame(t[["name", "device"]])
    t["comm_wait_ns"] = (per_name.reindex(key).fillna(0.0).to_numpy(np.float64)
                         if len(per_name) else np.zeros(len(t)))  # fmt: skip
    # (the time outside every range: the waits of the ops launched outside them)
    outside = t["name"].eq(OUTSIDE_RANGES).to_numpy()
    if outside.any():
        t.loc[outside, "comm_wait_ns"] = (
            t.loc[outside, "device"].map(comm.outside_waits).fillna(0.0).to_numpy(np.float64)
        )


def _job_trace(parts: list[RankPart], maps: list[dict[int, int]]) -> Trace:
    """The job's Trace: paths, GPU facts and warnings of its parts (each naming its rank
    when there are several), no GPU ops."""
    first = parts[0]
    t = Trace(
        path=", ".join(p.path for p in parts), paths=[p.path for p in parts],
        format=first.format, producer_version=first.producer_version, kernels=pd.DataFrame(),
        device_ids=sorted(d for m in maps for d in m.values()),
    )  # fmt: skip
    for rank, (p, m) in enumerate(zip(parts, maps, strict=True)):
        for d, spec in p.gpus.items():
            if d in m:
                t.gpus[m[d]] = spec
        prefix = f"rank {rank} ({p.path}): " if len(parts) > 1 else ""
        t.warnings += [prefix + w for w in p.warnings]
        t.sources += p.sources
    return t


def _coverage(parts: list[RankPart]) -> dict[str, int]:
    """The parts' coverage counts summed (API traced when any rank traced it)."""
    out = {k: sum(p.coverage[k] for p in parts) for k in parts[0].coverage}
    out["api_traced"] = int(any(p.coverage["api_traced"] for p in parts))
    return out


def _shape_notes(parts: list[RankPart]) -> list[str]:
    """The parts' --shape warnings, each once, in rank order."""
    return list(dict.fromkeys(n for p in parts for n in p.shape_notes))


def rank_rows(parts: list[RankPart]) -> list[dict]:
    """One row per trace: rank, path, error, its devices (the job's ids) and what they
    were in its trace."""
    readable = [p for p in parts if p.error is None]
    maps = iter(device_maps([p.devices for p in readable]))
    rows: list[dict] = []
    rank = 0
    for p in parts:
        row: dict = {
            "rank": None,
            "path": p.path,
            "error": p.error,
            "devices": [],
            "trace_devices": [],
        }
        if p.error is None:
            m = next(maps)
            row.update(rank=rank, devices=sorted(m.values()), trace_devices=sorted(m))
            rank += 1
        rows.append(row)
    return rows
