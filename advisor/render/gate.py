"""Renderers for a gate verdict: terminal table, pull-request markdown, JSON, GitHub
Actions annotations. Regressions first; unchanged rows only counted."""

from __future__ import annotations

from rich.console import Console

from advisor.gate import GateResult, Row
from advisor.render.json import json_text
from advisor.render.tables import titled_table
from advisor.render.units import fmt_ns, fmt_pct

ORDER = {"regression": 0, "new finding": 1, "improvement": 2, "not significant": 3,
         "only in baseline": 4, "only in candidate": 5, "unchanged": 6}  # fmt: skip


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    return fmt_pct(value) if metric == "overlap_ratio" else fmt_ns(value)


def _change(r: Row) -> str:
    if r.delta is None:
        return "-"
    rel = f" ({r.delta / r.baseline:+.1%})" if r.baseline else ""
    sign = "+" if r.delta >= 0 else "-"
    if r.metric == "overlap_ratio":
        return f"{r.delta * 100:+.1f} pts"
    return f"{sign}{fmt_ns(abs(r.delta))}{rel}"


def impact_ns(r: Row) -> float:
    """How much time a row moves (ns): |candidate - baseline| for time metrics, a new
    finding's estimated savings; 0 for ratios and rows present on one side only."""
    if r.metric == "overlap_ratio":
        return 0.0
    if r.status == "new finding":
        return abs(r.candidate or 0.0)
    return abs(r.delta) if r.delta is not None else 0.0


def shown(result: GateResult) -> list[Row]:
    """The changed rows: regressions first, then by the time they move, largest first."""
    rows = [r for r in result.rows if r.status != "unchanged"]
    return sorted(rows, key=lambda r: (ORDER[r.status], -impact_ns(r), r.scope, r.key, r.metric))


def verdict(result: GateResult) -> str:
    n = sum(r.status in ("regression", "new finding") for r in result.rows)
    if result.failed:
        return f"FAIL: {n} regression(s)"
    return f"PASS: no regression ({len(result.rows)} metric(s) compared)"


def table(result: GateResult, console: Console, top: int) -> None:
    console.print(verdict(result), style="bold red" if result.failed else "bold green")
    console.print(f"method: {result.method}")
    for note in result.notes:
        console.print(f"note: {note}", style="yellow", markup=False, highlight=False)
    rows = shown(result)
    if not rows:  # nothing moved beyond its threshold: the verdict says it all
        return
    cols = ("status", "scope", "what", "metric", "baseline", "candidate", "change", "note")
    tab = titled_table("Changes (unchanged metrics omitted)", cols, text=cols)
    for r in rows[:top]:
        tab.add_row(
            r.status,
            r.scope,
            r.key[:60],
            r.metric,
            _fmt(r.metric, r.baseline),
            _fmt(r.metric, r.candidate),
            _change(r),
            r.detail,
        )
    console.print(tab)
    unchanged = sum(r.status == "unchanged" for r in result.rows)
    console.print(
        f"{unchanged} metric(s) unchanged; {len(shown(result))} listed above (first {top})."
    )


def markdown(result: GateResult, top: int = 50) -> str:
    lines = [f"### advisor gate: {verdict(result)}", "", f"Method: {result.method}.", ""]
    if result.notes:
        lines += [f"- note: {n}" for n in result.notes] + [""]
    if not shown(result):
        return "\n".join(lines) + "\n"
    lines += [
        "| status | scope | what | metric | baseline | candidate | change |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in shown(result)[:top]:
        what = r.key.replace("|", "\\|")
        lines.append(
            f"| {r.status} | {r.scope} | {what} | {r.metric} | "
            f"{_fmt(r.metric, r.baseline)} | {_fmt(r.metric, r.candidate)} | "
            f"{_change(r)} |"
        )
    unchanged = sum(r.status == "unchanged" for r in result.rows)
    more = len(shown(result)) - top
    lines += [""] + ([f"{more} more change(s) not shown (raise --top)."] if more > 0 else [])
    lines += [f"{unchanged} metric(s) unchanged."]
    return "\n".join(lines) + "\n"


def as_json(result: GateResult) -> str:
    return json_text({
        "verdict": "fail" if result.failed else "pass",
        "method": result.method,
        "notes": result.notes,
        "rows": [dict(scope=r.scope, key=r.key, metric=r.metric, baseline=r.baseline,
                      candidate=r.candidate, status=r.status, detail=r.detail)
                 for r in shown(result)],
        "unchanged": sum(r.status == "unchanged" for r in result.rows),
    })  # fmt: skip


def annotations(result: GateResult) -> str:
    """GitHub Actions workflow commands: ::error:: per regression, ::warning:: for the rest
    of the notable changes."""
    out = []
    for r in shown(result):
        if r.status in ("regression", "new finding"):
            level = "error"
        elif r.status in ("not significant", "only in baseline", "only in candidate"):
            level = "warning"
        else:
            continue
        if r.status.startswith("only in"):  # nothing to compare: say what is missing
            msg = f"advisor gate: {r.scope} {r.key} is {r.status}"
        else:
            msg = (
                f"advisor gate {r.status}: {r.scope} {r.key} {r.metric} "
                f"{_fmt(r.metric, r.baseline)} -> {_fmt(r.metric, r.candidate)}"
            )
        out.append(f"::{level}::{msg.replace(chr(10), ' ')}")
    return "\n".join(out)
