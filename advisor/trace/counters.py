"""Hardware counters joined to a timeline (``advisor analyze TRACE --counters R``).

A counter profiler (Nsight Compute) replays the launches it profiles in a run of its own,
so its launches are matched to the timeline's, not timed against them: by the kernel's own
function name (profilers demangle and shorten names differently: Nsight Systems keeps a
short name, Kineto the full signature, ncu drops namespaces such as ``native::``), its grid
and block, and the launch order among launches equal in those (the n-th profiled launch of
a kernel at a grid is the n-th such launch of the timeline). Device ids are not compared
(tools number them differently). AMD's counter files give the grid and workgroup as totals
(``grid_total``): then total workgroups and threads per workgroup are compared.

``counter_shares`` turns what a counter tool gives as quantities (bytes from DRAM, matrix
busy cycles, wave cycles: counters.yaml ``physical``) into the percentages the rules read,
with the facts of the GPU each launch ran on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor.data import gpu_facts
from advisor.trace.model import GpuSpec, Trace

DIMS = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
_OPEN, _CLOSE = "<([", ">)]"


def kernel_base_name(name: str) -> str:
    """The kernel function's own identifier: template arguments, parameter list, return
    type and namespaces dropped. ``void at::native::vectorized_elementwise_kernel<4,
    ...>(int, T2, T3)`` -> ``vectorized_elementwise_kernel`` (as a name cut short inside
    its template arguments)."""
    depth, top = 0, []
    for ch in str(name):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(depth - 1, 0)
        elif depth == 0:
            top.append(ch)
    words = "".join(top).replace("::", " ").split()
    return words[-1] if words else str(name).strip()


@dataclass(frozen=True)
class Join:
    """What joined: profiled launches, those joined to a timeline launch, and the kernels
    (base names) of those that did not, with their counts."""

    profiled: int
    joined: int
    kernels: int  # distinct kernels (base names) joined
    unmatched: dict[str, int]
    other_config: int  # unmatched launches of a kernel the timeline runs (another grid/block
    # or more launches than the timeline holds)
    registers_differ: int  # joined launches whose registers per thread differ


def _keys(names: pd.Series, dims: pd.DataFrame) -> pd.DataFrame:
    """Per launch: base name, grid and block (missing as -1), and its ordinal among the
    launches equal in those, in the given row order."""
    codes, uniques = pd.factorize(names.astype(object), use_na_sentinel=False)
    base = np.array([kernel_base_name(u) for u in uniques], dtype=object)[codes]
    keys = pd.DataFrame({"base": base})
    for c in DIMS:
        keys[c] = pd.to_numeric(dims[c], errors="coerce").fillna(-1).to_numpy(np.int64)
    keys["ordinal"] = keys.groupby(["base", *DIMS], sort=False).cumcount().to_numpy()
    return keys


def _totals(dims: pd.DataFrame) -> pd.DataFrame:
    """Launch sizes as totals: all workgroups in grid_x, all threads in block_x, 1 else."""
    num = {c: pd.to_numeric(dims[c], errors="coerce").to_numpy(np.float64) for c in DIMS}
    ones = np.ones(len(dims))
    return pd.DataFrame({"grid_x": num["grid_x"] * num["grid_y"] * num["grid_z"],
                         "grid_y": ones, "grid_z": ones,
                         "block_x": num["block_x"] * num["block_y"] * num["block_z"],
                         "block_y": ones, "block_z": ones})  # fmt: skip


def match_launches(timeline: pd.DataFrame, counters: pd.DataFrame) -> np.ndarray:
    """Per counters row: the row position in ``timeline`` (trace.kernels) of the launch it
    belongs to, -1 for none (see the module doc)."""
    order = np.argsort(timeline["start"].to_numpy(), kind="stable")
    flat = "grid_total" in counters and bool(counters["grid_total"].astype(bool).any())
    sizes = timeline[DIMS].iloc[order].reset_index(drop=True)
    mine = _keys(timeline["name"].iloc[order].reset_index(drop=True),
                 _totals(sizes) if flat else sizes)  # fmt: skip
    mine["row"] = order
    theirs = _keys(counters["name"], _totals(counters) if flat else counters)
    on = ["base", *DIMS, "ordinal"]
    found = theirs.merge(mine, on=on, how="left", validate="one_to_one")
    return found["row"].fillna(-1).to_numpy(np.int64)


def join_counters(timeline: Trace, counters: Trace, label: str) -> Join:
    """Give ``timeline`` (in place) the counters and rule results of ``counters`` (a counter
    profiler's trace), each profiled launch joined to its timeline launch (``launch``, -1
    for none); the join is named in ``timeline.sources`` and what did not join is warned
    about. ``label``: how the counters file is named in those lines."""
    table = counters.counters.copy()
    rows = match_launches(timeline.kernels, table)
    table["launch"] = rows
    timeline.counters = table
    timeline.counter_rules = counters.counter_rules.copy()
    joined = rows >= 0
    bases = table["name"].map(kernel_base_name)
    unmatched = bases[~joined].value_counts(sort=False).to_dict()
    run = set(timeline.kernels["name"].map(kernel_base_name))
    other = int(sum(n for b, n in unmatched.items() if b in run))
    mine = pd.to_numeric(timeline.kernels["registers"], errors="coerce").to_numpy(np.float64)
    mine = mine[rows[joined]]
    theirs = pd.to_numeric(table["registers"], errors="coerce").to_numpy(np.float64)[joined]
    known = (mine >= 0) & (theirs >= 0)  # (-1: a trace without register counts)
    differ = int((known & (mine != theirs)).sum())
    join = Join(len(table), int(joined.sum()), int(bases[joined].nunique()), unmatched, other,
                differ)  # fmt: skip
    timeline.sources.append(
        f"{label} (counters: {join.joined} of {join.profiled} "
        f"profiled launches joined to the timeline, {join.kernels} kernel(s))"
    )
    timeline.warnings.extend(join_warnings(join, label))
    if join.joined:  # (what the file lacks, where its counters are used)
        timeline.warnings.extend(f"--counters {label}: {n}" for n in counters.counter_notes)
    timeline.warnings.extend(_gpu_warning(timeline, counters, label))
    timeline.warnings.extend(counter_shares(timeline))
    return join


# physical column -> (the percentage it gives, the GPU facts it needs, in words)
_SHARES = {"dram_bytes": ("dram_pct", "memory bandwidth"),
           "matrix_busy_cycles": ("tensor_pipe_pct", "clock or SIMDs per CU"),
           "wave_cycles": ("achieved_occupancy_pct", "clock or waves per CU")}  # fmt: skip


def _facts(gpus: dict[int, GpuSpec], devices: np.ndarray) -> dict[str, np.ndarray]:
    """Per launch (``devices``: its device id): the GPU facts the shares need, NaN where
    unknown: bandwidth (GB/s), clock (GHz), SMs/CUs, matrix units per SM (SIMDs per CU on
    AMD), warps/waves per SM."""
    cdna = gpu_facts("cdna")

    def one(g: GpuSpec | None) -> tuple[float, ...]:
        if g is None:
            return (np.nan,) * 5
        simds = g.simds_per_cu or (cdna["simds_per_cu"] if g.vendor == "amd" else None)
        return (g.memory_bandwidth_gbs or np.nan, (g.clock_mhz or np.nan) / 1000, g.sm_count,
                simds or np.nan, g.max_warps_per_sm)  # fmt: skip

    names = ["bandwidth", "ghz", "sms", "simds", "waves"]
    unique = pd.unique(devices)
    known = pd.DataFrame([one(gpus.get(int(d))) for d in unique], index=unique, columns=names,
                         dtype=np.float64)  # fmt: skip
    per_launch = known.reindex(devices)  # (one row per launch, by its device)
    return {c: per_launch[c].to_numpy(np.float64) for c in names}


def counter_shares(trace: Trace) -> list[str]:
    """Fill in place the percentages of ``trace.counters`` its counter tool gave as
    quantities (counters.yaml ``physical``): for the rows joined to a launch, only where the
    percentage is missing, with the facts of the launch's GPU and the profiled launch's
    duration (the timeline launch's where the tool gives none):

        dram_pct               = 100 * dram_bytes / (bandwidth GB/s * duration ns)
        tensor_pipe_pct        = 100 * matrix_busy_cycles / (SMs * SIMDs * GHz * duration ns)
        achieved_occupancy_pct = 100 * wave_cycles / (SMs * waves per SM * GHz * duration ns)

    Returns the warnings: a share that a missing GPU fact leaves out, once each."""
    c = trace.counters
    if c.empty:
        return []
    given = [col for col in _SHARES if col in c and np.isfinite(c[col].to_numpy(float)).any()]
    if not given:
        return []
    k = trace.kernels
    at = c["launch"].to_numpy(np.int64)
    joined = np.flatnonzero((at >= 0) & (at < len(k)))
    rows = at[joined]
    own = (c["duration_ns"].to_numpy(np.float64)[joined] if "duration_ns" in c
           else np.full(len(joined), np.nan))  # fmt: skip
    timeline = (k["end"].to_numpy(np.float64) - k["start"].to_numpy(np.float64))[rows]
    ns = np.where(np.isfinite(own) & (own > 0), own, timeline)
    ns = np.where(ns > 0, ns, np.nan)
    f = _facts(trace.gpus, k["device"].to_numpy()[rows])
    per_ns = {"dram_bytes": f["bandwidth"], "matrix_busy_cycles": f["sms"] * f["simds"] * f["ghz"],
              "wave_cycles": f["sms"] * f["waves"] * f["ghz"]}  # fmt: skip
    notes = []
    for col in given:
        target, needs = _SHARES[col]
        amount = c[col].to_numpy(np.float64)[joined]
        with np.errstate(divide="ignore", invalid="ignore"):
            share = 100 * amount / (per_ns[col] * ns)
        current = (c[target].to_numpy(np.float64).copy() if target in c
                   else np.full(len(c), np.nan))  # fmt: skip
        fill = np.isnan(current[joined]) & np.isfinite(amount)
        current[joined[fill]] = share[fill]
        c[target] = current
        if lost := int((fill & ~np.isfinite(share)).sum()):
            notes.append(f"hardware counters: no {needs} known for the GPU of {lost} profiled "
                         f"launch(es): {target} is not computed from {col} (pass --gpu NAME "
                         "or --gpu-spec FILE)")  # fmt: skip
    return notes


def _listed(counts: dict[str, int], most: int = 3) -> str:
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{name} ({n})" for name, n in top[:most])
    return text + (f" and {len(top) - most} more" if len(top) > most else "")


def join_warnings(join: Join, label: str) -> list[str]:
    """The warnings of a join: nothing joined, some launches left out, registers that
    disagree (each with counts)."""
    out = []
    if join.joined == 0:
        out.append(
            f"--counters {label}: none of its {join.profiled} profiled launches matches a launch "
            f"of the timeline by kernel name, grid and block ({_listed(join.unmatched)}): "
            "counters from another program or run? The advice is the timeline's alone"
        )
    elif join.joined < join.profiled:
        why = (f"; {join.other_config} of them are kernels the timeline runs, at another grid or "
               "block or more often than it holds") if join.other_config else ""  # fmt: skip
        out.append(
            f"--counters {label}: {join.profiled - join.joined} of {join.profiled} profiled "
            f"launches match no launch of the timeline by kernel name, grid, block and launch "
            f"order ({_listed(join.unmatched)}){why}: their counters are left out"
        )
    if join.registers_differ:
        out.append(
            f"--counters {label}: {join.registers_differ} joined launches use other registers "
            "per thread than the timeline's (another build of the kernel?): their counters "
            "may not describe the timeline's launches"
        )
    return out


def _gpu_warning(timeline: Trace, counters: Trace, label: str) -> list[str]:
    mine = {g.name for g in timeline.gpus.values()}
    theirs = {g.name for g in counters.gpus.values()}
    if mine and theirs and not mine & theirs:
        return [f"--counters {label}: profiled on {', '.join(sorted(theirs))}, the timeline ran "
                f"on {', '.join(sorted(mine))}: the counters describe another GPU"]  # fmt: skip
    return []
