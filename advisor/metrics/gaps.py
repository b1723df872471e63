"""Device idle gaps between GPU operations, attributed to their host-side cause.

Per device, GPU work (kernels, copies, memsets, whole-graph executions) is sorted by start;
the gap before an operation is ``start - max(end of every earlier operation)`` when positive,
so gaps are exactly the device's idle time between its first and last operation. Each gap is
attributed with the host API calls joined by (process, correlation id), first match wins:

  startup          a start-up call (module/library load, allocation, context/stream/graph
                   creation; classify.yaml ``startup_api``) ran while the device was idle and
                   the next launch not yet issued: reported, kept out of the overhead totals
  synchronization  likewise a blocking call (classify.yaml ``sync_api``)
  graph_internal   the gap lies between two nodes of the same CUDA-graph launch
  host_bound       the launch call returned after the device had gone idle (CPU was late)
  launch_latency   work was enqueued before the device went idle, yet it still idled
  unattributed     no host call is known for the operation (API not traced)

The window tested for start-up and synchronization calls is [device idle, launch call
start]: a call that began earlier but did not hold back the launch (the work was already
queued) does not own the gap. Launch overhead = host_bound + launch_latency + graph_internal.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from advisor.data import name_matches
from advisor.metrics.intervals import distinct_in_runs, grouped_order, reach_before, run_heads
from advisor.metrics.keys import pack
from advisor.plain import plain_columns
from advisor.trace.model import Trace

OVERHEAD_CAUSES = ("host_bound", "launch_latency", "graph_internal")
# Gap between consecutive kernels of one CUDA-graph replay, measured on an H200 in the
# tiny_kernels_graph range of sample_traces/h200_scheduling.sqlite: median of the positive
# node-to-node gaps (264 of 495 pairs; the rest ran back to back). Used to estimate what a
# launch sequence would cost if it ran from one graph.
GRAPH_NODE_GAP_NS = 256
# A gap longer than this ends a launch sequence (it is host work, not launch cost).
SEQUENCE_BREAK_NS = 1_000_000

# gap causes, in the order they are tested (docstring above)
CAUSES = ("startup", "synchronization", "graph_internal", "unattributed", "host_bound",
          "launch_latency")  # fmt: skip
CAUSE_CODE = {name: code for code, name in enumerate(CAUSES)}  # the categorical's codes


def device_ops(trace: Trace) -> pd.DataFrame:
    """All GPU operations of a trace in one table, sorted by (device, start, end): device,
    stream, start, end, correlation (float, NaN unknown), pid, kind, name (categorical),
    graph (launched from a CUDA graph) and src (row position in its trace table)."""
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

    def joined(col: str, dtype, out=None) -> np.ndarray:
        return np.concatenate([t[col].to_numpy() for t, *_ in parts], out=out, dtype=dtype,
                              casting="unsafe")  # fmt: skip

    device, start, end = (
        joined("device", np.int32),
        joined("start", np.int64),
        joined("end", np.int64),
    )
    order = np.lexsort((end, start, device))  # stable: ties keep table order
    scratch = np.empty(n, dtype=np.int64)  # other columns are joined here, then put in order

    def ordered(col: str, dtype) -> np.ndarray:
        buffer = scratch.view(dtype)[:n]
        return joined(col, None, out=buffer).take(order)

    names = union_categoricals([_categorical(name(), len(t)) for t, _, name, _ in parts])
    kinds = pd.Categorical.from_codes(
        np.repeat(np.arange(len(parts), dtype=np.int8), sizes), [kind for _, kind, *_ in parts]
    )
    return pd.DataFrame(
        {
            "device": device.take(order),
            "stream": ordered("stream", np.int32),
            "start": start.take(order),
            "end": end.take(order),
            "correlation": ordered("correlation", np.float64),
            "pid": ordered("pid", np.int32),
            "kind": kinds.take(order),
            "name": names.take(order),
            "graph": np.concatenate(
                [
                    np.broadcast_to(np.asarray(graph(), dtype=bool), (len(t),))
                    for t, *_, graph in parts
                ]
            )[order],
            "src": np.concatenate([np.arange(n, dtype=np.int32) for n in sizes])[order],
        },
        copy=False,  # one block per column: no consolidating copy
    )


def _categorical(values, n: int) -> pd.Categorical:
    """``values`` (a Series, or one value for all ``n`` rows) as a Categorical whose
    categories are plain Python objects (so categoricals from any reader combine)."""
    if not isinstance(values, pd.Series):
        return pd.Categorical.from_codes(
            np.zeros(n, dtype=np.int8), pd.Index([values], dtype=object)
        )
    cat = values.array if isinstance(values.dtype, pd.CategoricalDtype) else pd.Categorical(values)
    return pd.Categorical.from_codes(cat.codes, pd.Index(cat.categories, dtype=object))


def _last_overlapping(lo, hi, starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """For each window (lo, hi): does any interval [starts, ends) intersect it, and the
    position (in ``starts``) of the last interval starting before hi (the call that held
    the host last), -1 where none intersects."""
    if starts.size == 0:
        return np.zeros(lo.shape, dtype=bool), np.full(lo.shape, -1, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    reach = np.maximum.accumulate(ends[order])
    k = np.searchsorted(s, hi, side="left")  # intervals starting before hi
    hit = (k > 0) & (reach[np.maximum(k - 1, 0)] > lo)
    return hit, np.where(hit, order[np.maximum(k - 1, 0)], -1)


def _api_class_overlap(api: pd.DataFrame, category: str, gaps: pd.DataFrame):
    """Per gap row: does a ``category`` call of the same process overlap [gap_start, hi),
    and the row position in ``api`` of the call that held the host last (-1: none)."""
    hit = np.zeros(len(gaps), dtype=bool)
    rows_out = np.full(len(gaps), -1, dtype=np.int64)
    if api.empty or gaps.empty:
        return hit, rows_out
    calls = np.flatnonzero(name_matches(api["name"], category).to_numpy())
    if calls.size == 0:
        return hit, rows_out
    call_pid = api["pid"].to_numpy()[calls]
    pid = gaps["pid"].to_numpy()
    one = pid.min() == pid.max()  # (one process: no grouping, no copies)
    for p, rows in ({pid[0]: slice(None)} if one else gaps.groupby("pid").indices).items():
        c = calls[call_pid == p]
        if c.size == 0:
            continue
        hit[rows], at = _last_overlapping(
            gaps["gap_start"].to_numpy()[rows],
            gaps["hi"].to_numpy()[rows],
            api["start"].to_numpy(np.int64)[c],
            api["end"].to_numpy(np.int64)[c],
        )
        rows_out[rows] = np.where(at >= 0, c[np.maximum(at, 0)], -1)
    return hit, rows_out


def _key(pid, correlation) -> np.ndarray:
    """(process, correlation id) as one int64, equal for equal pairs; -1 where the
    correlation is missing (see _keys)."""
    return _keys((pid, correlation))[0]


def _keys(*pairs) -> list[np.ndarray]:
    """int64 keys of (process, correlation id) arrays, equal across all the arrays exactly
    when the pairs are, sorting as the pairs (so as the export's order); -1 where the
    correlation is missing. Packed by metrics/keys.pack (64-bit rocprof ids that do not fit
    are numbered instead)."""
    pids, corrs, missing = [], [], []
    for pid, correlation in pairs:
        corr = np.asarray(correlation)
        if corr.dtype.kind not in "iu":
            corr = corr.astype(np.float64)  # (None -> NaN)
        gone = np.isnan(corr) if corr.dtype.kind == "f" else np.zeros(len(corr), dtype=bool)
        pids.append(np.asarray(pid, dtype=np.int64))
        corrs.append(np.where(gone, 0, corr).astype(np.int64))
        missing.append(gone)
    out = pack(*zip(pids, corrs, strict=True)).keys
    for key, gone in zip(out, missing, strict=True):
        key[gone] = -1
    return list(out)


def _ascending(values: np.ndarray) -> bool:
    """True when ``values`` never decrease (then no sort is needed)."""
    return bool((values[1:] >= values[:-1]).all())


def _launch_calls(ops: pd.DataFrame, api: pd.DataFrame) -> dict[str, np.ndarray]:
    """api_start, api_end, api_tid of each op's launch call (joined by process and
    correlation id with a sorted search, not a table merge); NaN where none."""
    n = len(ops)
    out = {"api_start": np.full(n, np.nan), "api_end": np.full(n, np.nan),
           "api_tid": np.full(n, np.nan)}  # fmt: skip
    if api.empty or n == 0:
        return out
    keys, want = _keys((api["pid"].to_numpy(), api["correlation"].to_numpy()),
                       (ops["pid"].to_numpy(), ops["correlation"].to_numpy()))  # fmt: skip
    # exports list API calls in correlation order: then the keys are sorted already
    order = None if _ascending(keys) else np.argsort(keys, kind="stable")
    sorted_keys = keys if order is None else keys[order]
    if _ascending(want):
        pos = np.searchsorted(sorted_keys, want)  # first call with that key
    else:  # queries searched in sorted order (cache-friendly)
        asked = np.argsort(want, kind="stable")
        pos = np.empty(n, dtype=np.int64)
        pos[asked] = np.searchsorted(sorted_keys, want[asked])
        del asked
    np.minimum(pos, len(sorted_keys) - 1, out=pos)
    found = (sorted_keys[pos] == want) & (want >= 0)
    rows = pos[found] if order is None else order[pos[found]]
    for col in out:  # (the matched rows only are converted to float)
        out[col][found] = api[col.removeprefix("api_")].to_numpy()[rows]
    return out


def attribute_gaps(ops: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Add ``gap_ns``, ``cause``, ``sync_call`` and the launch call's ``api_start`` and
    ``api_tid`` to a device_ops table (a new table sharing the input's columns).

    ``gap_ns`` is 0 for the first operation of each device and for back-to-back work (a
    gap opens at ``start - gap_ns``);
    ``cause`` (categorical, CAUSES) is NaN where there is no gap.
    """
    ops = ops.copy(deep=False)
    start = ops["start"].to_numpy()
    gap = reach_before(ops["end"].to_numpy(), ops["device"].to_numpy(), fill=start)
    np.subtract(start, gap, out=gap)  # (in place: start - the reach of earlier ops)
    np.maximum(gap, 0, out=gap)
    ops["gap_ns"] = gap
    del gap
    calls = _launch_calls(ops, api)
    ops["api_start"] = calls["api_start"]
    ops["api_tid"] = calls["api_tid"]

    at = np.flatnonzero(ops["gap_ns"].to_numpy() > 0)
    start = ops["start"].to_numpy()[at]
    gap_start = start - ops["gap_ns"].to_numpy()[at]  # where the device went idle
    api_end = calls["api_end"][at]
    del calls
    g = pd.DataFrame(
        {
            "pid": ops["pid"].to_numpy()[at],
            "gap_start": gap_start,
            # the host still owed the launch from gap_start until the launch call began
            "hi": np.fmin(ops["api_start"].to_numpy()[at], start.astype(np.float64)),
        }
    )
    startup, _ = _api_class_overlap(api, "startup_api", g)
    sync, sync_row = _api_class_overlap(api, "sync_api", g)
    # a gap between two nodes of one CUDA-graph launch: previous op on the same device is
    # from the same graph launch (same correlation id)
    device = ops["device"].to_numpy()
    graph = ops["graph"].to_numpy(bool)
    corr = ops["correlation"].to_numpy()
    prev = np.maximum(at - 1, 0)
    same_graph = (at > 0) & (device[prev] == device[at]) & graph[at] & graph[prev]
    same_graph &= corr[at] == corr[prev]
    # the first condition that holds names the cause
    causes = {
        "startup": startup,
        "synchronization": sync,
        "graph_internal": same_graph,
        "unattributed": np.isnan(api_end),  # no launch call in the trace
        "host_bound": api_end > gap_start,  # the launch call ended after the device idled
    }
    cause = np.select(
        list(causes.values()),
        [CAUSE_CODE[name] for name in causes],
        default=CAUSE_CODE["launch_latency"],
    )
    codes = np.full(len(ops), -1, dtype=np.int8)
    codes[at] = cause
    ops["cause"] = pd.Categorical.from_codes(codes, CAUSES)
    # the blocking call behind a synchronization gap (categorical, as the API names)
    names = _categorical(api["name"], len(api)) if len(api) else pd.Categorical([])
    call_codes = np.full(len(ops), -1, dtype=names.codes.dtype)
    on_sync = cause == CAUSE_CODE["synchronization"]
    call_codes[at[on_sync]] = names.codes[sync_row[on_sync]]
    ops["sync_call"] = pd.Categorical.from_codes(call_codes, names.categories)
    return ops


def gap_breakdown(gaps: pd.DataFrame) -> pd.DataFrame:
    """Per (device, cause): gap count, total, median and max gap (ns)."""
    g = gaps.loc[gaps["gap_ns"].to_numpy() > 0, ["device", "cause", "gap_ns"]]
    out = g.groupby(["device", "cause"], observed=True)["gap_ns"].agg(
        ["count", "sum", "median", "max"]
    )
    out = out.rename(columns={"sum": "total_ns", "median": "median_ns", "max": "max_ns"})
    return order_rows(plain_columns(out.reset_index()), "total_ns", ["device", "cause"])


def order_rows(t: pd.DataFrame, by: str, ties: list[str]) -> pd.DataFrame:
    """``t`` sorted by ``by`` descending, ties by ``ties`` ascending (stable): the one row
    order of the per-device tables (gap breakdown, streams, sequences), whether computed
    over a whole trace or concatenated from its ranks (parts.py)."""
    return t.sort_values([by, *ties], ascending=[False] + [True] * len(ties),
                         ignore_index=True, kind="stable")  # fmt: skip


def stream_summary(ops: pd.DataFrame) -> pd.DataFrame:
    """Per (device, stream): ops, busy_ns (sum of op durations), first/last op and gap_ns,
    the stream's own idle time between its consecutive ops (other streams may be busy then).
    Sorted by gap_ns, descending."""
    cols = ["device", "stream", "ops", "busy_ns", "first_ns", "last_ns", "gap_ns"]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    # ops come sorted by (device, start, end): a stable grouping by stream keeps that order
    order = grouped_order(ops["stream"].to_numpy(), ops["device"].to_numpy())
    device, stream = ops["device"].to_numpy()[order], ops["stream"].to_numpy()[order]
    start = ops["start"].to_numpy()[order]
    first = run_heads(device, stream)
    later = np.ones(len(start), dtype=bool)
    np.greater_equal(start[1:], start[:-1], out=later[1:])
    later[first] = True
    if not later.all():  # (ops not sorted by start: order each stream's ops by start)
        order = np.lexsort((ops["start"].to_numpy(), ops["stream"], ops["device"]))
        device, stream = ops["device"].to_numpy()[order], ops["stream"].to_numpy()[order]
        start = ops["start"].to_numpy()[order]
    end = ops["end"].to_numpy()[order]
    del order, later
    # the stream's own idle time: start minus the latest end of its earlier ops
    idle = reach_before(end, [device, stream], fill=start)
    np.subtract(start, idle, out=idle)
    np.maximum(idle, 0, out=idle)
    out = pd.DataFrame(
        {
            "device": device[first].astype(np.int64),
            "stream": stream[first].astype(np.int64),
            "ops": np.diff(np.append(first, len(start))),
            "busy_ns": np.add.reduceat(end - start, first),
            "first_ns": np.minimum.reduceat(start, first),
            "last_ns": np.maximum.reduceat(end, first),
            "gap_ns": np.add.reduceat(idle, first).astype(np.int64),
        }
    )
    return order_rows(out, "gap_ns", ["device", "stream"])


def launch_sequences(gaps: pd.DataFrame, min_ops: int = 2) -> pd.DataFrame:
    """Runs of back-to-back GPU work per device, split at start-up, synchronization,
    unattributed or long (> SEQUENCE_BREAK_NS) gaps.

    Per sequence: ops, launches (host launches; a CUDA-graph replay counts once), span,
    median op time, median gap, overhead (launch-overhead gaps inside it) and
    ``graph_saving_ns``: the estimated saving if the eager launches ran from one CUDA graph,
    sum(max(0, gap - GRAPH_NODE_GAP_NS)) over gaps not already inside a graph.
    ``region`` is the first NVTX region among the sequence's ops (when ops carry one);
    ``top_kernel`` its most frequent op name (ties: the alphabetically first).
    """
    ops = gaps
    n = len(ops)
    if n == 0:
        return pd.DataFrame(columns=[*SEQUENCE_COLUMNS, "span_ns"])
    device = ops["device"].to_numpy()
    gap_ns = ops["gap_ns"].to_numpy()
    cause = ops["cause"]
    boundary = cause.isin(["startup", "synchronization", "unattributed"]).to_numpy().copy()
    boundary |= gap_ns > SEQUENCE_BREAK_NS
    boundary[1:] |= device[1:] != device[:-1]
    boundary[0] = True
    first = np.flatnonzero(boundary)  # sequences are contiguous runs of rows
    seq = np.cumsum(boundary, dtype=np.int32) - 1
    inner_gap = np.where(boundary, 0, gap_ns)
    start, end = ops["start"].to_numpy(), ops["end"].to_numpy()
    out = pd.DataFrame(
        {
            "device": device[first],
            "start_ns": np.minimum.reduceat(start, first),
            "end_ns": np.maximum.reduceat(end, first),
            "ops": np.diff(np.append(first, n)),
        }
    )
    # one host launch per (process, correlation id); ops without one count alone
    out["launches"] = _distinct_per_run(seq, _key(ops["pid"], ops["correlation"]), first)
    out["median_op_ns"] = _median_per_run(seq, (end - start).astype(np.float64), first)
    out["median_gap_ns"] = _median_per_run(seq, np.where(boundary, np.nan, gap_ns), first)
    overhead = np.where(cause.isin(OVERHEAD_CAUSES).to_numpy(), inner_gap, 0)
    out["overhead_ns"] = np.add.reduceat(overhead, first)
    del overhead
    eager = ~cause.eq("graph_internal").to_numpy()
    saving = np.where(eager & (inner_gap > 0), np.maximum(inner_gap - GRAPH_NODE_GAP_NS, 0), 0)
    del inner_gap, eager
    out["graph_saving_ns"] = np.add.reduceat(saving, first)
    del saving
    out["graph_ops"] = np.add.reduceat(ops["graph"].to_numpy(np.int64), first)
    out["region"] = _first_per_run(ops["region"], first) if "region" in ops else None
    out["top_kernel"] = _most_frequent(seq, _categorical(ops["name"], n))
    out["span_ns"] = out["end_ns"] - out["start_ns"]
    out = out[out["ops"] >= min_ops]
    return order_rows(plain_columns(out.reset_index(drop=True)), *SEQUENCE_ORDER)


SEQUENCE_ORDER = ("overhead_ns", ["device", "start_ns"])  # (order_rows' by and ties)


def _median_per_run(run: np.ndarray, values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Median of ``values`` (NaN skipped) per run of equal, ascending ``run`` ids starting
    at rows ``first``; NaN for a run without values."""
    valid = ~np.isnan(values)
    if not valid.any():
        return np.full(len(first), np.nan)
    count = np.add.reduceat(valid, first)
    ordered = _sorted_in_runs(run[valid], values[valid])
    head = np.cumsum(count) - count  # each run's first row among the valid values
    last = len(ordered) - 1  # (a run without values may start past the end)
    lo = np.minimum(head + np.maximum(count - 1, 0) // 2, last)
    hi = np.minimum(head + count // 2, last)  # the two middle values
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
    keys.sort()
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
    both.sort()
    new = np.ones(len(both), dtype=bool)
    np.not_equal(both[1:], both[:-1], out=new[1:])
    return counts + np.bincount(packed.column(0, both[new]), minlength=len(first))


def _first_per_run(values: pd.Series, first: np.ndarray) -> np.ndarray:
    """First non-missing value per run of rows starting at ``first`` (None when none)."""
    cat = _categorical(values, len(values))
    n = len(values)
    pos = np.where(cat.codes >= 0, np.arange(n), n)
    at = np.minimum.reduceat(pos, first)
    ends = np.append(first[1:], n)
    found = at < ends
    codes = np.where(found, cat.codes[np.minimum(at, n - 1)], -1)
    return np.asarray(pd.Categorical.from_codes(codes, cat.categories).astype(object))


SEQUENCE_COLUMNS = ("device", "start_ns", "end_ns", "ops", "launches", "median_op_ns",
                    "median_gap_ns", "overhead_ns", "graph_saving_ns", "graph_ops", "region",
                    "top_kernel")  # fmt: skip


def _most_frequent(groups: np.ndarray, names: pd.Categorical) -> np.ndarray:
    """Per group (ascending ids) the most frequent name; ties go to the alphabetically
    first name."""
    rank = np.argsort(np.argsort(names.categories.astype(str), kind="stable"))
    pairs = pd.DataFrame({"g": groups, "r": rank[names.codes]}).value_counts(sort=False)
    g = pairs.index.get_level_values("g").to_numpy()
    r = pairs.index.get_level_values("r").to_numpy()
    order = np.lexsort((r, -pairs.to_numpy(), g))
    g, r = g[order], r[order]
    head = np.ones(len(g), dtype=bool)
    head[1:] = g[1:] != g[:-1]
    by_rank = np.asarray(names.categories, dtype=object)[np.argsort(rank)]
    return by_rank[r[head]]
