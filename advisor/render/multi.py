"""Renderers for many traces at once (``advisor analyze A.sqlite B.sqlite ...``)."""

from __future__ import annotations

from rich.console import Console

from advisor.findings import location
from advisor.plain import plain
from advisor.render.json import SCHEMA_VERSION, json_text
from advisor.render.tables import titled_table
from advisor.render.units import fmt_ns


def as_json(merged: dict) -> str:
    return json_text(plain({"schema_version": SCHEMA_VERSION, **merged}))


def terminal(merged: dict, console: Console, top: int) -> None:
    console.print(f"advisor analyze: {len(merged['ranks'])} traces, one per rank; GPUs: "
                  f"{', '.join(merged['gpus']) or 'unknown'}")  # fmt: skip
    tab = titled_table("Ranks (device time per trace)",
                       ("rank", "trace", "devices", "span", "busy", "launch ovh.", "exposed comm"),
                       text=["trace"])  # fmt: skip
    for r in merged["ranks"]:
        if r["error"]:
            tab.add_row(str(r["rank"]), r["path"], "-", "error", "", "", "")
            continue
        tab.add_row(str(r["rank"]), r["path"], ",".join(map(str, r["devices"])),
                    fmt_ns(r["span_ns"]), fmt_ns(r["gpu_busy_ns"]),
                    fmt_ns(r["launch_overhead_ns"]), fmt_ns(r["exposed_comm_ns"]))  # fmt: skip
    console.print(tab)
    for r in merged["ranks"]:
        for w in r["warnings"]:
            console.print(f"warning: rank {r['rank']} ({r['path']}): {w}", style="yellow")
    tab = titled_table("Stragglers: compute time per NVTX range, slowest rank first",
                       ("range", "ranks", "slowest rank", "spread", "slowest / fastest"),
                       text=["range"])  # fmt: skip
    for s in merged["stragglers"][:top]:
        tab.add_row(str(s["name"])[:50], str(s["ranks"]), str(s["slowest_rank"]),
                    fmt_ns(s["spread_ns"]), f"{s['ratio']:.2f}x")  # fmt: skip
    console.print(tab)
    tab = titled_table("Collective skew across ranks (start times of the same launch)",
                       ("collective", "instances", "median skew", "max skew", "most often last"),
                       text=["collective"])  # fmt: skip
    for c in merged["collective_skew"][:top]:
        tab.add_row(
            c["name"][:50],
            str(c["instances"]),
            fmt_ns(c["median_skew_ns"]),
            fmt_ns(c["max_skew_ns"]),
            f"rank {c['most_often_last_rank']}",
        )
    console.print(tab)
    tab = titled_table("Findings of all ranks, ranked by estimated savings (estimates)",
                       ("rank", "strategy", "sev.", "where", "est. savings", "what was measured"),
                       text=["strategy", "sev.", "where", "what was measured"])  # fmt: skip
    for f in merged["findings"][:top]:
        where = ", ".join(location(f))
        tab.add_row(str(f["rank"]), f["strategy"], f["severity"], where,
                    fmt_ns(f["est_savings_ns"]), f["summary"])  # fmt: skip
    console.print(tab)
    console.print("Per-rank findings do not see the other ranks: waits inside collectives "
                  "are in the skew table above.", style="dim")  # fmt: skip
