"""The *metric set* of one analysed trace: what the gate compares (metricset.MetricSet; its
``to_dict`` is what ``advisor baseline save`` stores).

Steady state only: start-up idle and cold range instances (metrics/steady.py) are left out
of every gated number and reported under ``startup``. Per top-level range name: one sample
per steady instance (per device) of each metric, measured over the instance's *period*;
per kernel (a KernelKey: name, grid, threads per block): the GPU time of each steady launch;
``overall``: steady-state totals (the devices' windows without the cold periods and start-up
idle).
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

from advisor.analysis import TraceAnalysis
from advisor.gating.config import OVERALL, RANGE
from advisor.gating.metricset import (
    ColdInstance,
    GateFinding,
    KernelEntry,
    KernelKey,
    MetricSet,
    RangeEntry,
    Severity,
    Startup,
)
from advisor.instances import range_instances
from advisor.metrics.comm import overlap_ratio
from advisor.metrics.steady import subtract_windows, window_at
from advisor.metrics.waves import launch_durations, with_configuration
from advisor.rules.finding import Finding

MAX_SAMPLES = 256  # per range or kernel: evenly spaced over time when there are more


def _spaced(values: np.ndarray) -> list:
    """At most MAX_SAMPLES values, evenly spaced over the array (in time order)."""
    if len(values) > MAX_SAMPLES:
        values = values[np.linspace(0, len(values) - 1, MAX_SAMPLES).round().astype(int)]
    return [round(float(v), 3) for v in values]


def _steady_overall(a: TraceAnalysis, holes: pd.DataFrame) -> dict:
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
    # (the wave-quantization idle is per kernel launch)
    k = a.launch_table(["device", "start", "tail_idle_ns", "underfill_idle_ns"])
    steady = window_at(holes, k["device"].to_numpy(), k["start"].to_numpy()) < 0 if len(k) else None
    for col in ("tail_idle_ns", "underfill_idle_ns"):
        out[col] = 0.0 if steady is None else float(k[col].to_numpy()[steady].sum())
    overlap = float(m["overlap_ns"].sum()) if len(m) else 0.0
    comm = float(m["comm_ns"].sum()) if len(m) else 0.0
    out["overlap_ratio"] = overlap_ratio(overlap, comm)
    return out


def _dim(value) -> int | float:
    """A grid or block value as the trace table holds it (an int, or a float where the table's
    column is one), as plain Python."""
    return value.item() if isinstance(value, np.generic) else value


def _kernels(a: TraceAnalysis, holes: pd.DataFrame) -> list[KernelEntry]:
    """Per kernel (name, grid, threads per block): launches, median and samples of the
    steady launches' GPU time (ns), in the order of the kernels' texts. A launch whose name,
    grid or block the trace did not record (ROCm's Kineto traces) has no kernel to be
    compared with: it is left out here (its time still counts in its range and the trace)."""
    k = a.launch_table(["device", "start", "end"])
    if k.empty:
        return []
    steady = window_at(holes, k["device"].to_numpy(), k["start"].to_numpy()) < 0
    k = with_configuration(k[steady], a.configs).sort_values("start", kind="stable")
    by = [k["name"].astype(object), k["grid_x"], k["grid_y"], k["grid_z"],
          k["block_x"] * k["block_y"] * k["block_z"]]  # fmt: skip
    out = []
    # (groupby leaves out the launches with a missing part of their key)
    took = pd.Series(launch_durations(k), index=k.index)
    for (name, x, y, z, block), d in took.groupby(by, sort=False):
        values = d.to_numpy(np.float64)
        key = KernelKey(str(name), (_dim(x), _dim(y), _dim(z)), _dim(block))
        out.append(KernelEntry(key, len(values), float(np.median(values)), _spaced(values)))
    return sorted(out, key=lambda e: e.key.text)


def _cold(cold: pd.DataFrame) -> list[ColdInstance]:
    return [ColdInstance(row.name, int(row.device), int(row.period_end_ns - row.start_ns),
                         row.reason) for row in cold.itertuples(index=False)]  # fmt: skip


def _gate_finding(f: Finding) -> GateFinding:
    severity = cast(Severity, f.severity)
    return GateFinding(f.rule, f.title, f.strategy, severity, f.kernel, f.region, f.device,
                       f.est_savings_ns, list(f.explains))  # fmt: skip


def metric_set(a: TraceAnalysis, findings: list[Finding]) -> MetricSet:
    """The digest of one analysed trace that the gate compares (``to_dict``: as stored)."""
    inst = range_instances(a)
    cold = inst[inst["cold"]]
    holes = pd.DataFrame({"device": cold["device"].to_numpy(),
                          "start_ns": cold["start_ns"].to_numpy(),
                          "end_ns": cold["period_end_ns"].to_numpy()})  # fmt: skip
    regions: dict[str, RangeEntry] = {}
    for name, g in inst.groupby("name", sort=True):
        use = g[~g["cold"]] if (~g["cold"]).any() else g
        samples = {}
        for metric in RANGE:
            values = use[metric].to_numpy(np.float64)
            values = values[~np.isnan(values)]
            if len(values):
                samples[metric] = _spaced(values)
        regions[str(name)] = RangeEntry(len(g), int(g["cold"].sum()), samples)
    gpus = sorted({spec.name for d, spec in a.trace.gpus.items() if d in a.trace.devices})
    startup_idle = float(a.devices["startup_idle_ns"].sum()) if len(a.devices) else 0.0
    return MetricSet(
        trace=a.trace.path,
        gpus=gpus,
        overall=_steady_overall(a, holes),
        regions=regions,
        kernels=_kernels(a, holes),
        startup=Startup(startup_idle, _cold(cold)),
        findings=[_gate_finding(f) for f in findings],
        warnings=list(a.warnings),  # what the trace lacks (data quality)
    )
