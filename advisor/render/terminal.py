"""Rich terminal report of ``advisor analyze`` (worst first, every number with its unit)."""

from __future__ import annotations

import pandas as pd
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from advisor.analysis import Analysis
from advisor.findings import location
from advisor.render.tables import titled_table
from advisor.render.units import fmt_ns, fmt_pct


def _header(a: Analysis) -> Group:
    t = a.trace
    lines = [Text.assemble(("advisor analyze ", "bold"), t.path)]
    lines.append(Text(f"{t.format}, {t.producer_version}"))
    seen = {}
    active = set(t.devices)
    for device, spec in sorted(t.gpus.items()):
        if device in active:
            unit = "CUs" if spec.vendor == "amd" else "SMs"
            seen.setdefault((spec.name, spec.sm_count, unit, spec.source), []).append(device)
    for (name, sms, unit, source), devs in seen.items():
        ids = ",".join(map(str, devs))
        lines.append(Text(f"GPU {ids}: {name}, {sms} {unit} (facts from {source})"))
    if t.sources:
        lines.append(Text(f"also read: {', '.join(t.sources)}"))
    if not t.gpus:
        lines.append(Text("GPU facts: none (occupancy, waves and tails not computed)"))
    sel = {k: v for k, v in a.selection.items() if v is not None}
    if sel:
        lines.append(Text(f"selection: {sel}"))
    for w in a.warnings:
        lines.append(Text(f"warning: {w}", style="yellow"))
    return Group(*lines)


def _summary(a: Analysis) -> Table:
    s = a.summary()
    tab = Table(
        title="Where the GPU time went (device time, summed over devices)", title_justify="left"
    )
    tab.add_column("metric")
    tab.add_column("time", justify="right")
    tab.add_column("share", justify="right")
    cap = s["window_ns"]

    def row(label, ns):
        tab.add_row(label, fmt_ns(ns), fmt_pct(ns / cap) if cap else "-")

    what = "selected ranges' GPU windows" if a.selection.get("range") else "first to last GPU op"
    row(f"window ({what}, per device)", cap)
    row("GPU busy", s["gpu_busy_ns"])
    row("GPU idle", s["idle_ns"])
    row("  start-up (module load, allocation; excluded)", s["startup_idle_ns"])
    row("  synchronization stalls", s["sync_idle_ns"])
    row("  launch overhead (host-bound + latency + in-graph)", s["launch_overhead_ns"])
    row("wave-quantization tail idle (inside busy)", s["tail_idle_ns"])
    row("under-filled grid idle (inside busy)", s["underfill_idle_ns"])
    if s["comm_ns"]:
        row("communication", s["comm_ns"])
        row("  exposed (no compute alongside)", s["exposed_comm_ns"])
        row("  waiting for other ranks", s["comm_wait_ns"])
        tab.add_row("  overlap ratio", "", fmt_pct(s["overlap_ratio"]))
    return tab


def _findings(findings: list[dict], top: int) -> Table:
    tab = titled_table(
        "Findings, ranked by estimated savings (estimates)",
        ("#", "strategy", "sev.", "where", "est. savings", "what was measured"),
        text=["strategy", "sev.", "where", "what was measured"],
    )
    for i, f in enumerate(findings[:top], 1):
        text = f["summary"]
        if f.get("config"):
            text += "\nconfig: " + ", ".join(f["config"])
        if f.get("missing"):
            text += "\nno config: missing " + f["missing"]
        tab.add_row(
            str(i),
            f["strategy"],
            f["severity"],
            "\n".join(location(f)),
            fmt_ns(f["est_savings_ns"]),
            text,
        )
    if not findings:
        tab.add_row("", "none", "", "no rule fired", "", "")
    if len(findings) > top:
        tab.caption = f"{len(findings) - top} more in --format json (or raise --top)"
    return tab


def _strategies(findings: list[dict]) -> Table | None:
    """Why each recommended strategy helps and what to watch for (once per rule)."""
    seen = {}
    for f in findings:
        seen.setdefault(f["rule"], f)
    if not seen:
        return None
    cols = ("strategy", "why", "watch for")
    tab = titled_table("Strategies: why, and what to watch for", cols, text=cols)
    for f in seen.values():
        tab.add_row(f["strategy"], f["rationale"], f["watch_for"])
    return tab


def _kernels(a: Analysis, top: int) -> Table:
    k = a.kernel_table()
    tab = titled_table(
        "Kernels by quantization idle (tail + under-fill)",
        (
            "kernel",
            "dev",
            "grid",
            "block",
            "launches",
            "total",
            "CTAs/SM (limit)",
            "waves",
            "idle share",
            "quant. idle",
            "kind",
        ),
        text=["kernel", "kind"],
    )
    for r in k.head(top).itertuples():
        kind = "under-filled" if r.underfilled else "tail" if r.tail_fraction > 0 else "full waves"
        kind = "comm" if r.comm else "persistent" if r.persistent else kind
        if pd.isna(r.waves):
            kind = "no GPU facts"
        waves = "-" if pd.isna(r.waves) else f"{r.waves:.3f}"
        ctas = "-" if pd.isna(r.ctas_per_sm) else f"{int(r.ctas_per_sm)} ({r.limiter})"
        tab.add_row(
            r.name[:48],
            str(r.device),
            f"{r.grid_x}x{r.grid_y}x{r.grid_z}",
            str(r.block_threads),
            str(r.launches),
            fmt_ns(r.total_ns),
            ctas,
            waves,
            fmt_pct(r.tail_fraction),
            fmt_ns(r.tail_idle_ns + r.underfill_idle_ns),
            kind,
        )
    return tab


def _regions(a: Analysis, top: int) -> Table | None:
    if a.regions.empty:
        return None
    g = a.region_totals().sort_values("recoverable_ns", ascending=False)
    tab = titled_table(
        "Top-level NVTX ranges on the GPU (worst first)",
        (
            "range",
            "dev",
            "n",
            "busy",
            "idle",
            "tail idle",
            "under-fill",
            "launch ovh.",
            "sync",
            "exposed comm",
            "overlap",
        ),
        text=["range"],
    )
    for x in g.head(top).itertuples():
        ratio = x.overlap_ns / x.comm_ns if x.comm_ns else None
        tab.add_row(
            x.name[:40],
            str(x.device),
            str(x.instances),
            fmt_ns(x.gpu_busy_ns),
            fmt_ns(x.idle_ns),
            fmt_ns(x.tail_idle_ns),
            fmt_ns(x.underfill_idle_ns),
            fmt_ns(x.launch_overhead_ns),
            fmt_ns(x.sync_idle_ns),
            fmt_ns(x.exposed_comm_ns),
            fmt_pct(ratio),
        )
    return tab


def _gaps(a: Analysis) -> Table:
    tab = titled_table(
        "Device idle gaps by cause",
        ("dev", "cause", "gaps", "total", "median", "max"),
        text=["cause"],
    )
    for g in a.gaps.itertuples():
        tab.add_row(
            str(g.device),
            g.cause,
            str(g.count),
            fmt_ns(g.total_ns),
            fmt_ns(g.median_ns),
            fmt_ns(g.max_ns),
        )
    return tab


def _streams(a: Analysis, top: int) -> Table:
    tab = titled_table(
        "Streams (busy and their own gaps; other streams may run meanwhile)",
        ("dev", "stream", "ops", "busy", "stream gaps"),
    )
    for r in a.streams.head(top).itertuples():
        tab.add_row(str(r.device), str(r.stream), str(r.ops), fmt_ns(r.busy_ns), fmt_ns(r.gap_ns))
    return tab


def render(a: Analysis, findings: list[dict], console: Console, top: int = 10) -> None:
    """Print the report to ``console``."""
    console.print(_header(a))
    console.print(_summary(a))
    console.print(_findings(findings, top))
    strategies = _strategies(findings[:top])
    if strategies is not None:
        console.print(strategies)
    console.print(_kernels(a, top))
    regions = _regions(a, top)
    if regions is not None:
        console.print(regions)
    console.print(_gaps(a))
    console.print(_streams(a, top))
    console.print(
        Text(
            "Times in ns/us/ms/s of device time. Savings are estimates (upper bounds under "
            "the model in docs/metrics.md).",
            style="dim",
        )
    )
