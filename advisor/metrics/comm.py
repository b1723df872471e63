"""Communication vs compute per device: overlap, exposed comm, same-stream serialization,
and the skew of one collective across devices (ranks).

Comm ops are kernels whose names match classify.yaml ``comm_kernels`` plus peer-to-peer
copies; compute ops are all other kernels (copies and memsets are neither). Per device the
busy intervals of each class are merged, then:
  overlap        = |comm ∩ compute|          exposed comm = |comm| - overlap
  overlap ratio  = overlap / |comm|          (None when there is no comm)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.data import names_in
from advisor.metrics import intervals as iv
from advisor.metrics.grouping import rows_by_value
from advisor.metrics.keys import distinct, pack_one

OP_CLASSES = ("comm", "compute", "memory")


def classify_ops(ops: pd.DataFrame) -> pd.Series:
    """Per op (categorical): 'comm', 'compute' or 'memory' (copies, memsets and copy/fill
    kernels such as __amd_rocclr_*, unless peer-to-peer)."""
    blit, named_comm, peer_copy = names_in(
        ops["name"], "memory_kernels", "comm_kernels", "peer_copy_ops"
    )
    is_kernel = ops["kind"].isin(["kernel", "graph"]).to_numpy() & ~blit
    comm = (is_kernel & named_comm) | peer_copy
    codes = np.select([comm, is_kernel], [0, 1], default=2).astype(np.int8)
    return pd.Series(pd.Categorical.from_codes(codes, OP_CLASSES), index=ops.index)


def device_segments(ops: pd.DataFrame, mask) -> dict[int, iv.Segments]:
    """Merged busy segments per device for the ops selected by ``mask`` (numpy only: no
    copy of the ops table)."""
    mask = np.asarray(mask, dtype=bool)
    dev, start, end = ops["device"].to_numpy(), ops["start"].to_numpy(), ops["end"].to_numpy()
    if len(dev) and (dev[1:] >= dev[:-1]).all():  # (device_ops: by device, then start)
        heads = iv.run_heads(dev)
        bounds = np.append(heads, len(dev)).tolist()
        out = {}
        for d, lo, hi in zip(dev[heads].tolist(), bounds[:-1], bounds[1:], strict=True):
            if not mask[lo:hi].any():
                continue
            merged = iv.union_of_sorted(start[lo:hi], end[lo:hi], mask[lo:hi])
            if merged is None:
                break  # (a device's ops not by start: the whole way below)
            out[int(d)] = merged
        else:
            return out
    if not mask.all():
        dev, start, end = dev[mask], start[mask], end[mask]
    devices = np.unique(dev)
    if len(devices) == 1:  # one device: its columns as they are
        return {int(devices[0]): iv.union(start, end)}
    return {int(d): iv.union(start[dev == d], end[dev == d]) for d in devices}


def class_segments(
    ops: pd.DataFrame, op_class: pd.Series, busy: bool = True
) -> dict[str, dict[int, iv.Segments]]:
    """Merged segments per device: of all work ('busy', unless ``busy`` is False), of comm
    ops ('comm'), of the busy time that no compute op covers ('not_compute') and that
    neither a comm nor a compute op covers ('neither'). What window_comm measures follows
    from these and a window's busy time; the compute ops' own union, most of the work
    (10M kernels: 160 MB), is made for the differences and let go, not held."""
    comm, compute = op_class.eq("comm").to_numpy(), op_class.eq("compute").to_numpy()
    out = {"busy": device_segments(ops, np.ones(len(ops), dtype=bool))} if busy else {}
    out["comm"] = device_segments(ops, comm)
    out["not_compute"] = _uncovered(ops, ~compute, compute)
    # (without comm work, busy time outside compute is outside either class)
    either = comm | compute
    out["neither"] = _uncovered(ops, ~either, either) if comm.any() else out["not_compute"]
    return out


def _uncovered(ops: pd.DataFrame, some: np.ndarray, others: np.ndarray) -> dict[int, iv.Segments]:
    """Per device with ``some`` ops: the merged time of those ops that no ``others`` op on
    that device covers (``some``, ``others``: masks over ``ops``)."""
    covering = device_segments(ops, others)
    return {d: iv.difference(segments, covering[d]) if d in covering else segments
            for d, segments in device_segments(ops, some).items()}  # fmt: skip


def overlap_ratio(overlap_ns, comm_ns):
    """The share of communication time overlapped by compute: overlap_ns / comm_ns. Per row
    for Series and numpy arrays (NaN where there is no communication), or for one total (None
    then)."""
    if isinstance(comm_ns, pd.Series):
        return (overlap_ns / comm_ns).where(comm_ns > 0)
    if isinstance(comm_ns, np.ndarray):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(comm_ns > 0, overlap_ns / comm_ns, np.nan)
    return overlap_ns / comm_ns if comm_ns else None


def window_comm(segments: dict[str, dict[int, iv.Segments]], windows: pd.DataFrame) -> pd.DataFrame:
    """comm_ns, overlap_ns, exposed_comm_ns and not_compute_ns (the busy time no compute op
    covers: a window's compute time is its busy time less this) per window row.

    ``windows`` has device, start_ns, end_ns; ``segments`` comes from class_segments;
    intervals are clipped to each window. With C, K and E the time covered by comm, by
    compute and by either, and B the busy time: not_compute = B - K, neither = B - E, so
    overlap = C + K - E = C - not_compute + neither and exposed = C - overlap = not_compute
    - neither.
    """
    empty = (np.array([], np.int64), np.array([], np.int64))
    n = len(windows)
    c_ns, outside_k, overlap = (np.zeros(n, dtype=np.int64) for _ in range(3))
    lo_all, hi_all = windows["start_ns"].to_numpy(), windows["end_ns"].to_numpy()
    for device, rows in rows_by_value(windows["device"].to_numpy()).items():
        c = segments["comm"].get(int(device), empty)
        lo, hi = lo_all[rows], hi_all[rows]
        outside_k[rows] = iv.covered_in_windows(segments["not_compute"].get(int(device), empty),
                                                lo, hi)  # fmt: skip
        if c[0].size == 0:  # no comm on this device: no overlap to measure
            continue
        c_ns[rows] = iv.covered_in_windows(c, lo, hi)
        outside_either = iv.covered_in_windows(segments["neither"].get(int(device), empty), lo, hi)
        overlap[rows] = c_ns[rows] - outside_k[rows] + outside_either
    return pd.DataFrame({"comm_ns": c_ns, "overlap_ns": overlap, "exposed_comm_ns": c_ns - overlap,
                         "not_compute_ns": outside_k}, index=windows.index)  # fmt: skip


def same_stream_comm(ops: pd.DataFrame, op_class: pd.Series) -> pd.Series:
    """Per op: True for comm ops on a (device, stream) that also runs compute kernels.

    Comm and compute queued on one stream execute in order and can never overlap.
    """
    comm = op_class.eq("comm").to_numpy()
    out = np.zeros(len(comm), dtype=bool)
    if comm.any():  # (one key per op, looked up for the comm ops only)
        key = pack_one(ops["device"].to_numpy(), ops["stream"].to_numpy())
        compute_streams = distinct(key[op_class.eq("compute").to_numpy()])
        out[comm] = np.isin(key[comm], compute_streams)
    return pd.Series(out, index=op_class.index)


SKEW_COLUMNS = ["device", "start", "name", "instance", "skew_ns", "wait_ns", "last_device",
                "row"]  # fmt: skip


def collective_skew(ops: pd.DataFrame, op_class: pd.Series) -> pd.DataFrame:
    """Match the n-th launch of each comm kernel name across devices and measure skew.

    Returns one row per matched comm op, in (device, name, start) order: ``instance`` (an
    integer id of name#n), ``skew_ns`` (spread of start times across devices), ``wait_ns``
    (how long this device's op ran before the last device arrived: max start - own start,
    capped at the op's duration), ``last_device`` (the last to arrive; the lowest such
    device on ties) and ``row`` (the op's position in ``ops``). Only instances present on
    every device that runs that kernel count; with one device the table is empty. Integer
    keys throughout (names as sorted codes): millions of comm ops of a many-rank job match
    without a Python string per op.
    """
    sel = np.flatnonzero((op_class.eq("comm") & ops["kind"].eq("kernel")).to_numpy())
    device_of = ops["device"].to_numpy()
    if len(sel) == 0 or len(np.unique(device_of[sel])) < 2:
        return pd.DataFrame(columns=SKEW_COLUMNS)
    start_of, end_of = ops["start"].to_numpy(), ops["end"].to_numpy()
    # (each array made when needed and dropped once used: a job of many ranks matches
    # millions of comm ops on its client, where the temporaries were the merge's peak)
    code, names = sorted_codes(ops["name"], sel)
    device = device_of[sel]
    order = np.lexsort((start_of[sel], code, device))  # (device, name, start); stable on ties
    sel, code, device = sel[order], code[order], device[order]
    del order
    # n: the op's rank among its device's launches of that name
    head = np.r_[True, (device[1:] != device[:-1]) | (code[1:] != code[:-1])]
    first = np.flatnonzero(head)
    del head
    n = np.arange(len(code)) - np.repeat(first, np.diff(np.r_[first, len(code)]))
    instance = code * (int(n.max()) + 1) + n
    del n
    # an instance counts when every device that runs its name has it
    per_name = np.bincount(code[first], minlength=len(names))  # devices per name
    del first
    inst_ids, inst = np.unique(instance, return_inverse=True)
    del instance
    keep = np.bincount(inst)[inst] == per_name[code]
    if not keep.any():
        return pd.DataFrame(columns=SKEW_COLUMNS)
    sel, code, device, inst = sel[keep], code[keep], device[keep], inst[keep]
    del keep
    start = start_of[sel].astype(np.int64, copy=False)
    last_start = np.full(len(inst_ids), np.iinfo(np.int64).min)
    np.maximum.at(last_start, inst, start)
    first_start = np.full(len(inst_ids), np.iinfo(np.int64).max)
    np.minimum.at(first_start, inst, start)
    # the last device: the first row (in table order) that starts at the instance's max
    at_max = np.flatnonzero(start == last_start[inst])
    _, pick = np.unique(inst[at_max], return_index=True)
    last_device = np.zeros(len(inst_ids), dtype=np.int64)
    last_device[inst[at_max[pick]]] = device[at_max[pick]]
    del at_max, pick
    last = last_start[inst]
    duration = end_of[sel].astype(np.int64, copy=False) - start
    columns = {
        "device": device.astype(np.int64, copy=False), "start": start,
        "name": pd.Categorical.from_codes(code, pd.Index(names, dtype=object)),
        "instance": inst_ids[inst], "skew_ns": last - first_start[inst],
        "wait_ns": np.minimum(last - start, duration),
        "last_device": last_device[inst], "row": sel,
    }  # fmt: skip
    del last, duration
    return pd.DataFrame(columns, copy=False)  # (no copy of the columns into one block)


def startup_waits(
    start: np.ndarray,
    wait: np.ndarray,
    device: np.ndarray,
    last_device: np.ndarray,
    steady_start: pd.Series,
) -> np.ndarray:
    """Per comm op: the part of its wait for the last rank (ns) spent while it or that rank
    was still starting up: [start, start + wait) before the later of the two devices'
    steady starts (``steady_start``: ns per device id; a device absent has none). The
    first collectives wait for communicator set-up and first kernel loads on the other
    rank: start-up, as the idle before the steady state is."""
    own = steady_start.reindex(device).to_numpy(np.float64)
    last = steady_start.reindex(last_device).to_numpy(np.float64)
    until = np.fmax(own, last)  # (NaN where neither is known)
    part = np.clip(until - start.astype(np.float64), 0.0, wait.astype(np.float64))
    return np.nan_to_num(part, nan=0.0)


def sorted_codes(names: pd.Series, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code per row of ``rows``, the distinct names as an object array): codes in the
    names' sorted order, from a categorical's codes without touching a string per row."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = np.asarray(names.cat.categories, dtype=object)
        raw = names.cat.codes.to_numpy()[rows]
        used = np.unique(raw)
        ordered = used[np.argsort(cats[used], kind="stable")]
        rank = np.empty(len(cats), dtype=np.int64)
        rank[ordered] = np.arange(len(ordered))
        return rank[raw], cats[ordered]
    code, uniques = pd.factorize(names.to_numpy(object)[rows], sort=True)
    return code.astype(np.int64), np.asarray(uniques, dtype=object)
