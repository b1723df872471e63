"""Top-level range instances measured over their periods (metrics/steady.py): the table
the gate's steady state and the per-step rules read, in ns and counts.

``range_instances(a)`` has one row per (range instance, device): name, device, start_ns,
period_end_ns, cold, reason, span_ns (the period less its start-up idle), startup_idle_ns,
launches, tail_idle_ns and underfill_idle_ns (of the instance's own ops), gpu_busy_ns,
launch_overhead_ns, sync_idle_ns, exposed_comm_ns (clipped to the period), overlap_ratio,
and sync_gaps: the synchronization gaps that *open* inside the period (the GPU stall after
a ``.item()`` opens in the instance that read the value and ends in the next one).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.analysis import TraceAnalysis
from advisor.metrics.comm import overlap_ratio
from advisor.metrics.steady import cold_instances, instance_periods, window_at

INSTANCE_COLUMNS = ["name", "device", "start_ns", "period_end_ns", "cold", "reason", "span_ns",
                    "startup_idle_ns", "launches", "tail_idle_ns", "underfill_idle_ns",
                    "gpu_busy_ns", "launch_overhead_ns", "sync_idle_ns", "exposed_comm_ns",
                    "overlap_ratio", "sync_gaps"]  # fmt: skip
_DTYPES = {"name": "object", "reason": "object", "cold": "bool", "device": "int64"}


def range_instances(a: TraceAnalysis) -> pd.DataFrame:
    """Per region row of ``a`` (same order): the INSTANCE_COLUMNS (module doc)."""
    r = a.regions.reset_index(drop=True)
    if r.empty:
        # typed, so that boolean masks on 'cold' select rows (not columns) here too
        cols = {c: pd.Series(dtype=_DTYPES.get(c, "float64")) for c in INSTANCE_COLUMNS}
        return pd.DataFrame(cols)
    periods = pd.DataFrame({"device": r["device"].to_numpy(), "start_ns": r["start_ns"].to_numpy(),
                            "end_ns": instance_periods(r)})  # fmt: skip
    m = a.measure(periods)
    # (start-up inside the instance's own period: the gap before its first op, which the
    # regions measure with it, is the transition into it)
    cold, reasons = cold_instances(r.assign(startup_idle_ns=m["startup_idle_ns"].to_numpy()))
    out = pd.DataFrame({
        "name": r["name"].astype(str).to_numpy(), "device": r["device"].to_numpy(),
        "start_ns": periods["start_ns"].to_numpy(), "period_end_ns": periods["end_ns"].to_numpy(),
        "cold": cold, "reason": reasons,
        "span_ns": (m["window_ns"] - m["startup_idle_ns"]).to_numpy(),
        "startup_idle_ns": m["startup_idle_ns"].to_numpy(),
        "launches": r["launches"].to_numpy(),
        "tail_idle_ns": r["tail_idle_ns"].to_numpy(),
        "underfill_idle_ns": r["underfill_idle_ns"].to_numpy(),
    })  # fmt: skip
    for col in ("gpu_busy_ns", "launch_overhead_ns", "sync_idle_ns", "exposed_comm_ns"):
        out[col] = m[col].to_numpy()
    out["overlap_ratio"] = overlap_ratio(m["overlap_ns"], m["comm_ns"]).to_numpy()
    ops = a.ops
    sync = np.flatnonzero(ops["sync_held"].to_numpy())  # (gaps a synchronize held in part)
    opens = ops["start"].to_numpy()[sync] - ops["gap_ns"].to_numpy()[sync]
    # (a zero-length period still owns the gaps that open at its start)
    w = periods.assign(end_ns=np.maximum(periods["end_ns"], periods["start_ns"] + 1))
    at = window_at(w, ops["device"].to_numpy()[sync], opens)
    out["sync_gaps"] = np.bincount(at[at >= 0], minlength=len(out))
    return out[INSTANCE_COLUMNS]
