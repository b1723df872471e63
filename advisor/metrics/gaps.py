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

from advisor.data import name_matches
from advisor.metrics.intervals import reach_before
from advisor.trace.model import Trace

OVERHEAD_CAUSES = ("host_bound", "launch_latency", "graph_internal")
# Gap between consecutive kernels of one CUDA-graph replay, measured on an H200 in the
# tiny_kernels_graph range of sample_traces/h200_scheduling.sqlite: median of the positive
# node-to-node gaps (264 of 495 pairs; the rest ran back to back). Used to estimate what a
# launch sequence would cost if it ran from one graph.
GRAPH_NODE_GAP_NS = 256
# A gap longer than this ends a launch sequence (it is host work, not launch cost).
SEQUENCE_BREAK_NS = 1_000_000

_OP_COLUMNS = ["device", "stream", "start", "end", "correlation", "pid"]


def device_ops(trace: Trace) -> pd.DataFrame:
    """All GPU operations of a trace in one table: kind, name, graph flag, sorted per device."""
    k, copies, sets, graphs = trace.kernels, trace.memcpy, trace.memset, trace.graphs
    parts = [
        _part(k, "kernel", k["name"], k["graph_node"].notna()),
        _part(copies, "memcpy", "memcpy " + copies["kind"].astype(str), False),
        _part(sets, "memset", "memset", False),
        _part(graphs, "graph", "CUDA graph " + graphs["graph_id"].astype(str), True),
    ]
    parts = [p for p in parts if len(p)]
    ops = pd.concat(parts, ignore_index=True)
    ops = ops.sort_values(["device", "start", "end"], kind="stable", ignore_index=True)
    for col in ("start", "end", "device", "stream", "pid"):
        ops[col] = ops[col].astype("int64")
    return ops


def _part(table: pd.DataFrame, kind: str, name, graph) -> pd.DataFrame:
    """One kind of GPU operation in device_ops form; ``src`` is its row in ``table``."""
    return table[_OP_COLUMNS].assign(kind=kind, name=name, graph=graph, src=table.index)


def _last_overlapping(lo, hi, starts, ends, names):
    """For each window (lo, hi): does any interval [starts, ends) intersect it, and the name
    of the last interval starting before hi (the call that held the host last)."""
    if starts.size == 0:
        return np.zeros(lo.shape, dtype=bool), np.full(lo.shape, None, dtype=object)
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    reach = np.maximum.accumulate(ends[order])
    k = np.searchsorted(s, hi, side="left")  # intervals starting before hi
    hit = (k > 0) & (reach[np.maximum(k - 1, 0)] > lo)
    last = np.asarray(names, dtype=object)[order][np.maximum(k - 1, 0)]
    return hit, np.where(hit, last, None)


def _api_class_overlap(api: pd.DataFrame, category: str, gaps: pd.DataFrame):
    """Per gap row: does a ``category`` call of the same process overlap [gap_start, hi),
    and which call (name) held the host last."""
    hit = np.zeros(len(gaps), dtype=bool)
    names = np.full(len(gaps), None, dtype=object)
    if api.empty or gaps.empty:
        return hit, names
    calls = api[name_matches(api["name"], category)]
    for pid, rows in gaps.groupby("pid").indices.items():
        c = calls[calls["pid"] == pid]
        hit[rows], names[rows] = _last_overlapping(
            gaps["gap_start"].to_numpy()[rows],
            gaps["hi"].to_numpy()[rows],
            c["start"].to_numpy(np.int64),
            c["end"].to_numpy(np.int64),
            c["name"].to_numpy(),
        )
    return hit, names


def _key(pid, correlation) -> np.ndarray:
    """(process, 32-bit correlation id) as one int64; -1 where the correlation is missing."""
    corr = np.asarray(correlation, dtype=np.float64)
    key = (np.asarray(pid, dtype=np.int64) << 32) + np.nan_to_num(corr, nan=0).astype(np.int64)
    return np.where(np.isnan(corr), -1, key)


def _launch_calls(ops: pd.DataFrame, api: pd.DataFrame) -> dict[str, np.ndarray]:
    """api_start, api_end, api_name, api_tid of each op's launch call (joined by process and
    correlation id with a sorted search, not a table merge); NaN/None where none."""
    n = len(ops)
    out = {"api_start": np.full(n, np.nan), "api_end": np.full(n, np.nan),
           "api_name": np.full(n, None, dtype=object), "api_tid": np.full(n, np.nan)}  # fmt: skip
    if api.empty or n == 0:
        return out
    keys = _key(api["pid"].to_numpy(), api["correlation"].to_numpy(np.float64))
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    want = _key(ops["pid"].to_numpy(), ops["correlation"].to_numpy())
    pos = np.searchsorted(sorted_keys, want)  # first call with that key
    pos = np.minimum(pos, len(sorted_keys) - 1)
    found = (sorted_keys[pos] == want) & (want >= 0)
    rows = order[pos[found]]
    out["api_start"][found] = api["start"].to_numpy(np.float64)[rows]
    out["api_end"][found] = api["end"].to_numpy(np.float64)[rows]
    out["api_name"][found] = api["name"].to_numpy(object)[rows]
    out["api_tid"][found] = api["tid"].to_numpy(np.float64)[rows]
    return out


def attribute_gaps(ops: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Add ``gap_ns``, ``gap_start``, ``cause``, ``sync_call`` and launch-call columns
    (api_start, api_end, api_name, api_tid) to a device_ops table.

    ``gap_ns`` is 0 for the first operation of each device and for back-to-back work;
    ``cause`` is None where there is no gap.
    """
    ops = ops.copy()
    prev_reach = reach_before(ops["end"], ops["device"])
    gap = (ops["start"] - prev_reach).clip(lower=0).fillna(0).astype("int64")
    ops["gap_ns"] = gap
    ops["gap_start"] = prev_reach.fillna(ops["start"]).astype("int64")
    ops["correlation"] = ops["correlation"].astype("float64")
    for col, values in _launch_calls(ops, api).items():
        ops[col] = values

    has_gap = ops["gap_ns"] > 0
    g = ops.loc[has_gap, ["pid", "gap_start", "start", "api_start"]].reset_index()
    # the host still owed the launch from gap_start until the launch call began
    g["hi"] = np.fmin(g["api_start"].to_numpy(np.float64), g["start"].to_numpy(np.float64))
    startup, _ = _api_class_overlap(api, "startup_api", g)
    sync, sync_call = _api_class_overlap(api, "sync_api", g)
    prev_corr = ops.groupby("device")["correlation"].shift(1)
    prev_graph = ops.groupby("device")["graph"].shift(1).fillna(False).astype(bool)
    same_graph = (ops["graph"] & prev_graph & (ops["correlation"] == prev_corr)).to_numpy()[
        g["index"]
    ]
    api_end = ops["api_end"].to_numpy()[g["index"]]
    no_api = np.isnan(api_end)
    late = api_end > g["gap_start"].to_numpy()
    cause = np.select(
        [startup, sync, same_graph, no_api, late],
        ["startup", "synchronization", "graph_internal", "unattributed", "host_bound"],
        default="launch_latency",
    )
    ops["cause"] = None
    ops.loc[has_gap, "cause"] = cause
    ops["sync_call"] = None  # the blocking call behind a synchronization gap
    ops.loc[has_gap, "sync_call"] = np.where(cause == "synchronization", sync_call, None)
    return ops


def gap_breakdown(gaps: pd.DataFrame) -> pd.DataFrame:
    """Per (device, cause): gap count, total, median and max gap (ns)."""
    g = gaps[gaps["gap_ns"] > 0]
    out = g.groupby(["device", "cause"])["gap_ns"].agg(["count", "sum", "median", "max"])
    out = out.rename(columns={"sum": "total_ns", "median": "median_ns", "max": "max_ns"})
    return out.reset_index().sort_values("total_ns", ascending=False, ignore_index=True)


def stream_summary(ops: pd.DataFrame) -> pd.DataFrame:
    """Per (device, stream): ops, busy_ns (sum of op durations), first/last op and gap_ns,
    the stream's own idle time between its consecutive ops (other streams may be busy then).
    Sorted by gap_ns, descending."""
    if ops.empty:
        return pd.DataFrame(
            columns=["device", "stream", "ops", "busy_ns", "first_ns", "last_ns", "gap_ns"]
        )
    ops = ops.sort_values(["device", "stream", "start"], kind="stable")
    keys = [ops["device"], ops["stream"]]
    prev = reach_before(ops["end"], keys)
    stream_gap = (ops["start"] - prev).clip(lower=0).fillna(0)
    ops = ops.assign(stream_gap=stream_gap, dur=ops["end"] - ops["start"])
    out = ops.groupby(["device", "stream"]).agg(
        ops=("start", "size"),
        busy_ns=("dur", "sum"),
        first_ns=("start", "min"),
        last_ns=("end", "max"),
        gap_ns=("stream_gap", "sum"),
    )
    out["gap_ns"] = out["gap_ns"].astype("int64")
    return out.reset_index().sort_values("gap_ns", ascending=False, ignore_index=True)


def launch_sequences(gaps: pd.DataFrame, min_ops: int = 2) -> pd.DataFrame:
    """Runs of back-to-back GPU work per device, split at start-up, synchronization,
    unattributed or long (> SEQUENCE_BREAK_NS) gaps.

    Per sequence: ops, launches (host launches; a CUDA-graph replay counts once), span,
    median op time, median gap, overhead (launch-overhead gaps inside it) and
    ``graph_saving_ns``: the estimated saving if the eager launches ran from one CUDA graph,
    sum(max(0, gap - GRAPH_NODE_GAP_NS)) over gaps not already inside a graph.
    ``region`` is the NVTX region of the sequence's first op (when ops carry one).
    """
    ops = gaps
    boundary = (
        ops["cause"].isin(["startup", "synchronization", "unattributed"])
        | (ops["gap_ns"] > SEQUENCE_BREAK_NS)
        | (ops["device"] != ops["device"].shift(1))
    )
    seq = boundary.cumsum()
    inner_gap = ops["gap_ns"].where(~boundary, 0)
    overhead = inner_gap.where(ops["cause"].isin(OVERHEAD_CAUSES), 0)
    eager = ~ops["cause"].eq("graph_internal")
    saving = (inner_gap - GRAPH_NODE_GAP_NS).clip(lower=0).where(eager & (inner_gap > 0), 0)
    # one host launch per (process, correlation id); ops without one count alone
    launch_key = _key(ops["pid"], ops["correlation"])
    launch_key = np.where(launch_key < 0, -1 - np.arange(len(ops), dtype=np.int64), launch_key)
    frame = pd.DataFrame(
        {
            "seq": seq,
            "device": ops["device"],
            "start": ops["start"],
            "end": ops["end"],
            "dur": ops["end"] - ops["start"],
            "inner_gap": inner_gap.where(~boundary),
            "overhead": overhead,
            "saving": saving,
            "launch": launch_key,
            "name": ops["name"],
            "graph": ops["graph"],
            "region": ops.get("region"),
        }
    )
    g = frame.groupby("seq")
    out = g.agg(
        device=("device", "first"),
        start_ns=("start", "min"),
        end_ns=("end", "max"),
        ops=("start", "size"),
        launches=("launch", "nunique"),
        median_op_ns=("dur", "median"),
        median_gap_ns=("inner_gap", "median"),
        overhead_ns=("overhead", "sum"),
        graph_saving_ns=("saving", "sum"),
        graph_ops=("graph", "sum"),
        region=("region", "first"),
    )
    counts = frame.groupby(["seq", "name"]).size().reset_index(name="n")
    top = counts.sort_values("n", ascending=False).drop_duplicates("seq").set_index("seq")
    out["top_kernel"] = top["name"]
    out["span_ns"] = out["end_ns"] - out["start_ns"]
    out = out[out["ops"] >= min_ops]
    return out.sort_values("overhead_ns", ascending=False).reset_index(drop=True)
