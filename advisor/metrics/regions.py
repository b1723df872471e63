"""NVTX ranges projected onto the GPU work they launched.

A host range is top-level when no earlier range of the same *process* contains it (whatever
its thread): PyTorch's autograd engine runs the backward pass on its own thread, inside the
main thread's training step, and those ranges belong to the step. A GPU op belongs to the
top-level range open on its launching thread when its launch call started (joined by
process + correlation id), else to the one open then in its process (work launched by
autograd or data-loader threads while a step is open). A region's GPU window on a device
runs from the first start to the last end of its ops there; its metrics are measured from
the start of the idle gap before its first op (``lead_ns``: the gap that op held: the host
was late for it, or it waited on a dependency), so the idle between two ranges belongs to
the range whose work ended it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.data import regex
from advisor.metrics.ahead import ahead
from advisor.metrics.intervals import distinct_in_runs, reach_before, run_heads
from advisor.metrics.keys import BLOCK_ROWS, pack_one, row_dtype

# the name of the regions-table row holding, per device, its time outside every top-level
# range (a trace with ranges only; analysis.outside_ranges)
OUTSIDE_RANGES = "(outside ranges)"

# identity and extent columns of a region row (metrics are added by analysis.window_metrics)
WINDOW_KEYS = ["name", "device", "start_ns", "end_ns", "lead_ns", "host_start_ns",
               "host_end_ns", "ops", "kernels", "launches"]  # fmt: skip


def measured_start(windows: pd.DataFrame) -> np.ndarray:
    """Where a window's metrics start (ns): its start less its ``lead_ns`` (the idle gap its
    first op held), or its start when it has none."""
    start = windows["start_ns"].to_numpy(np.int64)
    if "lead_ns" not in windows:
        return start
    return start - windows["lead_ns"].fillna(0).to_numpy(np.int64)


def range_name(text: pd.Series) -> pd.Series:
    """Range names for grouping: PyTorch's ``seq = N``, ``op_id = N``, ``sizes = [...]``
    decorations removed (``aten::mm, seq = 3, op_id = 7, sizes = [...]`` -> ``aten::mm``)
    and a trailing step number removed (``train_step_3`` -> ``train_step``,
    ``ProfilerStep#7`` -> ``ProfilerStep``), so the instances of a repeated range (training
    steps, layers) are one range with many instances. A name that is only a number stays."""
    name = text.str.replace(regex("torch_decoration"), "", regex=True).str.strip()
    family = name.str.replace(regex("step_number"), "", regex=True)
    return family.where(family != "", name)


def top_level_ranges(nvtx: pd.DataFrame) -> pd.DataFrame:
    """The NVTX ranges not nested in another range of the same process, with ``range_id``,
    sorted by (tid, start); ``text`` is the grouping name (``range_name``), ``raw_text`` the
    text as recorded."""
    if nvtx.empty:
        return nvtx.assign(range_id=pd.Series(dtype="int64"), raw_text=pd.Series(dtype=str))
    r = nvtx.sort_values(["pid", "start", "end"], ascending=[True, True, False], kind="stable")
    prev_reach = reach_before(r["end"], r["pid"])
    top = r[~(prev_reach >= r["end"])]
    top = top.sort_values(["tid", "start"], kind="stable").copy()
    top["range_id"] = np.arange(len(top), dtype=np.int64)
    top["raw_text"] = top["text"]
    top["text"] = range_name(top["text"])
    return top.reset_index(drop=True)


def open_range_at(tids, times, ranges: pd.DataFrame, threads: int = 1) -> np.ndarray:
    """Per query (thread id, host time ns): the row position in ``ranges`` (tid, start, end;
    sorted by start within each thread) of the last range of that thread to start at or
    before the time, if it is still open then (time < end); else -1. For nested ranges
    this is the innermost one open. Float times (NaN where a query has none: never inside)
    are compared with the ranges' times as float64, as numpy's mixed comparison would; the
    ranges' times are converted once, and where one thread made every query its queries
    are not gathered (10M launches on one thread: 2.1 -> 1.2 s for the two searches). The
    queries are searched QUERY_BLOCK at a time (temporaries of a block, not of every query:
    0.3 GB at 10M), the blocks on up to ``threads`` threads (metrics/ahead.py; the result
    depends on neither). ``tids`` may be a categorical (NaN: no thread), its codes compared
    with each range thread's code."""
    tids = tids if isinstance(tids, pd.Categorical) else np.asarray(tids)
    times = np.asarray(times)
    out = np.full(len(times), -1, dtype=row_dtype(len(ranges)))
    starts = ranges["start"].to_numpy()
    ends = ranges["end"].to_numpy()
    if times.dtype.kind == "f":
        starts, ends = starts.astype(np.float64), ends.astype(np.float64)
    for tid, positions in ranges.groupby("tid").indices.items():
        mine = _of_thread(tids, tid)
        rows = None if mine.all() else np.flatnonzero(mine)
        del mine
        if rows is not None and rows.size == 0:
            continue
        own_starts, own_ends = starts[positions], ends[positions]

        def search(b: int, rows=rows, own_starts=own_starts, own_ends=own_ends, positions=positions
                   ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
            """(query rows, their ranges' rows) of the thread's queries [b, b + QUERY_BLOCK)
            inside a range."""
            part = slice(b, b + QUERY_BLOCK)
            t = times[part] if rows is None else times[rows[part]]
            k = np.searchsorted(own_starts, t, side="right") - 1
            inside = t < own_ends[np.maximum(k, 0)]
            inside &= k >= 0
            hit = np.flatnonzero(inside)
            return (hit + b if rows is None else rows[part][hit]), positions[k[hit]]

        blocks = range(0, len(times) if rows is None else len(rows), QUERY_BLOCK)
        for at, found in ahead(search, blocks, threads):
            out[at] = found
    return out


QUERY_BLOCK = 1 << 20  # queries searched at a time by open_range_at


def _of_thread(tids: np.ndarray | pd.Categorical, tid) -> np.ndarray:
    """Whether each of ``tids`` (values, or a categorical of them) is ``tid`` (bool)."""
    if not isinstance(tids, pd.Categorical):
        return tids == tid
    code = tids.categories.get_indexer([tid])[0]
    return tids.codes == code if code >= 0 else np.zeros(len(tids), dtype=bool)


def _ordered_run_heads(
    range_id: np.ndarray,
    device: np.ndarray,
    corr: np.ndarray,
    rows: np.ndarray | None,
    block: int = BLOCK_ROWS,
) -> np.ndarray | None:
    """Where the ``rows`` (positions into the columns; None: every row) already come as
    ``np.lexsort((corr[rows], pack_one(range_id[rows], device[rows])))`` puts them (by
    range, device, then correlation id, NaN last; ties keep their order: the sort is
    stable): the positions in ``rows`` at which a run of one (range, device) begins, else
    None. ``block`` rows are gathered at a time (no op-long copy of a column)."""
    n = len(range_id) if rows is None else len(rows)
    heads = [np.zeros(min(n, 1), dtype=np.int64)]
    for b in range(0, n, block):
        lo, hi = max(b - 1, 0), min(b + block, n)  # (from the row before: the pair across)
        at = slice(lo, hi) if rows is None else rows[lo:hi]
        r, d, c = range_id[at], device[at], corr[at]
        new = (r[1:] != r[:-1]) | (d[1:] != d[:-1])
        up = (r[1:] > r[:-1]) | ((r[1:] == r[:-1]) & (d[1:] > d[:-1]))
        within = (c[:-1] <= c[1:]) | np.isnan(c[1:])  # (NaN last)
        if not (up | (~new & within)).all():
            return None
        heads.append(lo + 1 + np.flatnonzero(new))
    return np.concatenate(heads)


def assign_ops(ops: pd.DataFrame, ranges: pd.DataFrame, threads: int = 1) -> pd.Series:
    """Per op: the range_id of the top-level range open on its launch thread at launch
    (api_start, api_tid columns of the attributed ops), else of the one open then in its
    process (another thread's: the step that autograd or a loader thread worked for), else
    -1 (int32 below 2**31 ranges); searched on up to ``threads`` threads (open_range_at)."""
    if ranges.empty or "api_tid" not in ops:
        return pd.Series(np.full(len(ops), -1, dtype=np.int32), index=ops.index)
    ids = ranges["range_id"].to_numpy()
    out = np.full(len(ops), -1, dtype=row_dtype(int(ids.max()) + 1))  # (int32: range ids)
    start = ops["api_start"].to_numpy()
    pos = open_range_at(ops["api_tid"].array, start, ranges, threads)
    rest = np.flatnonzero((pos < 0) & ~np.isnan(start))
    if rest.size:
        by_pid = ranges.sort_values(["pid", "start"], kind="stable")
        at = open_range_at(
            ops["pid"].to_numpy()[rest],
            start[rest],
            by_pid.rename(columns={"pid": "_key"}).assign(tid=by_pid["pid"].to_numpy()),
            threads,
        )
        hit = at >= 0
        pos[rest[hit]] = by_pid.index.to_numpy()[at[hit]]
    found = pos >= 0
    out[found] = ids[pos[found]]
    return pd.Series(out, index=ops.index)


def region_windows(ops: pd.DataFrame, ranges: pd.DataFrame) -> pd.DataFrame:
    """One row per (range, device) with GPU work: name, start_ns, end_ns (GPU window: its
    first op's start to its last op's end), lead_ns (the idle gap before its first op, which
    that op held: measured with the range, metrics/attribution.py), host_start_ns,
    host_end_ns, ops, kernels (ops that are kernels), launches (host launch calls), pid."""
    range_id = ops["range_id"].to_numpy()
    inside = range_id >= 0
    count, n = int(np.count_nonzero(inside)), len(range_id)
    if count == 0:
        return pd.DataFrame(columns=["range_id", *WINDOW_KEYS, "pid"])
    # (every op in a range: its columns read as they are, not gathered through the rows)
    rows = None if count == n else np.flatnonzero(inside).astype(row_dtype(n), copy=False)
    del inside
    device = ops["device"].to_numpy()
    corr = ops["correlation"].to_numpy(np.float64)
    # ops of one (range, device) made contiguous, by correlation id within it (the rows
    # put in that order once, and each column gathered once through them), unless they
    # come so (one thread's ranges in time order: they do)
    first = _ordered_run_heads(range_id, device, corr, rows)
    if first is None:
        rows = np.arange(n, dtype=row_dtype(n)) if rows is None else rows
        key = pack_one(range_id[rows], device[rows])
        order = np.lexsort((corr[rows], key))
        rows, key = rows[order], key[order]
        del order
        first = run_heads(key)
        del key

    def of_rows(values: np.ndarray) -> np.ndarray:
        """A column's values at the rows, in their order (the column itself: every row)."""
        return values if rows is None else values[rows]

    heads = first if rows is None else rows[first]
    w = pd.DataFrame(
        {
            "range_id": range_id[heads].astype(np.int64),
            "device": device[heads].astype(np.int64),
            "ops": np.diff(np.append(first, count)),
        }
    )
    # (each column gathered, reduced and dropped in turn: a few op-long arrays at a time)
    start = of_rows(ops["start"].to_numpy())
    w["start_ns"] = np.minimum.reduceat(start, first)
    if "gap_ns" in ops:  # the idle gap before its first op (held by that op: the range's)
        start = np.subtract(start, of_rows(ops["gap_ns"].to_numpy()),
                            out=start if rows is not None else None)  # fmt: skip
    w["lead_ns"] = w["start_ns"] - np.minimum.reduceat(start, first)
    del start
    w["end_ns"] = np.maximum.reduceat(of_rows(ops["end"].to_numpy()), first)
    w["kernels"] = np.add.reduceat(of_rows(ops["kind"].eq("kernel").to_numpy()), first,
                                   dtype=np.int64)  # fmt: skip
    # a CUDA-graph replay is one launch: distinct correlation ids (NaN: one each)
    w["launches"] = distinct_in_runs(of_rows(corr), first)
    w = w[["range_id", "device", "start_ns", "lead_ns", "end_ns", "ops", "kernels",
           "launches"]]  # fmt: skip
    w = w.merge(
        ranges[["range_id", "text", "start", "end", "pid"]].rename(
            columns={"text": "name", "start": "host_start_ns", "end": "host_end_ns"}
        ),
        on="range_id",
    )
    return w.sort_values(["start_ns", "device"], ignore_index=True)
