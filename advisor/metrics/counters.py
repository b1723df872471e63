"""Hardware counters per launch and per kernel group (docs/metrics.md, "Hardware counters").

``trace.counters`` holds one row per profiled launch with the raw counters of
advisor/data/counters.yaml; ``launch_counters`` derives, per launch of the trace, the values
the kernels scope reads (NaN for a launch without counters), which ``kernel_groups`` reduces
per group (``GROUP_AGGREGATES``: medians, and how many launches had counters);
``add_group_counters`` adds the columns that follow from the group's own numbers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# per-launch derived counters and how a kernel group reduces them (pandas aggregations)
GROUP_AGGREGATES = {
    "counter_launches": "sum",  # (1 for a launch with counters)
    "counter_row": "min",  # its first profiled launch (a row of trace.counters)
    "sm_imbalance": "median",
    "sm_idle_fraction": "median",
    "tensor_pipe_pct": "median",
    "dram_pct": "median",
    "memory_pct": "median",
    "sm_pct": "median",
    "tma_loads": "median",
    "memory_stall_share": "median",
    "smem_limit_ctas": "median",
    "achieved_occupancy_pct": "median",
    "issue_active_pct": "median",
}
# the issue stalls that wait on memory, barriers or shared memory (counters.yaml columns):
# what a warp-specialized pipeline (a producer warp loading, consumers computing) overlaps
MEMORY_STALLS = ["stall_long_scoreboard", "stall_barrier", "stall_mio_throttle",
                 "stall_short_scoreboard"]  # fmt: skip
_AS_IS = ["tensor_pipe_pct", "dram_pct", "memory_pct", "sm_pct", "tma_loads", "smem_limit_ctas",
          "achieved_occupancy_pct", "issue_active_pct"]  # fmt: skip


def launch_counters(counters: pd.DataFrame, launches: int) -> dict[str, np.ndarray]:
    """Per launch (row positions 0..launches-1 of trace.kernels): the GROUP_AGGREGATES
    columns, NaN (counter_launches 0) for a launch no profiled launch joined.

    sm_imbalance = sm_active_cycles_max / sm_active_cycles_avg (1: every SM as busy as the
    busiest); sm_idle_fraction = 1 - avg / max (the share of the SMs' time over the launch
    spent waiting for the busiest SM); memory_stall_share = the MEMORY_STALLS cycles per
    issued instruction over all of them (warp_cycles_per_issue), or the share a counter
    tool measured itself (trace.counters' memory_stall_share: AMD's, counters.yaml)."""
    out = {c: np.full(launches, np.nan) for c in GROUP_AGGREGATES}
    out["counter_launches"] = np.zeros(launches)
    if counters.empty:
        return out
    row = counters["launch"].to_numpy(np.int64)
    joined = (row >= 0) & (row < launches)
    at, c = row[joined], counters[joined]
    out["counter_launches"][at] = 1.0
    out["counter_row"][at] = np.flatnonzero(joined)
    high = c["sm_active_cycles_max"].to_numpy(np.float64)
    mean = c["sm_active_cycles_avg"].to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["sm_imbalance"][at] = np.where(mean > 0, high / mean, np.nan)
        out["sm_idle_fraction"][at] = np.where(high > 0, 1 - mean / high, np.nan)
        stalls = c[MEMORY_STALLS].to_numpy(np.float64).sum(axis=1)
        total = c["warp_cycles_per_issue"].to_numpy(np.float64)
        share = np.where(total > 0, stalls / total, np.nan)
        if "memory_stall_share" in c:  # (a tool that measures the share itself: AMD's)
            share = np.where(np.isnan(share), c["memory_stall_share"].to_numpy(np.float64), share)
        out["memory_stall_share"][at] = share
    for col in _AS_IS:
        out[col][at] = c[col].to_numpy(np.float64)
    return out


def add_group_counters(groups: pd.DataFrame) -> None:
    """Per kernel group (in place, after kernel_groups reduced GROUP_AGGREGATES):
    has_counters, counter_idle_ns (sm_idle_fraction x total_ns: the time the SMs waited for
    the busiest one over the group's launches, as the counters measured it) and uses_tma
    (its TMA load instructions > 0)."""
    if "counter_launches" not in groups:
        for col in GROUP_AGGREGATES:
            groups[col] = 0.0 if col == "counter_launches" else np.nan
    groups["counter_launches"] = groups["counter_launches"].fillna(0).astype(np.int64)
    groups["has_counters"] = groups["counter_launches"] > 0
    groups["counter_idle_ns"] = np.round(groups["sm_idle_fraction"] * groups["total_ns"])
    groups["uses_tma"] = (groups["tma_loads"] > 0).to_numpy(bool)


def rule_results(rules: pd.DataFrame, counters: pd.DataFrame, rows: pd.Series) -> list[list]:
    """Per group: the counter tool's rule results (trace.counter_rules) of its first profiled
    launch (``rows``: rows of trace.counters, NaN for none), as dicts (rule, type, section,
    speedup, speedup_type, description), in the tool's order."""
    empty: list[list] = [[] for _ in range(len(rows))]
    if rules.empty or counters.empty:
        return empty
    profiled = counters["profiled"].to_numpy(np.int64)
    by_launch = {p: g for p, g in rules.groupby("profiled", sort=False)}
    cols = ["rule", "type", "section", "speedup", "speedup_type", "description"]
    out = []
    for r in rows.to_numpy(np.float64):
        found = by_launch.get(int(profiled[int(r)])) if np.isfinite(r) else None
        out.append([] if found is None else found[cols].to_dict("records"))
    return out


def rules_in_words(results: list[dict], only: set[str] | None = None) -> str:
    """Rule results as 'Rule (est. N %)', each rule once with its largest estimated speedup,
    the largest first ('' for none): the optimization hints (OPT, WRN), or with ``only``
    the results of those rules of any type."""
    best: dict[str, float] = {}
    for r in results:
        if (r["rule"] in only) if only is not None else r["type"] in ("OPT", "WRN"):
            s = r["speedup"]
            s = -1.0 if s is None or not np.isfinite(s) else float(s)
            best[r["rule"]] = max(best.get(r["rule"], -1.0), s)
    ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{rule} (est. {s:g} %)" if s >= 0 else rule for rule, s in ranked)
