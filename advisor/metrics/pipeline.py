"""Pipeline parallelism: stages recognised from point-to-point traffic, and per stage and step
the bubble (time without compute) against the schedule's ideal. Times in ns.

A pipeline is a chain of devices that pass activations forward and gradients back through
point-to-point kernels (NCCL/RCCL ``SendRecv``, ``Send``, ``Recv``: ``p2p_kernels`` in
data/classify.yaml). Within a step, only the first stage can compute before any transfer
reaches it; every later stage's first compute starts after a point-to-point kernel of its own
has ended (it waited for the first activation). That is what tells a pipeline from ranks
that exchange data symmetrically (both compute from the start of the step). Stages are
ordered by when their compute starts in the step.

Per step (the instances of a repeated top-level range matched by order across devices, else
the whole trace as one step) and stage device:

- ``step_ns``: the step's window, from the first to the last GPU op of any stage in it;
- ``compute_ns``: the union of the stage's compute ops (not comm, not copies) in the window;
- ``bubble_ns = step_ns - compute_ns``: the time the stage waits (idle, or spinning in a
  receive), fill and drain included;
- ``blocks``: runs of compute separated by point-to-point ops (one forward and one backward
  block per micro-batch on the first stage: ``m = blocks / 2``, rounded);
- the schedule's ideal bubble share for GPipe and 1F1B: ``(p - 1) / (m + p - 1)`` with p
  stages and m micro-batches (interleaved 1F1B with v virtual stages: ``(p - 1) / (v m + p - 1)``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.data import names_in
from advisor.metrics.intervals import length, union

STAGE_COLUMNS = ["step", "device", "step_start_ns", "step_ns", "compute_ns", "bubble_ns",
                 "blocks", "first_compute_ns", "first_p2p_end_ns", "waits_first"]  # fmt: skip


def point_to_point(ops: pd.DataFrame) -> np.ndarray:
    """Per op: a point-to-point transfer kernel (a comm kernel named in p2p_kernels; the
    names are matched on the comm kernels only)."""
    comm = np.flatnonzero(
        ops["op_class"].eq("comm").to_numpy() & ops["kind"].eq("kernel").to_numpy()
    )
    out = np.zeros(len(ops), dtype=bool)
    if len(comm):
        out[comm] = names_in(ops["name"].iloc[comm], "p2p_kernels")[0]
    return out


def step_windows(regions: pd.DataFrame, first_ns: int, last_ns: int) -> tuple[str, pd.DataFrame]:
    """(step family name, one row per step: step, start_ns, end_ns): the k-th instances of
    the repeated top-level range with the most instances, joined across devices; without
    one, the whole selection ('' and one step: ``first_ns`` to ``last_ns``, its first op's
    start and last op's end)."""
    if len(regions):
        r = regions[["name", "device", "start_ns", "end_ns"]].copy()
        r["name"] = r["name"].astype(str)
        counts = r.groupby(["name", "device"]).size()
        repeated = counts[counts > 1]
        if len(repeated):
            family = repeated.groupby(level="name").min().idxmax()
            f = r[r["name"] == family].sort_values("start_ns", kind="stable")
            f = f.assign(step=f.groupby("device").cumcount())
            w = f.groupby("step").agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"))
            return str(family), w.reset_index()
    whole = pd.DataFrame({"step": [0], "start_ns": [first_ns], "end_ns": [last_ns]})
    return "", whole


def stage_steps(ops: pd.DataFrame, p2p: np.ndarray, windows: pd.DataFrame) -> pd.DataFrame:
    """Per step and device that ran point-to-point kernels in it: the STAGE_COLUMNS (module
    doc). ``ops``: device ops with device, start, end, op_class; ``p2p``: mask over ``ops``."""
    rows = []
    devices = np.unique(ops["device"].to_numpy()[p2p])
    for w in windows.itertuples(index=False):
        inside = (ops["start"].to_numpy() < w.end_ns) & (ops["end"].to_numpy() > w.start_ns)
        keep = inside & np.isin(ops["device"].to_numpy(), devices)
        step_ops, step_p2p = ops[keep], p2p[keep]
        if step_ops.empty:
            continue
        lo, hi = int(step_ops["start"].min()), int(step_ops["end"].max())
        for device, d in step_ops.groupby("device", sort=True):
            mine = step_p2p[(step_ops["device"] == device).to_numpy()]
            if not mine.any():
                continue
            is_compute = d["op_class"].eq("compute").to_numpy() & ~mine
            compute = d[is_compute]
            starts = np.clip(compute["start"].to_numpy(np.int64), lo, hi)
            ends = np.clip(compute["end"].to_numpy(np.int64), lo, hi)
            compute_ns = length(union(starts, ends)) if len(starts) else 0
            # blocks: runs of compute between point-to-point ops (copies and other ops
            # neither start nor end one)
            order = np.argsort(d["start"].to_numpy(), kind="stable")
            label = np.where(mine[order], 2, np.where(is_compute[order], 1, 0))
            label = label[label > 0]
            blocks = int(((label == 1) & np.r_[True, label[:-1] != 1]).sum())
            transfers = d[mine]
            first_transfer_end = int(transfers["end"].to_numpy()[np.argmin(transfers["start"])])
            first_compute = int(compute["start"].min()) if len(compute) else hi
            rows.append({
                "step": int(w.step), "device": int(device), "step_start_ns": lo,
                "step_ns": hi - lo, "compute_ns": int(compute_ns),
                "bubble_ns": hi - lo - int(compute_ns), "blocks": blocks,
                "first_compute_ns": first_compute, "first_p2p_end_ns": first_transfer_end,
                "waits_first": first_compute >= first_transfer_end,
            })  # fmt: skip
    return pd.DataFrame(rows, columns=STAGE_COLUMNS)


def pipeline_stages(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per stage device of a recognised pipeline (empty when the point-to-point
    traffic is not a pipeline): device, stage (0 = first), stages, microbatches, steps, and
    per step medians of step_ns, compute_ns, bubble_ns, bubble_fraction, with
    ideal_fraction, and over the steps: excess_bubble_ns = sum of max(0, bubble - ideal x
    step), imbalance_ns = sum of max(0, compute - the stages' median compute) (ns), and the
    per-step bubble and compute (bubble_per_step_ns, compute_per_step_ns: lists, ns)."""
    if steps.empty or steps["device"].nunique() < 2:
        return pd.DataFrame()
    # a pipeline: in most steps, every device but one waited for a transfer before computing
    per_step = steps.groupby("step")["waits_first"].agg(["sum", "size"])
    chained = (per_step["sum"] == per_step["size"] - 1) & (per_step["size"] >= 2)
    if chained.mean() < 0.5:
        return pd.DataFrame()
    s = steps[steps["step"].isin(per_step.index[chained])].copy()
    s["offset"] = s["first_compute_ns"] - s["step_start_ns"]
    order = s.groupby("device")["offset"].median().sort_values(kind="stable")
    stage_of = {int(d): i for i, d in enumerate(order.index)}
    p = len(stage_of)
    first = s[s["device"] == order.index[0]]
    m = max(1, int(round(float(first["blocks"].median()) / 2)))
    ideal = (p - 1) / (m + p - 1)
    s["median_compute"] = s.groupby("step")["compute_ns"].transform("median")
    s["excess"] = np.maximum(0.0, s["bubble_ns"] - ideal * s["step_ns"])
    s["imbalance"] = np.maximum(0.0, s["compute_ns"] - s["median_compute"])
    out = []
    for device, g in s.groupby("device", sort=False):
        worst = g.loc[g["bubble_ns"].idxmax()]
        out.append({
            "device": int(device), "stage": stage_of[int(device)], "stages": p,
            "microbatches": m, "steps": len(g),
            "step_ns": float(g["step_ns"].median()), "compute_ns": float(g["compute_ns"].median()),
            "bubble_ns": float(g["bubble_ns"].median()),
            "bubble_fraction": float((g["bubble_ns"] / g["step_ns"]).median()),
            "ideal_fraction": ideal,
            "ideal_2m_fraction": (p - 1) / (2 * m + p - 1),
            "excess_bubble_ns": float(g["excess"].sum()),
            "imbalance_ns": float(g["imbalance"].sum()),
            "severity_base_ns": float(g["step_ns"].sum()),
            "bubble_per_step_ns": [int(x) for x in g.sort_values("step")["bubble_ns"]],
            "compute_per_step_ns": [int(x) for x in g.sort_values("step")["compute_ns"]],
            "worst_start_ns": int(worst["step_start_ns"]),
        })  # fmt: skip
    t = pd.DataFrame(out).sort_values("stage", ignore_index=True)
    med = t["compute_ns"].median()
    t["compute_vs_median"] = t["compute_ns"] / med if med else np.nan
    t["bottleneck"] = t["compute_ns"].eq(t["compute_ns"].max()) & t["stage"].eq(
        t.loc[t["compute_ns"].idxmax(), "stage"]
    )
    return t
