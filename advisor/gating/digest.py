"""The *metric set* of one analysed trace: what the gate compares, JSON-serializable (it is
what ``advisor baseline save`` stores).

Steady state only: start-up idle and cold range instances (metrics/steady.py) are left out
of every gated number and reported under ``startup``. Per top-level range name: one sample
per steady instance (per device) of each metric, measured over the instance's *period*;
per kernel (name, grid, block; keyed by a display text, the entry holding the name): the GPU
time of each steady launch; ``overall``: steady-
state totals (the devices' windows without the cold periods and start-up idle).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.analysis import Analysis
from advisor.gating.config import OVERALL, RANGE
from advisor.instances import range_instances
from advisor.metrics.comm import overlap_ratio
from advisor.metrics.steady import subtract_windows, window_at
from advisor.rules.finding import Finding, finding_dict

VERSION = 3  # 3: each kernel entry names its kernel (no name parsed from the key)
# what the gate keeps of a finding (new findings fail; explains links a row to it)
FINDING_KEYS = ("rule", "title", "strategy", "severity", "kernel", "region", "device",
                "est_savings_ns", "explains")  # fmt: skip
MAX_SAMPLES = 256  # per range or kernel: evenly spaced over time when there are more


def _spaced(values: np.ndarray) -> list:
    """At most MAX_SAMPLES values, evenly spaced over the array (in time order)."""
    if len(values) > MAX_SAMPLES:
        values = values[np.linspace(0, len(values) - 1, MAX_SAMPLES).round().astype(int)]
    return [round(float(v), 3) for v in values]


def _steady_overall(a: Analysis, holes: pd.DataFrame) -> dict:
    """OVERALL metrics over the devices' windows less the cold periods and start-up idle:
    span_ns is the longest device's steady time, the rest are summed over devices."""
    if a.devices.empty:
        return {m: 0 for m in OVERALL} | {"overlap_ratio": None}
    pieces = subtract_windows(a.devices[["device", "start_ns", "end_ns"]], holes)
    m = a.measure(pieces) if len(pieces) else pieces.assign(window_ns=0, startup_idle_ns=0)
    per_device = (m["window_ns"] - m["startup_idle_ns"]).groupby(m["device"]).sum()
    out = {"span_ns": float(per_device.max()) if len(per_device) else 0.0}
    for col in ("gpu_busy_ns", "launch_overhead_ns", "sync_idle_ns", "exposed_comm_ns"):
        out[col] = float(m[col].sum()) if len(m) else 0.0
    ops = a.ops
    steady_ops = window_at(holes, ops["device"].to_numpy(), ops["start"].to_numpy()) < 0
    for col in ("tail_idle_ns", "underfill_idle_ns"):
        out[col] = float(ops[col].to_numpy()[steady_ops].sum())
    overlap = float(m["overlap_ns"].sum()) if len(m) else 0.0
    comm = float(m["comm_ns"].sum()) if len(m) else 0.0
    out["overlap_ratio"] = overlap_ratio(overlap, comm)
    return out


def _kernels(a: Analysis, holes: pd.DataFrame) -> dict:
    """Per kernel (name, grid, block): launches, median and samples of the steady
    launches' GPU time (ns)."""
    k = a.launches
    if k.empty:
        return {}
    steady = window_at(holes, k["device"].to_numpy(), k["start"].to_numpy()) < 0
    k = k[steady].sort_values("start", kind="stable")
    key = (k["name"].astype(str) + " grid=" + k["grid_x"].astype(str) + "x"
           + k["grid_y"].astype(str) + "x" + k["grid_z"].astype(str) + " block="
           + (k["block_x"] * k["block_y"] * k["block_z"]).astype(str))  # fmt: skip
    out = {}
    for key_text, g in k[["name", "duration"]].groupby(key.to_numpy(), sort=True):
        values = g["duration"].to_numpy(np.float64)
        out[str(key_text)] = {"name": str(g["name"].iat[0]), "launches": len(values),
                              "median_ns": float(np.median(values)),
                              "samples": _spaced(values)}  # fmt: skip
    return out


def metric_set(a: Analysis, findings: list[Finding]) -> dict:
    """The digest of one analysed trace that the gate compares (JSON-serializable)."""
    inst = range_instances(a)
    cold = inst[inst["cold"]]
    holes = pd.DataFrame({"device": cold["device"].to_numpy(),
                          "start_ns": cold["start_ns"].to_numpy(),
                          "end_ns": cold["period_end_ns"].to_numpy()})  # fmt: skip
    regions: dict[str, dict] = {}
    for name, g in inst.groupby("name", sort=True):
        use = g[~g["cold"]] if (~g["cold"]).any() else g
        samples = {}
        for metric in RANGE:
            values = use[metric].to_numpy(np.float64)
            values = values[~np.isnan(values)]
            if len(values):
                samples[metric] = _spaced(values)
        regions[str(name)] = {"instances": len(g), "cold": int(g["cold"].sum()),
                              "samples": samples}  # fmt: skip
    gpus = sorted({spec.name for d, spec in a.trace.gpus.items() if d in a.trace.devices})
    return {
        "version": VERSION,
        "trace": a.trace.path,
        "gpus": gpus,
        "overall": _steady_overall(a, holes),
        "regions": regions,
        "kernels": _kernels(a, holes),
        "startup": {
            "startup_idle_ns": float(a.devices["startup_idle_ns"].sum()) if len(a.devices) else 0.0,
            "cold_instances": [
                {
                    "range": row.name,
                    "device": int(row.device),
                    "period_ns": int(row.period_end_ns - row.start_ns),
                    "reason": row.reason,
                }
                for row in cold.itertuples(index=False)
            ],
        },  # fmt: skip
        "findings": [{k: d[k] for k in FINDING_KEYS} for d in map(finding_dict, findings)],
        "warnings": list(a.warnings),  # what the trace lacks (data quality)
    }
