"""Rich terminal report of ``advisor analyze`` (worst first, every number with its unit)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from advisor.analysis import Analysis
from advisor.render import sections
from advisor.render.fit import fitted_table
from advisor.render.tables import titled_table
from advisor.rules.finding import Finding
from advisor.units import fmt_ns


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
    sel = [f"--{k} {v}" for k, v in a.selection.items() if v is not None]
    if sel:
        lines.append(Text(f"selection: {' '.join(sel)}"))
    for w in a.warnings:
        lines.append(Text(f"warning: {w}", style="yellow"))
    return Group(*lines)


NARROW = 100  # below this many columns findings are listed as blocks, not a table


def _measured(f: Finding) -> str:
    """A finding's measured text with its config files or what a config still needs."""
    text = f.summary
    if f.config:
        text += "\nconfig: " + ", ".join(f.config)
    if f.missing:
        text += "\nno config: missing " + f.missing
    return text


def _at(f: Finding, origin: int) -> list[str]:
    if f.at_ns is None:
        return []
    return [f"at +{fmt_ns(f.at_ns - origin)}"]


def _findings_list(findings: list[Finding], top: int, origin: int) -> Group:
    """Findings as numbered blocks (narrow terminals): nothing squeezed into columns."""
    lines = [Text("Findings, ranked by estimated savings (estimates)", style="italic")]
    for i, f in enumerate(findings[:top], 1):
        head = f"{i}. {f.strategy} ({f.severity}): est. savings {fmt_ns(f.est_savings_ns)}"
        lines.append(Text(head, style="bold"))
        where = ", ".join([*f.location(), *_at(f, origin)])
        lines.append(Text(f"   {where}"))
        for line in _measured(f).split("\n"):
            lines.append(Text(f"   {line}"))
    if not findings:
        lines.append(Text("none: no rule fired"))
    if len(findings) > top:
        lines.append(Text(f"{len(findings) - top} more in --format json (or raise --top)"))
    return Group(*lines)


def _findings(findings: list[Finding], top: int, origin: int) -> Table:
    tab = titled_table(
        "Findings, ranked by estimated savings (estimates)",
        ("#", "strategy", "sev.", "where", "est. savings", "what was measured"),
        text=["strategy", "sev.", "where", "what was measured"],
    )
    for i, f in enumerate(findings[:top], 1):
        tab.add_row(
            str(i),
            f.strategy,
            f.severity,
            "\n".join([*f.location(), *_at(f, origin)]),
            fmt_ns(f.est_savings_ns),
            _measured(f),
        )
    if not findings:
        tab.add_row("", "none", "", "no rule fired", "", "")
    if len(findings) > top:
        tab.caption = f"{len(findings) - top} more in --format json (or raise --top)"
    return tab


def _strategies(findings: list[Finding]) -> Table | None:
    """Why each recommended strategy helps and what to watch for (once per rule)."""
    seen = {}
    for f in findings:
        seen.setdefault(f.rule, f)
    if not seen:
        return None
    cols = ("strategy", "why", "watch for")
    tab = titled_table("Strategies: why, and what to watch for", cols, text=cols)
    for f in seen.values():
        tab.add_row(f.strategy, f.rationale, f.watch_for)
    return tab


def _section(section: sections.Section, console: Console) -> None:
    """One table of the shared report definitions, fitted to the console width; nothing
    for an empty one."""
    if section.empty:
        return
    console.print(fitted_table(section.title, section.cols, section.rows, console.width))
    if section.note:
        console.print(Text(section.note, style="dim"))


def render(
    a: Analysis,
    findings: list[Finding],
    console: Console,
    top: int = 10,
    ranks: list[Finding] | None = None,
) -> None:
    """Print the report to ``console`` (``ranks``: the traces of a job read as one)."""
    console.print(_header(a))
    if ranks is not None:
        _section(sections.ranks(ranks), console)
    _section(sections.summary(a), console)
    if console.width < NARROW:
        console.print(_findings_list(findings, top, a.origin_ns))
    else:
        console.print(_findings(findings, top, a.origin_ns))
    strategies = _strategies(findings[:top])
    if strategies is not None:
        console.print(strategies)
    for section in (
        sections.top_kernels(a, top),
        sections.quantization(a, top),
        sections.regions(a, top),
        sections.pipeline(a),
        sections.gaps(a),
        sections.sync_stalls(a, a.origin_ns),
        sections.copies(a),
        sections.streams(a, top),
    ):
        _section(section, console)
    console.print(
        Text(
            "Times in ns/us/ms/s of device time. Savings are estimates (upper bounds under "
            "the model in docs/metrics.md). 'at +T': where the worst instance starts, T after "
            "the trace's first GPU op.",
            style="dim",
        )
    )
