"""Device idle gaps between GPU operations, and the tables built on their causes.

Per device, GPU work (kernels, copies, memsets, whole-graph executions) is sorted by start;
the gap before an operation is ``start - max(end of every earlier operation)`` when positive,
so gaps are exactly the device's idle time between its first and last operation. Each gap's
nanoseconds are attributed to causes by following what held the operation that ended it
(metrics/attribution.py: start-up, unattributed, queued_wait, synchronization,
blocking_copy, input_pipeline, host_busy, host_bound, graph_internal, launch_latency).
Launch overhead = host_bound + launch_latency + graph_internal.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from advisor.data import name_matches
from advisor.metrics.ahead import ahead
from advisor.metrics.attribution import (
    CAUSES,
    OVERHEAD_CAUSES,
    attribute,
    steady_starts,
    with_pieces,
    with_thread_keys,
)
from advisor.metrics.columns import column, int32_where_fits
from advisor.metrics.intervals import distinct_in_runs, reach_before, run_heads
from advisor.metrics.keys import (
    few_value_codes,
    middle_rows,
    pack,
    pack_one,
    row_dtype,
    sort_runs,
    text_categorical,
    value_codes,
)
from advisor.metrics.regions import assign_ops, open_range_at, top_level_ranges
from advisor.plain import plain_columns
from advisor.trace.model import Trace

__all__ = ["CAUSES", "OVERHEAD_CAUSES"]
# Gap between consecutive kernels of one CUDA-graph replay, measured on an H200 in the
# tiny_kernels_graph range of sample_traces/h200_scheduling.sqlite: median of the positive
# node-to-node gaps (264 of 495 pairs; the rest ran back to back). Used to estimate what a
# launch sequence would cost if it ran from one graph.
GRAPH_NODE_GAP_NS = 256
# A gap longer than this ends a launch sequence (it is host work, not launch cost).
SEQUENCE_BREAK_NS = 1_000_000

# gap causes that end a launch sequence (the host was not launching: no graph saves them)
SEQUENCE_BREAKS = ("startup", "synchronization", "unattributed", "blocking_copy",
                   "input_pipeline", "host_busy", "queued_wait")  # fmt: skip


# the columns device_ops joins from the trace's tables, each in the dtype the ops hold it in
OP_DTYPES = {"device": np.int32, "stream": np.int32, "start": np.int64, "end": np.int64,
             "correlation": np.float64, "pid": np.int32}  # fmt: skip


def device_ops(trace: Trace, release: Collection[str] = ()) -> pd.DataFrame:
    """All GPU operations of a trace in one table, sorted by (device, start, end): device,
    stream, start, end, correlation (float, NaN unknown), pid, kind, name (categorical),
    graph (launched from a CUDA graph) and src (row position in its trace table).
    ``release``: columns of ``trace.kernels`` taken out of that table (in place) once read
    here (a caller that owns the trace; 10M kernels: the sort's inputs and each joined
    column are not held twice)."""
    k, copies, sets, graphs = trace.kernels, trace.memcpy, trace.memset, trace.graphs
    parts = [
        (k, "kernel", lambda: k["name"], lambda: k["graph_node"].notna()),
        (copies, "memcpy", lambda: "memcpy " + copies["kind"].astype(str), lambda: False),
        (sets, "memset", lambda: "memset", lambda: False),
        (graphs, "graph", lambda: "CUDA graph " + graphs["graph_id"].astype(str), lambda: True),
    ]
    parts = [p for p in parts if len(p[0])]
    sizes = [len(t) for t, *_ in parts]
    n = sum(sizes)

    def let_go(col: str) -> None:
        if col in release and col in k:
            del k[col]

    def joined(col: str, out=None) -> np.ndarray:
        values = np.concatenate([t[col].to_numpy() for t, *_ in parts], out=out,
                                dtype=None if out is not None else OP_DTYPES[col],
                                casting="unsafe")  # fmt: skip
        let_go(col)
        return values

    device, start, end = joined("device"), joined("start"), joined("end")
    order = np.lexsort((end, start, device))  # stable: ties keep table order
    order = order.astype(row_dtype(n), copy=False)  # (row numbers in half the memory)
    # each sort column put in order and its joined copy let go at once (they were held to
    # the end: 200 MB at 10M ops)
    device = device.take(order)
    start = start.take(order)
    end = end.take(order)
    scratch = np.empty(n, dtype=np.int64)  # other columns are joined here, then put in order

    columns = {"device": device, "start": start, "end": end}
    for col in ("stream", "correlation", "pid"):
        columns[col] = joined(col, out=scratch.view(OP_DTYPES[col])[:n]).take(order)
    columns = {c: columns[c] for c in ("device", "stream", "start", "end", "correlation", "pid")}
    del scratch, device, start, end
    names = union_categoricals([_categorical(name(), len(t)) for t, _, name, _ in parts])
    kinds = pd.Categorical.from_codes(
        np.repeat(np.arange(len(parts), dtype=np.int8), sizes), [kind for _, kind, *_ in parts]
    )
    columns["kind"], columns["name"] = kinds.take(order), names.take(order)
    del names, kinds
    in_graph = [np.broadcast_to(np.asarray(graph(), dtype=bool), (len(t),))
                for t, *_, graph in parts]  # fmt: skip
    columns["graph"] = np.concatenate(in_graph)[order]
    del in_graph
    columns["src"] = np.concatenate([np.arange(n, dtype=np.int32) for n in sizes])[order]
    for col in release:  # (what no column of the ops is made of, too)
        let_go(col)
    return pd.DataFrame(columns, copy=False)  # one block per column: no consolidating copy


def _categorical(values, n: int) -> pd.Categorical:
    """``values`` (a Series, or one value for all ``n`` rows) as a Categorical whose
    categories are plain Python objects (so categoricals from any reader combine)."""
    if not isinstance(values, pd.Series):
        return pd.Categorical.from_codes(
            np.zeros(n, dtype=np.int8), pd.Index([values], dtype=object)
        )
    cat = values.array if isinstance(values.dtype, pd.CategoricalDtype) else pd.Categorical(values)
    return pd.Categorical.from_codes(cat.codes, pd.Index(cat.categories, dtype=object))


def _key(pid, correlation) -> np.ndarray:
    """(process, correlation id) as one int64, equal for equal pairs; -1 where the
    correlation is missing (see _keys)."""
    return _keys((pid, correlation))[0]


def _keys(*pairs) -> list[np.ndarray]:
    """Integer keys of (process, correlation id) arrays, equal across all the arrays exactly
    when the pairs are, sorting as the pairs (so as the export's order); -1 where the
    process or the correlation is missing. Packed by metrics/keys.pack (64-bit rocprof ids
    that do not fit are numbered instead); where one process made every pair, its
    correlation ids themselves (none negative)."""
    pids, corrs, missing, pid_known = [], [], [], True
    for pid, correlation in pairs:
        pid, pid_gone = _known(pid)
        corr, corr_gone = _known(correlation)
        pids.append(pid)
        corrs.append(corr)
        pid_known = pid_known and (pid_gone is None or not pid_gone.any())
        missing.append(pid_gone if corr_gone is None else
                       corr_gone if pid_gone is None else pid_gone | corr_gone)  # fmt: skip
    if pid_known and _one_process(pids) and all(not len(c) or c.min() >= 0 for c in corrs):
        # (one process throughout: the correlation ids are the keys, no packed copy of
        # each, 10M ops and their calls: 152 MB; a missing one is -1 below all of them)
        out = corrs
    else:
        out = pack(*zip(pids, corrs, strict=True)).keys
    for key, gone in zip(out, missing, strict=True):
        if gone is not None:
            key[gone] = -1
    return list(out)


def _one_process(pids: list[np.ndarray]) -> bool:
    """Whether every process id of every array is one and the same."""
    seen = {int(v) for p in pids if len(p) for v in (p.min(), p.max())}
    return len(seen) <= 1


def _known(values) -> tuple[np.ndarray, np.ndarray | None]:
    """(``values`` as integers, where they are missing: None when none can be): an integer
    array as it is; anything else as int64 with 0 in place of NaN (None is NaN)."""
    v = np.asarray(values)
    if v.dtype.kind in "iu":
        return v, None
    v = np.asarray(v, dtype=np.float64)  # (float64 as it is: no copy)
    gone = np.isnan(v)
    out = np.zeros(len(v), dtype=np.int64)  # (the integers written in place: 10M ops' ids
    np.copyto(out, v, casting="unsafe", where=~gone)  # made 2 float64 temporaries before)
    return out, gone


def _ascending(values: np.ndarray) -> bool:
    """True when ``values`` never decrease (then no sort is needed)."""
    return bool((values[1:] >= values[:-1]).all())


LAUNCH_ROWS_BLOCK = 1 << 20  # ops joined to their launch calls at a time (launch_rows)


def launch_rows(ops: pd.DataFrame, api: pd.DataFrame, threads: int = 1,
                block: int = LAUNCH_ROWS_BLOCK) -> np.ndarray:  # fmt: skip
    """Per op: the row position in ``api`` of its launch call, joined by process and
    correlation id with a sorted search (not a table merge); -1 where none (int32 below
    2^31 API rows). The ops are searched ``block`` at a time (where their keys are not in
    order, each block's in sorted order: cache-friendly), on up to ``threads`` threads
    (metrics/ahead.py; the result depends on neither)."""
    n = len(ops)
    out = np.full(n, -1, dtype=row_dtype(len(api)))
    if api.empty or n == 0:
        return out
    keys, want = _keys((api["pid"].to_numpy(), api["correlation"].to_numpy()),
                       (ops["pid"].to_numpy(), ops["correlation"].to_numpy()))  # fmt: skip
    # exports list API calls in correlation order: then the keys are sorted already
    order = None if _ascending(keys) else np.argsort(keys, kind="stable")
    sorted_keys = keys if order is None else keys[order]
    del keys
    in_order = _ascending(want)

    def found(b: int) -> tuple[np.ndarray, np.ndarray]:
        """(op rows, their calls' rows) of ops [b, b + block) whose call was found."""
        mine = want[b : b + block]
        if in_order:
            pos = np.searchsorted(sorted_keys, mine)  # first call with that key
        else:  # (the block's queries searched in sorted order)
            asked = np.argsort(mine, kind="stable")
            pos = np.empty(len(mine), dtype=np.int64)
            pos[asked] = np.searchsorted(sorted_keys, mine[asked])
            del asked
        np.minimum(pos, len(sorted_keys) - 1, out=pos)
        hit = np.flatnonzero((sorted_keys[pos] == mine) & (mine >= 0))
        return b + hit, pos[hit] if order is None else order[pos[hit]]

    for rows, calls in ahead(found, range(0, n, block), threads):
        out[rows] = calls
    return out


def op_identities(ops: pd.DataFrame, trace: Trace) -> np.ndarray:
    """Per op of a device_ops table: a code that tells its work apart (int32: held through
    the attribution's first steps, 10M ops: 40 MB): a kernel by its full (demangled) name
    where the trace has one, any other op by its name (codes of the two kinds never meet).
    Nsight's short names give many templates one name (every elementwise op
    ``vectorized_elementwise_kernel``, every CloverLeaf loop ``par_ranged2d_kernel``)."""
    codes = value_codes(ops["name"], np.int32)  # (fewer names than kernels: int32 holds them)
    kernels = trace.kernels
    if "demangled" in kernels and len(kernels):
        full = value_codes(kernels["demangled"], np.int32)
        is_kernel = (ops["kind"] == "kernel").to_numpy()
        shift = int(full.max()) + 1 if len(full) else 0
        codes = codes + shift  # (the other ops' codes after the full names')
        codes[is_kernel] = full[ops["src"].to_numpy()[is_kernel]]
    return codes


def idle_gaps(ops: pd.DataFrame) -> np.ndarray:
    """Per op of a device_ops table: the idle time before it on its device (ns; 0 for the
    first op of a device and for back-to-back or overlapping work)."""
    start = ops["start"].to_numpy()
    gap = reach_before(ops["end"].to_numpy(), ops["device"].to_numpy(), fill=start)
    np.subtract(start, gap, out=gap)  # (in place: start - the reach of earlier ops)
    np.maximum(gap, 0, out=gap)
    return gap


def attribute_gaps(
    ops: pd.DataFrame,
    trace: Trace,
    release: bool = False,
    threads: int = 1,
    shape_ranges: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ops, pieces): a device_ops table (a new table sharing its columns) with ``gap_ns``
    (int32 where every gap fits, else int64; ``overhead_ns`` likewise), the launch call's
    thread ``api_tid`` (categorical, NaN without a launch call),
    ``range_id`` (metrics/regions.py), ``shape_range`` where ``shape_ranges`` (host ranges:
    tid, start, end; sorted by start within each thread) has rows (the row of the one open
    on the launching thread at the launch call, open_range_at; -1 for none), ``cause``
    (categorical, CAUSES: the cause holding most of the gap; NaN where there is no gap),
    ``detail`` (what held it, categorical text), ``overhead_ns`` (the gap's launch-overhead
    part) and ``sync_call`` (the blocking call behind a synchronization or blocking-copy
    gap), ``launch_op`` (the innermost host range open at its launch call, categorical
    text), ``sync_held`` (whether a synchronization held part of the gap), ``steady``
    (whether the op lies in its device's steady state: attribution.steady_starts); and the
    idle pieces (device, start, end, cause, row: the op's row, detail: what held it), each
    gap split by cause (metrics/attribution.py), in cause order, each cause's by device and
    start (the windows' per-cause segments are slices: piece_segments); on a trace whose
    host events are a thinned sample (``trace.host_sample``) every gap is unattributed.
    ``release``: take the API calls' correlation ids out of ``trace.api`` once the launches
    are joined, their process and thread ids once the launch calls' threads are found
    (attribution.with_thread_keys), and empty it (its columns kept) once the attribution
    has read it (a caller that owns the trace: nothing later reads them). ``threads``: how
    many the attribution may use (attribution.attribute; the result does not depend on
    it)."""
    ops = ops.copy(deep=False)
    ops["gap_ns"] = column(ops, idle_gaps(ops))
    api = trace.api
    rows = launch_rows(ops, api, threads)
    if release and "correlation" in api:
        trace.api = api = api.drop(columns="correlation")
    ops["api_start"] = column(ops, _launch_starts(api, rows))
    ops["api_tid"] = column(ops, _launch_threads(api, rows))
    ranges = top_level_ranges(trace.nvtx)
    range_id = assign_ops(ops, ranges, threads).to_numpy().astype(np.int32, copy=False)
    ops["range_id"] = column(ops, range_id)
    del range_id
    if release:  # (the calls' process and thread ids read no more: one key each instead)
        trace.api = api = with_thread_keys(api)
    if shape_ranges is not None and len(shape_ranges):
        at = open_range_at(ops["api_tid"].array, ops["api_start"].to_numpy(), shape_ranges, threads)
        ops["shape_range"] = column(ops, _mostly(at.astype(np.int32, copy=False), -1))
        del at  # (int64 per op: held through the attribution otherwise, 10M ops: 79 MB)
    # (the launch calls' starts placed the ops in ranges: read no more; 10M ops: 83 MB)
    del ops["api_start"]
    # a thinned host side (trace.host_sample) cannot say why the GPU waited: its launch
    # calls still place the ops in ranges, but no gap is attributed to a cause
    causal_rows = rows if trace.host_sample is None else np.full_like(rows, -1)
    identity = op_identities(ops, trace)
    steady_start = steady_starts(ops, ranges, identity)
    ops["steady"] = column(ops, in_steady_state(ops, steady_start))
    pageable = pageable_copies(ops, trace)
    unmade = attribute(
        ops,
        api,
        host_ranges(trace),
        steady_start,
        causal_rows,
        pageable,
        identity=identity,
        threads=threads,
    )
    if release:  # (read no more: the pieces come back into their memory, 10M: 280 MB)
        trace.api = api.iloc[:0].copy()
    del api
    result = with_pieces(unmade)
    # (the attribution's arrays given to the table as they are: no copy of each)
    ops["cause"] = column(ops, pd.Categorical.from_codes(result.cause, CAUSES))
    # (the attribution read the gaps as int64; held from here on, as int32 where they fit)
    ops["gap_ns"] = column(ops, int32_where_fits(ops["gap_ns"].to_numpy()))
    overhead = int32_where_fits(result.overhead_ns)
    for col, values in (("detail", result.detail), ("overhead_ns", overhead),
                        ("sync_call", result.sync_call), ("launch_op", result.launch_op),
                        ("sync_held", result.sync_held)):  # fmt: skip
        ops[col] = column(ops, values)
    pieces = result.pieces
    pieces["cause"] = pd.Categorical.from_codes(pieces["cause"].to_numpy(), CAUSES)
    return ops, pieces


def _mostly(values: np.ndarray, fill: int) -> np.ndarray | pd.arrays.SparseArray:
    """``values`` as they are, or as a sparse array of the values other than ``fill`` where
    that is smaller (most ops are in no shape's range: 10M ops, 21K in one, 42 MB -> 0.2 MB
    held through the attribution)."""
    others = int(np.count_nonzero(values != fill))
    if others * (values.itemsize + 4) >= values.nbytes:  # (a value and an int32 index each)
        return values
    return pd.arrays.SparseArray(values, fill_value=fill)


def _launch_starts(api: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Per op: its launch call's start (ns, float64; NaN where ``rows``, the calls' rows in
    ``api``, is -1)."""
    has = rows >= 0
    values = np.full(len(rows), np.nan)
    if has.any():  # (numbers made float64 as they are put: no float64 copy of the calls)
        values[has] = _call_numbers(api, "start")[rows[has] if not has.all() else rows]
    return values


def _launch_threads(api: pd.DataFrame, rows: np.ndarray) -> pd.Categorical:
    """Per op: its launch call's thread id (categorical, NaN where ``rows`` is -1): a code
    of a byte or two per op where the float64 thread ids took 8 (83 MB at 10M ops, held
    through the attribution and the launch table, and gathered again per launch)."""
    has = rows >= 0
    codes = np.full(len(rows), -1, dtype=np.int32)
    if not has.any():
        return pd.Categorical.from_codes(codes, pd.Index([], dtype=np.float64))
    own, threads = few_value_codes(_call_numbers(api, "tid")[rows[has] if not has.all() else rows])
    codes[has] = own
    return pd.Categorical.from_codes(codes, threads)


def _call_numbers(api: pd.DataFrame, column: str) -> np.ndarray:
    """The API calls' ``column`` as numbers (float64 where not stored as numbers)."""
    values = api[column].to_numpy()
    return values if values.dtype.kind in "iuf" else api[column].to_numpy(np.float64)


def in_steady_state(ops: pd.DataFrame, steady_start: dict[int, int]) -> np.ndarray:
    """Per op: whether it starts at or after its device's steady start (bool; a device
    without a start-up, absent from ``steady_start``, is steady throughout)."""
    device = ops["device"].to_numpy()
    start = ops["start"].to_numpy()
    if not steady_start:
        return np.ones(len(ops), dtype=bool)
    devices = np.fromiter(steady_start, dtype=np.int64)
    at = np.fromiter(steady_start.values(), dtype=np.int64)
    order = np.argsort(devices)
    devices, at = devices[order], at[order]
    pos = np.minimum(np.searchsorted(devices, device), len(devices) - 1)
    known = devices[pos] == device
    return ~known | (start >= at[pos])


def host_ranges(trace: Trace) -> pd.DataFrame:
    """The host's ranges on their threads: NVTX / record_function ranges and CPU ops (start,
    end, pid, tid, text: categorical, so that names are matched and cleaned once per
    distinct text, not per row: a Kineto trace holds millions of CPU ops; ``op``: whether
    the range is one of the framework's operators: a CPU op, or a range whose text
    classify.yaml's framework_op_ranges names)."""
    cols = ["start", "end", "pid", "tid"]
    parts = [(trace.nvtx, "text")] if len(trace.nvtx) else []
    ops = getattr(trace, "cpu_ops", None)
    if ops is not None and len(ops):
        parts.append((ops, "name"))
    if not parts:
        frame = pd.DataFrame({c: pd.Series(dtype="float64") for c in [*cols, "text"]})
        return frame.assign(op=pd.Series(dtype=bool))
    texts = union_categoricals([_as_categorical(t[col]) for t, col in parts])
    frame = (
        pd.concat([t[cols] for t, _ in parts], ignore_index=True)
        if len(parts) > 1
        else parts[0][0][cols].reset_index(drop=True)
    )
    frame["text"] = texts
    op = np.ones(len(frame), dtype=bool)  # (CPU ops are operators by what they are)
    if len(trace.nvtx):
        n = len(trace.nvtx)
        op[:n] = name_matches(pd.Series(texts[:n]), "framework_op_ranges").to_numpy(bool)
    frame["op"] = op
    return frame


def _as_categorical(values: pd.Series) -> pd.Categorical:
    """Texts as a categorical with object categories (so that categoricals combine)."""
    if not isinstance(values.dtype, pd.CategoricalDtype):
        return text_categorical(values.astype(object).fillna("").to_numpy())
    cats = pd.Index(np.asarray(values.cat.categories, dtype=object), dtype=object)
    return pd.Categorical.from_codes(values.cat.codes.to_numpy(), cats)


def pageable_copies(ops: pd.DataFrame, trace: Trace) -> np.ndarray:
    """Per op: a copy between the device and pageable host memory (its launch call returns
    only when the copy is done, even when asynchronous)."""
    out = np.zeros(len(ops), dtype=bool)
    copies = trace.memcpy
    if copies.empty or not ({"src_memory", "dst_memory"} & set(copies.columns)):
        return out
    pageable = np.zeros(len(copies), dtype=bool)
    for col in ("src_memory", "dst_memory"):
        if col in copies:
            pageable |= copies[col].astype(object).fillna("").astype(str).str.lower().eq(
                "pageable").to_numpy()  # fmt: skip
    rows = np.flatnonzero(ops["kind"].eq("memcpy").to_numpy())
    out[rows] = pageable[ops["src"].to_numpy()[rows]]
    return out


def piece_segments(pieces: pd.DataFrame) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Per cause, per device: the idle pieces as disjoint sorted segments (ns). Slices of the
    pieces' columns where they come in cause order (as the attribution gives them, and any
    selection of its rows); copies otherwise."""
    out: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
    if pieces.empty:
        return out
    codes, device = pieces["cause"].array.codes, pieces["device"].to_numpy()
    start, end = pieces["start"].to_numpy(np.int64), pieces["end"].to_numpy(np.int64)
    for first, at in _cause_device_runs(codes, device):
        out.setdefault(CAUSES[codes[first]], {})[int(device[first])] = (start[at], end[at])
    return out


def _cause_device_runs(
    codes: np.ndarray, device: np.ndarray
) -> list[tuple[int, slice | np.ndarray]]:
    """The pieces (``codes``: their causes, ``device``: their devices) of each (cause,
    device), by cause then device, each in the pieces' order: (its first piece's position,
    its pieces: a slice where the pieces come in cause order and by device within a cause,
    else their positions, from a stable sort)."""
    n = len(codes)
    if n == 0:
        return []
    change = np.flatnonzero((codes[1:] != codes[:-1]) | (device[1:] != device[:-1])) + 1
    prev = change - 1
    ordered = (codes[change] > codes[prev]) | (
        (codes[change] == codes[prev]) & (device[change] > device[prev])
    )
    edges = np.r_[0, change, n]
    if ordered.all():
        return [(int(lo), slice(int(lo), int(hi)))
                for lo, hi in zip(edges[:-1], edges[1:], strict=True)]  # fmt: skip
    order = np.lexsort((device, codes))  # (stable: each run keeps the pieces' order)
    c, d = codes[order], device[order]
    edges = np.r_[0, np.flatnonzero((c[1:] != c[:-1]) | (d[1:] != d[:-1])) + 1, n]
    return [(int(order[lo]), order[lo:hi]) for lo, hi in zip(edges[:-1], edges[1:], strict=True)]


def gap_breakdown(pieces: pd.DataFrame) -> pd.DataFrame:
    """Per (device, cause): gaps with idle of that cause (count), its total, median and max
    per gap (ns)."""
    device = pieces["device"].to_numpy()
    cause = pieces["cause"]
    if isinstance(cause.dtype, pd.CategoricalDtype):
        codes, names = cause.array.codes, cause.cat.categories
    else:
        codes, names = pd.factorize(cause, sort=True)
    start, end = pieces["start"].to_numpy(np.int64), pieces["end"].to_numpy(np.int64)
    rows = []  # (one (cause, device) at a time: its lengths only)
    for first, at in _cause_device_runs(codes, device):
        mine = end[at] - start[at]
        rows.append((device[first], names[codes[first]], len(mine), int(mine.sum()),
                     _median_in_place(mine), int(mine.max())))  # fmt: skip
        del mine  # (before the next run's lengths are made)
    out = pd.DataFrame(rows, columns=["device", "cause", "count", "total_ns", "median_ns",
                                      "max_ns"])  # fmt: skip
    out = out.astype({"device": device.dtype, "cause": object, "count": np.int64,
                      "total_ns": np.int64, "median_ns": np.float64,
                      "max_ns": np.int64})  # fmt: skip
    return order_rows(out, "total_ns", ["device", "cause"])


def _median_in_place(values: np.ndarray) -> float:
    """``np.median(values)`` of a non-empty array the caller no longer needs, partitioned in
    place instead of copied (its order is lost): the mean of the two middle values for an
    even count, as float64."""
    k = len(values) // 2
    if len(values) % 2:
        values.partition(k)
        return float(values[k])
    values.partition((k - 1, k))
    return (float(values[k - 1]) + float(values[k])) / 2


def order_rows(t: pd.DataFrame, by: str, ties: list[str]) -> pd.DataFrame:
    """``t`` sorted by ``by`` descending, ties by ``ties`` ascending (stable): the one row
    order of the per-device tables (gap breakdown, streams, sequences), whether computed
    over a whole trace or concatenated from its ranks (parts.py)."""
    return t.sort_values([by, *ties], ascending=[False] + [True] * len(ties),
                         ignore_index=True, kind="stable")  # fmt: skip


STREAM_BLOCK_ROWS = 1 << 20  # ops summed at a time by stream_summary


def stream_summary(ops: pd.DataFrame, block_rows: int | None = None) -> pd.DataFrame:
    """Per (device, stream): ops, busy_ns (sum of op durations), first/last op and gap_ns,
    the stream's own idle time between its consecutive ops (other streams may be busy then).
    Sorted by gap_ns, descending. Summed ``block_rows`` ops at a time (default
    STREAM_BLOCK_ROWS) where each stream's ops come in start order (device_ops: by device
    and start), each stream's latest end carried from block to block: temporaries of a
    block, not of the table (10M ops: 0.5 GB otherwise); else over the table sorted."""
    cols = ["device", "stream", "ops", "busy_ns", "first_ns", "last_ns", "gap_ns"]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    sums = _StreamSums.of(ops, block_rows or STREAM_BLOCK_ROWS)
    out = pd.DataFrame(sums.columns() if sums is not None else _stream_sums_sorted(ops))
    return order_rows(out[cols], "gap_ns", ["device", "stream"])


def _stream_sums_sorted(ops: pd.DataFrame) -> dict[str, np.ndarray]:
    """stream_summary's columns (unordered) over the ops sorted by device, stream, start."""
    order = np.lexsort((ops["start"].to_numpy(), ops["stream"], ops["device"]))
    device, stream = ops["device"].to_numpy()[order], ops["stream"].to_numpy()[order]
    start = ops["start"].to_numpy()[order]
    end = ops["end"].to_numpy()[order]
    del order
    first = run_heads(device, stream)
    # the stream's own idle time: start minus the latest end of its earlier ops
    idle = reach_before(end, [device, stream], fill=start)
    np.subtract(start, idle, out=idle)
    np.maximum(idle, 0, out=idle)
    return {
        "device": device[first].astype(np.int64),
        "stream": stream[first].astype(np.int64),
        "ops": np.diff(np.append(first, len(start))),
        "busy_ns": np.add.reduceat(end - start, first),
        "first_ns": np.minimum.reduceat(start, first),
        "last_ns": np.maximum.reduceat(end, first),
        "gap_ns": np.add.reduceat(idle, first).astype(np.int64),
    }


class _StreamSums:
    """stream_summary's sums per (device, stream), added up block by block of ops in their
    order; ``of`` gives None where some stream's ops are not in start order (or its keys
    do not pack), which the sums need."""

    _NONE = np.iinfo(np.int64).min  # (no earlier op: a stream not met yet)

    def __init__(self) -> None:
        self.ids: dict[tuple[int, int], int] = {}  # (device, stream) -> its sums' row
        self.sums = {k: np.zeros(0, np.int64) for k in ("ops", "busy_ns", "gap_ns")}
        self.first_ns = np.zeros(0, np.int64)
        self.last_ns = np.zeros(0, np.int64)  # the latest end so far
        self.last_start = np.zeros(0, np.int64)  # the latest start so far

    @classmethod
    def of(cls, ops: pd.DataFrame, block: int) -> _StreamSums | None:
        sums = cls()
        device, stream = ops["device"].to_numpy(), ops["stream"].to_numpy()
        if device.dtype.kind not in "iu" or stream.dtype.kind not in "iu":
            return None  # (ids that may be NaN: the sorted table's way)
        start, end = ops["start"].to_numpy(np.int64), ops["end"].to_numpy(np.int64)
        for b in range(0, len(ops), block):
            part = slice(b, b + block)
            if not sums._add(device[part], stream[part], start[part], end[part]):
                return None
        return sums

    def _ids_of(self, device: np.ndarray, stream: np.ndarray) -> np.ndarray | None:
        """Per op: its (device, stream)'s row in the sums (new ones added); None where the
        pairs do not pack."""
        packed = pack_one(device, stream, fallback=None)
        if packed is None:
            return None
        codes, uniques = pd.factorize(packed)
        first = np.empty(len(uniques), dtype=np.int64)
        first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)  # (each code's first row)
        ids = [self.ids.setdefault((int(device[i]), int(stream[i])), len(self.ids))
               for i in first]  # fmt: skip
        grow = len(self.ids) - len(self.first_ns)
        if grow:
            for k, v in self.sums.items():
                self.sums[k] = np.append(v, np.zeros(grow, np.int64))
            self.first_ns = np.append(self.first_ns, np.zeros(grow, np.int64))
            self.last_ns = np.append(self.last_ns, np.full(grow, self._NONE))
            self.last_start = np.append(self.last_start, np.full(grow, self._NONE))
        small = np.int16 if len(self.ids) <= np.iinfo(np.int16).max else np.int64
        return np.asarray(ids, dtype=small)[codes]

    def _add(self, device, stream, start, end) -> bool:
        """Add one block of ops; False where a stream's ops are not in start order."""
        ids = self._ids_of(device, stream)
        if ids is None:
            return False
        order = np.argsort(ids, kind="stable")  # (each stream's ops together, in order)
        ids, start, end = ids[order], start[order], end[order]
        del order
        heads = run_heads(ids)
        g = ids[heads].astype(np.int64)  # each run's stream
        rows = np.diff(np.append(heads, len(ids)))
        ends = heads + rows - 1
        later = start[1:] >= start[:-1]
        later[heads[1:] - 1] = True
        if not later.all() or (start[heads] < self.last_start[g]).any():
            return False
        # the latest end of each op's earlier ops: within the block, then the carried one
        reach = reach_before(end, ids, fill=start)
        carried = self.last_ns[g]
        seen = carried != self._NONE
        np.maximum(reach, np.repeat(carried, rows), out=reach)
        reach[heads[seen]] = carried[seen]  # (a run's first op: the carried end alone)
        idle = np.subtract(start, reach, out=reach)
        np.maximum(idle, 0, out=idle)
        self.sums["ops"][g] += rows
        self.sums["busy_ns"][g] += np.add.reduceat(end - start, heads)
        self.sums["gap_ns"][g] += np.add.reduceat(idle, heads)
        first = np.minimum.reduceat(start, heads)
        self.first_ns[g] = np.where(seen, np.minimum(self.first_ns[g], first), first)
        self.last_ns[g] = np.maximum(carried, np.maximum.reduceat(end, heads))
        self.last_start[g] = start[ends]
        return True

    def columns(self) -> dict[str, np.ndarray]:
        pairs = np.array(list(self.ids), dtype=np.int64).reshape(-1, 2)
        return {"device": pairs[:, 0], "stream": pairs[:, 1], **self.sums,
                "first_ns": self.first_ns, "last_ns": self.last_ns}  # fmt: skip


def launch_sequences(
    gaps: pd.DataFrame, min_ops: int = 2, block_rows: int | None = None, threads: int = 1
) -> pd.DataFrame:
    """Runs of back-to-back GPU work per device, split at start-up, synchronization,
    unattributed or long (> SEQUENCE_BREAK_NS) gaps.

    Per sequence: ops, launches (host launches; a CUDA-graph replay counts once), span,
    median op time, median gap, overhead (launch-overhead gaps inside it) and
    ``graph_saving_ns``: the estimated saving if the eager launches ran from one CUDA graph,
    sum(max(0, gap - GRAPH_NODE_GAP_NS)) over gaps not already inside a graph.
    ``region`` is the first NVTX region among the sequence's ops (when ops carry one);
    ``top_kernel`` its most frequent op name (ties: the alphabetically first).
    ``block_rows``: ops of whole sequences sorted at a time (default SEQUENCE_BLOCK_ROWS),
    the blocks made on up to ``threads`` threads (the result depends on neither).
    """
    ops = gaps
    n = len(ops)
    if n == 0:
        return pd.DataFrame(columns=[*SEQUENCE_COLUMNS, "span_ns"])
    device = ops["device"].to_numpy()
    gap_ns = ops["gap_ns"].to_numpy()
    cause = ops["cause"]
    boundary = cause.isin(SEQUENCE_BREAKS).to_numpy().copy()
    boundary |= gap_ns > SEQUENCE_BREAK_NS
    boundary[1:] |= device[1:] != device[:-1]
    boundary[0] = True
    first = np.flatnonzero(boundary)  # sequences are contiguous runs of rows
    seq = np.cumsum(boundary, dtype=np.int32) - 1
    start, end = ops["start"].to_numpy(), ops["end"].to_numpy()
    out = pd.DataFrame(
        {
            "device": device[first],
            "start_ns": np.minimum.reduceat(start, first),
            "end_ns": np.maximum.reduceat(end, first),
            "ops": np.diff(np.append(first, n)),
        }
    )
    # what sorts within the runs, a block of whole runs at a time (10M ops: the sorts'
    # temporaries ~0.5 GB at once otherwise): launches (one host launch per (process,
    # correlation id); ops without one count alone), the medians, the most frequent name
    pid, correlation = ops["pid"].to_numpy(), ops["correlation"].to_numpy()
    names = _categorical(ops["name"], n)
    overhead_ns, graph = ops["overhead_ns"].to_numpy(), ops["graph"].to_numpy()
    eager = ~cause.eq("graph_internal").to_numpy()

    def per_run(block: tuple[slice, slice]) -> dict[str, np.ndarray]:
        """The columns sorted within runs, and the per-run sums, of one block of whole
        runs."""
        runs, rows = block
        r, f = seq[rows] - runs.start, first[runs] - rows.start
        took = (end[rows] - start[rows]).astype(np.float64)
        idle = np.where(boundary[rows], np.nan, gap_ns[rows])
        overhead = np.where(boundary[rows], 0, overhead_ns[rows])
        saving = np.where(eager[rows], graph_saving(overhead), 0)
        return {"launches": _distinct_per_run(r, _key(pid[rows], correlation[rows]), f),
                "median_op_ns": _median_per_run(r, took, f),
                "median_gap_ns": _median_per_run(r, idle, f),
                "top_kernel": _most_frequent(r, names[rows]),
                "overhead_ns": np.add.reduceat(overhead, f),
                "graph_saving_ns": np.add.reduceat(saving, f),
                "graph_ops": np.add.reduceat(graph[rows], f, dtype=np.int64)}  # fmt: skip

    # (blocks made on up to ``threads`` threads: metrics/ahead.py, the result the same)
    blocks = _run_blocks(first, n, block_rows or SEQUENCE_BLOCK_ROWS)
    parts = list(ahead(per_run, blocks, threads))
    for col in ("launches", "median_op_ns", "median_gap_ns", "top_kernel", "overhead_ns",
                "graph_saving_ns", "graph_ops"):  # fmt: skip
        out[col] = np.concatenate([part[col] for part in parts])
    del parts
    out["region"] = _first_per_run(ops["region"], first) if "region" in ops else None
    out = out[[*SEQUENCE_COLUMNS]]  # (the columns made in blocks in their place)
    out["span_ns"] = out["end_ns"] - out["start_ns"]
    out = out[out["ops"] >= min_ops]
    return order_rows(plain_columns(out.reset_index(drop=True)), *SEQUENCE_ORDER)


SEQUENCE_ORDER = ("overhead_ns", ["device", "start_ns"])  # (order_rows' by and ties)
SEQUENCE_BLOCK_ROWS = 1 << 19  # ops of whole runs sorted at a time by launch_sequences


def _run_blocks(first: np.ndarray, n: int, rows: int):
    """(runs, rows) slices: consecutive blocks of whole runs (runs of rows starting at the
    ascending rows ``first``, ``first[0]`` 0, ``n`` rows in all), each from about ``rows``
    rows (a longer run is a block of its own) to the end."""
    cuts = np.unique(np.searchsorted(first, np.arange(0, n, rows)))
    cuts = np.append(cuts[cuts < len(first)], len(first))
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        yield slice(a, b), slice(int(first[a]), int(first[b]) if b < len(first) else n)


def graph_saving(overhead_ns: np.ndarray) -> np.ndarray:
    """Per gap: what one CUDA graph would save of its launch overhead: max(0, overhead -
    GRAPH_NODE_GAP_NS) (ns)."""
    saving = np.asarray(overhead_ns, dtype=np.int64) - GRAPH_NODE_GAP_NS  # (a new array)
    return np.maximum(saving, 0, out=saving)


def _median_per_run(run: np.ndarray, values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Median of ``values`` (NaN skipped) per run of equal, ascending ``run`` ids starting
    at rows ``first``; NaN for a run without values."""
    valid = ~np.isnan(values)
    if not valid.any():
        return np.full(len(first), np.nan)
    count = np.add.reduceat(valid, first)
    ordered = _sorted_in_runs(run[valid], values[valid])
    # (each run's first row among the valid values, then its two middle values)
    lo, hi = middle_rows(np.cumsum(count) - count, count, len(ordered))
    return np.where(count > 0, (ordered[lo] + ordered[hi]) / 2, np.nan)


def _sorted_in_runs(run: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` sorted within each run of equal, ascending ``run`` ids (runs stay in
    place). Whole-number values are packed with their run id into one int64 and sorted as
    such (several times faster than a lexsort); others take the lexsort."""
    if len(values) == 0:
        return values
    whole = bool((values == np.floor(values)).all())
    packed = pack((run, values), fallback=None) if whole else None
    if packed is None:
        return values[np.lexsort((values, run))]
    (keys,) = packed.keys
    sort_runs(keys, int(run[-1]) - int(run[0]) + 1)
    return packed.column(1, keys).astype(np.float64)


def _distinct_per_run(run: np.ndarray, keys: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Number of distinct launch ``keys`` (_key: -1 for none, which counts alone) per run
    of equal ``run`` ids 0, 1, 2, ... (contiguous, ascending) starting at rows ``first``.
    Keys are packed with their run id into one int64 and sorted as such when the ranges
    allow (several times faster than a lexsort), else lexsorted."""
    known = keys >= 0
    counts = np.add.reduceat(~known, first).astype(np.int64)  # each op without a key
    if not known.any():
        return counts
    runs, known_keys = run[known], keys[known]
    packed = pack((runs, known_keys), fallback=None)
    if packed is None:  # keys spread too wide: number them first
        packed = pack((runs, pd.factorize(known_keys)[0]), fallback=None)
    if packed is None:  # each op without a key as a key of its own
        alone = np.flatnonzero(~known)
        keys = keys.copy()
        keys[alone] = -1 - alone
        return distinct_in_runs(keys[np.lexsort((keys, run))], first)
    (both,) = packed.keys
    sort_runs(both, len(first))
    return counts + np.bincount(packed.column(0, both[run_heads(both)]), minlength=len(first))


def _first_per_run(values: pd.Series, first: np.ndarray) -> np.ndarray:
    """First non-missing value per run of rows starting at ``first`` (NaN when none)."""
    cat = _categorical(values, len(values))
    valid = cat.codes >= 0
    if valid.all():  # (every row has a value: each run's first row's; no row numbers)
        codes = cat.codes[first]
    else:  # (the first row with a value at or after each run's start, if inside the run)
        rows = np.flatnonzero(valid)
        at = np.searchsorted(rows, first)
        found = at < len(rows)
        found[found] = rows[at[found]] < np.append(first[1:], len(values))[found]
        codes = np.where(found, cat.codes[rows[np.minimum(at, len(rows) - 1)]] if len(rows)
                         else -1, -1)  # fmt: skip
    del valid
    return np.asarray(pd.Categorical.from_codes(codes, cat.categories).astype(object))


SEQUENCE_COLUMNS = ("device", "start_ns", "end_ns", "ops", "launches", "median_op_ns",
                    "median_gap_ns", "overhead_ns", "graph_saving_ns", "graph_ops", "region",
                    "top_kernel")  # fmt: skip


def _most_frequent(groups: np.ndarray, names: pd.Categorical) -> np.ndarray:
    """Per group (contiguous ascending ids 0, 1, ...) the most frequent name; ties go to
    the alphabetically first name. Each (group, name rank) pair is packed into one int64
    and the pairs sorted within their groups (keys.sort_runs), so the distinct pairs and
    their counts are runs of equal keys (no hash table over every row)."""
    rank = np.argsort(np.argsort(names.categories.astype(str), kind="stable"))
    by_rank = np.asarray(names.categories, dtype=object)[np.argsort(rank)]
    # (group ids below the number of rows, ranks below the number of names: they pack)
    packed = pack((groups, rank[names.codes]))
    (keys,) = packed.keys
    sort_runs(keys, int(groups[-1]) + 1)
    pair = run_heads(keys)  # each distinct (group, rank), by group then rank
    count = np.diff(np.append(pair, len(keys)))
    g, r = packed.column(0, keys[pair]), packed.column(1, keys[pair])
    head = run_heads(g)  # each group's first pair
    best = np.maximum.reduceat(count, head)
    # the first pair of its group (the lowest rank) with the group's highest count
    top = count == np.repeat(best, np.diff(np.append(head, len(g))))
    first_top = np.minimum.reduceat(np.where(top, np.arange(len(g)), len(g)), head)
    return by_rank[r[first_top]]
