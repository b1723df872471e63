"""Built-in findings: the rules of rules/scheduling.yaml applied to an Analysis.

Each finding names the strategy, the kernel/region/device it concerns, the evidence (the
measured numbers that fired it) and ``est_savings_ns``: an estimate (an upper bound under
the stated model) of the time the strategy recovers. Findings are ranked by it. Start-up
gaps never produce findings.
"""

from __future__ import annotations

from functools import cache

import pandas as pd
import yaml

from advisor.analysis import Analysis
from advisor.data import builtin_rules_dir, name_matches
from advisor.render.units import fmt_ns

SEVERITY_SHARES = ((0.10, "high"), (0.02, "medium"))  # est. savings / steady-state span


@cache
def builtin_rules() -> dict[str, dict]:
    """The shipped rules by id (rules/scheduling.yaml, installed as package data)."""
    text = builtin_rules_dir().joinpath("scheduling.yaml").read_text()
    return {r["id"]: r for r in yaml.safe_load(text)["rules"]}


def _severity(savings: float, span: float) -> str:
    share = savings / span if span > 0 else 0.0
    for floor, label in SEVERITY_SHARES:
        if share >= floor:
            return label
    return "low"


def _finding(
    rule: dict, savings: float, span: float, evidence: dict, summary: str, **where
) -> dict:
    return {
        "rule": rule["id"],
        "title": rule["title"],
        "strategy": rule["strategy"],
        "severity": _severity(savings, span),
        "kernel": where.get("kernel"),
        "region": where.get("region"),
        "device": where.get("device"),
        "est_savings_ns": int(round(savings)),
        "summary": summary,
        "evidence": evidence,
        "rationale": " ".join(rule["rationale"].split()),
        "watch_for": " ".join(rule["watch_for"].split()),
    }


def _region(value) -> str | None:
    return None if pd.isna(value) else str(value)


def _grid_evidence(row) -> dict:
    """The launch-geometry numbers every kernel finding shows."""
    return {
        "grid_blocks": int(row.grid_blocks),
        "ctas_per_sm": int(row.ctas_per_sm),
        "occupancy_limiter": row.limiter,
        "slots": int(row.slots),
        "waves": round(float(row.waves), 4),
        "launches": int(row.launches),
        "median_launch_ns": int(row.median_ns),
        "kernel_total_ns": int(row.total_ns),
    }


def _kernel_findings(a: Analysis, spans: dict) -> list[dict]:
    by_region = not a.regions.empty
    k = a.kernel_table(by_region=by_region)
    if k.empty or k["waves"].isna().all():
        return []
    if not by_region:
        k["region"] = None
    tail_rule = builtin_rules()["wave-tail"]
    t = tail_rule["thresholds"]
    tails = k[
        (k["waves"] >= t["min_waves"])
        & (k["tail_fraction"] >= t["min_tail_fraction"])
        & (k["tail_idle_ns"] >= t["min_tail_idle_ns"])
        & ~k["persistent"]
    ]
    under_rule = builtin_rules()["underfilled-gemm"]
    t = under_rule["thresholds"]
    under = k[
        name_matches(k["name"], "gemm_kernels")
        & (k["waves"] <= t["max_waves"])
        & (k["median_ns"] >= t["min_median_ns"])
        & (k["underfill_idle_ns"] >= t["min_underfill_idle_ns"])
        & ~k["persistent"]
    ]
    out = []
    for rule, hits in ((tail_rule, tails), (under_rule, under)):
        for row in hits.itertuples():
            ev = _grid_evidence(row)
            if rule is tail_rule:
                savings = row.tail_idle_ns
                ev.update(
                    tail_fraction=round(float(row.tail_fraction), 4), tail_idle_ns=int(savings)
                )
                text = (
                    f"{row.grid_blocks} CTAs on {int(row.slots)} slots ({int(row.ctas_per_sm)} "
                    f"CTA/SM, limited by {row.limiter}): {row.waves:.3f} waves, so "
                    f"{row.tail_fraction:.1%} of the GPU idles over {row.launches} launch(es) "
                    f"({fmt_ns(savings)})"
                )
            else:
                savings = row.underfill_idle_ns
                ev["underfill_idle_ns"] = int(savings)
                ev["k_iterations"] = (
                    "unknown: GEMM shape not in the trace (K loop length inferred from the "
                    "launch duration only)"
                )
                text = (
                    f"only {row.grid_blocks} CTAs for {int(row.slots)} slots ({row.waves:.1%} "
                    f"of one wave) while each launch runs {fmt_ns(row.median_ns)}: "
                    f"{fmt_ns(savings)} of idle SMs; K unknown (no shape in trace)"
                )
            out.append(
                _finding(
                    rule,
                    savings,
                    spans[row.device],
                    ev,
                    text,
                    kernel=row.name,
                    region=_region(row.region),
                    device=int(row.device),
                )
            )
    return out


def _sequence_findings(a: Analysis, spans: dict) -> list[dict]:
    """Launch-bound sequences, one finding per (device, region, most common kernel)."""
    rule = builtin_rules()["launch-bound-sequence"]
    t = rule["thresholds"]
    s = a.sequences
    if s.empty:
        return []
    share = s["overhead_ns"] / s["span_ns"].where(s["span_ns"] > 0)
    hit = s[
        (s["launches"] >= t["min_launches"])
        & (share >= t["min_overhead_share"])
        & (s["graph_saving_ns"] >= t["min_graph_saving_ns"])
    ]
    if hit.empty:
        return []
    grouped = hit.assign(region=hit["region"].fillna("")).groupby(
        ["device", "region", "top_kernel"], as_index=False
    )
    g = grouped.agg(
        sequences=("ops", "size"),
        ops=("ops", "sum"),
        launches=("launches", "sum"),
        span_ns=("span_ns", "sum"),
        overhead_ns=("overhead_ns", "sum"),
        graph_saving_ns=("graph_saving_ns", "sum"),
        median_kernel_ns=("median_op_ns", "median"),
        median_gap_ns=("median_gap_ns", "median"),
    )
    out = []
    for row in g.itertuples():
        ev = {
            "sequences": int(row.sequences),
            "ops": int(row.ops),
            "launches": int(row.launches),
            "span_ns": int(row.span_ns),
            "launch_overhead_ns": int(row.overhead_ns),
            "overhead_share": round(float(row.overhead_ns / row.span_ns), 3),
            "median_kernel_ns": int(row.median_kernel_ns),
            "median_gap_ns": int(row.median_gap_ns),
            "most_common_kernel": row.top_kernel,
        }
        text = (
            f"{row.launches} launches in {row.sequences} sequence(s) spanning "
            f"{fmt_ns(row.span_ns)}: median kernel {fmt_ns(row.median_kernel_ns)}, median gap "
            f"{fmt_ns(row.median_gap_ns)}; launch gaps are {row.overhead_ns / row.span_ns:.0%} "
            "of the span"
        )
        out.append(
            _finding(
                rule,
                row.graph_saving_ns,
                spans[row.device],
                ev,
                text,
                kernel=row.top_kernel,
                region=row.region or None,
                device=int(row.device),
            )
        )
    return out


def _window_findings(a: Analysis, spans: dict) -> list[dict]:
    if a.regions.empty:
        w = a.devices.assign(name=None)
    else:
        cols = [c for c in a.regions.columns if c.endswith("_ns") or c == "sync_gaps"]
        cols = [c for c in cols if c not in ("start_ns", "end_ns", "host_start_ns", "host_end_ns")]
        w = a.regions.groupby(["name", "device"], as_index=False)[cols].sum()
    w["overlap_ratio"] = (w["overlap_ns"] / w["comm_ns"]).where(w["comm_ns"] > 0)
    out = []
    rule = builtin_rules()["exposed-comm"]
    t = rule["thresholds"]
    hidable = (w["exposed_comm_ns"] - w["comm_wait_ns"]).clip(lower=0)
    w["hidable_ns"] = pd.concat([hidable, w["compute_ns"]], axis=1).min(axis=1)
    hit = w[
        (w["exposed_comm_ns"] >= t["min_exposed_comm_ns"])
        & (w["overlap_ratio"] <= t["max_overlap_ratio"])
        & (w["hidable_ns"] > 0)
    ]
    for row in hit.itertuples():
        ev = {
            "comm_ns": int(row.comm_ns),
            "exposed_comm_ns": int(row.exposed_comm_ns),
            "overlap_ratio": round(float(row.overlap_ratio), 3),
            "compute_ns": int(row.compute_ns),
            "comm_wait_ns": int(row.comm_wait_ns),
            "same_stream_comm_ns": int(row.same_stream_comm_ns),
            "note": "comm shares a stream with compute: it cannot overlap until moved"
            if row.same_stream_comm_ns > 0
            else "comm runs on its own stream",
        }
        text = (
            f"{fmt_ns(row.exposed_comm_ns)} of {fmt_ns(row.comm_ns)} comm runs with no compute "
            f"alongside (overlap {row.overlap_ratio:.0%}); {fmt_ns(row.comm_wait_ns)} of it waits "
            "for other ranks"
            + ("; comm shares a stream with compute" if row.same_stream_comm_ns else "")
        )
        out.append(
            _finding(
                rule,
                row.hidable_ns,
                spans[row.device],
                ev,
                text,
                region=_region(row.name),
                device=int(row.device),
            )
        )
    rule = builtin_rules()["sync-stall"]
    t = rule["thresholds"]
    hit = w[(w["sync_gaps"] >= t["min_sync_gaps"]) & (w["sync_idle_ns"] >= t["min_sync_idle_ns"])]
    for row in hit.itertuples():
        ev = {"sync_gaps": int(row.sync_gaps), "sync_idle_ns": int(row.sync_idle_ns)}
        text = (
            f"{int(row.sync_gaps)} idle gaps after blocking host calls, "
            f"{fmt_ns(row.sync_idle_ns)} in total"
        )
        out.append(
            _finding(
                rule,
                row.sync_idle_ns,
                spans[row.device],
                ev,
                text,
                region=_region(row.name),
                device=int(row.device),
            )
        )
    rule = builtin_rules()["rank-skew"]
    hit = w[w["comm_wait_ns"] >= rule["thresholds"]["min_comm_wait_ns"]]
    ops = a.ops[a.ops["wait_ns"] > 0]
    for row in hit.itertuples():
        mine = ops[ops["device"] == row.device]
        if row.name is not None:
            mine = mine[mine["region"] == row.name]
        last = mine["last_device"].mode()
        last_device = int(last.iloc[0]) if len(last) else None
        ev = {
            "comm_wait_ns": int(row.comm_wait_ns),
            "comm_ns": int(row.comm_ns),
            "last_device": last_device,
        }
        text = (
            f"collectives on this device ran {fmt_ns(row.comm_wait_ns)} waiting for the last "
            f"rank to arrive (of {fmt_ns(row.comm_ns)} comm); most often last: device "
            f"{last_device}"
        )
        out.append(
            _finding(
                rule,
                row.comm_wait_ns,
                spans[row.device],
                ev,
                text,
                region=_region(row.name),
                device=int(row.device),
            )
        )
    return out


def find(a: Analysis) -> list[dict]:
    """All findings of the built-in rules, ranked by estimated savings (largest first)."""
    d = a.devices
    steady = d["end_ns"] - d["start_ns"] - d["startup_idle_ns"]  # severity ignores start-up
    spans = steady.groupby(d["device"]).sum().to_dict()
    found = _kernel_findings(a, spans) + _sequence_findings(a, spans) + _window_findings(a, spans)
    return sorted(found, key=lambda f: -f["est_savings_ns"])
