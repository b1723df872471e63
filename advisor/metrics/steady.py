"""Steady state of a trace: range instances tiled into periods, cold instances, the
device windows left once start-up is taken out.

A repeated top-level range (training steps, ``ProfilerStep#N``, per-layer ranges) is a
series of *instances*. An instance's **period** on a device runs from its first GPU op to
the first GPU op of the next top-level range instance on that device (any name), the last
one to its own last op: the periods tile the device's ranged time without overlap, and the
idle gap after an instance (the host still busy with it: a ``.item()``, the next launches)
belongs to it. A **cold** instance of a *repeated* range (a name with 2+ instances on a
device) holds start-up work (module loads, allocation, compilation): more start-up idle
than ``cold_instances.startup_share`` of its GPU window, or, for the first instance of a
name repeated at least ``min_instances`` times, a GPU window over ``first_factor`` times
the median of the others. A range run once is never cold (it has no steady instance to
stand in for it): only its start-up idle is left out.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd

from advisor.data import load_yaml


@cache
def cold_rule() -> dict:
    """The cold-instance thresholds (data/thresholds.yaml ``cold_instances``)."""
    return dict(load_yaml("thresholds.yaml")["cold_instances"])


def instance_periods(regions: pd.DataFrame) -> np.ndarray:
    """Per region row (one range instance on one device): the end of its period (ns): the
    start of the next instance on its device (any name), or its own end when it is the last
    there or the next one starts inside it (overlapping instances keep their own start)."""
    if regions.empty:
        return np.zeros(0, dtype=np.int64)
    start = regions["start_ns"].to_numpy(np.int64)
    end = regions["end_ns"].to_numpy(np.int64)
    device = regions["device"].to_numpy()
    order = np.lexsort((start, device))
    nxt = np.full(len(order), -1, dtype=np.int64)
    same = device[order][1:] == device[order][:-1]
    nxt[:-1] = np.where(same, start[order][1:], -1)
    out = np.empty(len(order), dtype=np.int64)
    # the next instance's start, but never before its own start (a zero-length period)
    out[order] = np.where(nxt >= 0, np.maximum(nxt, start[order]), end[order])
    return out


def cold_instances(regions: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Per region row: whether the instance is cold, and why ('' when it is not)."""
    rule = cold_rule()
    n = len(regions)
    cold = np.zeros(n, dtype=bool)
    reasons = [""] * n
    if n == 0:
        return cold, reasons
    window = (regions["end_ns"] - regions["start_ns"]).to_numpy(np.float64)
    startup = regions["startup_idle_ns"].to_numpy(np.float64)
    names = regions["name"].astype(str).to_numpy()
    for _, rows in pd.Series(np.arange(n)).groupby([names, regions["device"].to_numpy()]):
        rows = rows.to_numpy()
        if len(rows) < 2:
            continue
        for i in rows[startup[rows] > rule["startup_share"] * window[rows]]:
            cold[i] = True
            reasons[i] = f"start-up idle {startup[i] / window[i]:.0%} of its GPU window"
        if len(rows) < rule["min_instances"]:
            continue
        rows = rows[np.argsort(regions["start_ns"].to_numpy()[rows], kind="stable")]
        first, others = rows[0], rows[1:]
        typical = float(np.median(window[others]))
        if not cold[first] and typical > 0 and window[first] > rule["first_factor"] * typical:
            cold[first] = True
            reasons[first] = f"first instance, {window[first] / typical:.1f}x the median window"
    return cold, reasons


def subtract_windows(outer: pd.DataFrame, holes: pd.DataFrame) -> pd.DataFrame:
    """The parts of each ``outer`` window (device, start_ns, end_ns) not covered by the
    ``holes`` (device, start_ns, end_ns; disjoint per device): device, start_ns, end_ns."""
    pieces = []
    for row in outer.itertuples(index=False):
        h = holes[holes["device"] == row.device].sort_values("start_ns")
        lo = int(row.start_ns)
        for hs, he in zip(h["start_ns"].to_numpy(), h["end_ns"].to_numpy(), strict=True):
            hs, he = max(int(hs), int(row.start_ns)), min(int(he), int(row.end_ns))
            if he <= hs:
                continue
            if hs > lo:
                pieces.append((row.device, lo, hs))
            lo = max(lo, he)
        if lo < row.end_ns:
            pieces.append((row.device, lo, int(row.end_ns)))
    return pd.DataFrame(pieces, columns=["device", "start_ns", "end_ns"]).astype(
        {"start_ns": np.int64, "end_ns": np.int64}
    )


def window_at(windows: pd.DataFrame, device, times) -> np.ndarray:
    """Per (device, time ns): the row position in ``windows`` (device, start_ns, end_ns;
    disjoint per device) whose [start, end) holds the time, else -1."""
    device = np.asarray(device)
    times = np.asarray(times, dtype=np.int64)
    out = np.full(len(times), -1, dtype=np.int64)
    for dev, rows in windows.groupby("device").indices.items():
        rows = rows[np.argsort(windows["start_ns"].to_numpy()[rows], kind="stable")]
        starts = windows["start_ns"].to_numpy(np.int64)[rows]
        ends = windows["end_ns"].to_numpy(np.int64)[rows]
        q = np.flatnonzero(device == dev)
        k = np.searchsorted(starts, times[q], side="right") - 1
        inside = (k >= 0) & (times[q] < ends[np.maximum(k, 0)])
        out[q[inside]] = rows[k[inside]]
    return out
