"""Rich terminal report of ``advisor analyze`` (worst first, every number with its unit),
fitted to the console's width (render.fit, docs/terminal.md): numbers are never cut nor
wrapped away from their units, columns are left out in a stated order when narrow."""

from __future__ import annotations

from typing import Any

from rich.console import Console, RenderableType
from rich.text import Text

from advisor.analysis import Analysis
from advisor.render import sections
from advisor.render.fit import Col, fitted_table, name_lines, print_wrapped
from advisor.rules.finding import Finding, FindingGroup, device_list, group_across_devices
from advisor.units import fmt_ns

# Piped or redirected output has no terminal to measure: it is this wide (COLUMNS, when set,
# wins). Wide enough for the findings as a table, narrow enough for an editor or a diff.
PIPED_WIDTH = 100
NARROW = 100  # below this many columns findings are listed as blocks, not a table


def _header(a: Analysis, console: Console) -> None:
    t = a.trace
    print_wrapped(console, f"advisor analyze {t.title()}", "bold")
    lines = [f"{t.format}, {t.producer_version}"]
    seen: dict[tuple[str, int, str, str], list[int]] = {}
    active = set(t.devices)
    for device, spec in sorted(t.gpus.items()):
        if device in active:
            unit = "CUs" if spec.vendor == "amd" else "SMs"
            seen.setdefault((spec.name, spec.sm_count, unit, spec.source), []).append(device)
    for (name, sms, unit, source), devs in seen.items():
        ids = device_list(devs, counted=True)
        lines.append(f"GPU {ids}: {name}, {sms} {unit} (facts from {source})")
    if t.sources:
        lines.append(f"also read: {', '.join(t.sources)}")
    if not t.gpus:
        lines.append("GPU facts: none (occupancy, waves and tails not computed)")
    sel = [f"--{k} {v}" for k, v in a.selection.items() if v is not None]
    if sel:
        lines.append(f"selection: {' '.join(sel)}")
    for line in lines:
        print_wrapped(console, line, hanging="  ")
    for w in a.warnings:
        print_wrapped(console, f"warning: {w}", "yellow", hanging="  ")


def _measured(g: FindingGroup) -> str:
    """A finding's measured text with its config files or what a config still needs (of a
    group of devices: the first's, and the others in words)."""
    f = g.first
    text = f.summary + (" " + g.others() if g.others() else "")
    if f.config:
        text += "\nconfig: " + ", ".join(f.config)
    if f.missing:
        text += "\nno config: missing " + f.missing
    return text


def _at(f: Finding, origin: int) -> list[str]:
    if f.at_ns is None:
        return []
    return [f"at +{fmt_ns(f.at_ns - origin)}"]


def _findings_list(groups: list[FindingGroup], top: int, origin: int, console: Console) -> None:
    """Findings as numbered blocks (narrow terminals): nothing squeezed into columns."""
    print_wrapped(console, "Findings, ranked by estimated savings (estimates)", "italic")
    shown = groups[:top]
    # a kernel's name on lines of its own, at most two (as in the table's "where")
    kernels = name_lines([g.first.kernel or "" for g in shown], console.width - 3, 2)
    for i, (g, kernel) in enumerate(zip(shown, kernels, strict=True), 1):
        head = f"{i}. {g.first.strategy} ({g.severity}): est. savings {fmt_ns(g.est_savings_ns)}"
        print_wrapped(console, head, "bold", hanging="   ")
        where = [*g.location(), *_at(g.first, origin)]
        if g.first.kernel:
            console.print(Text("\n".join("   " + line for line in kernel)))
            where = where[1:]
        print_wrapped(console, ", ".join(where), indent="   ", hanging="   ")
        print_wrapped(console, _measured(g), indent="   ", hanging="   ")
    if not groups:
        print_wrapped(console, "none: no rule fired")
    if len(groups) > top:
        print_wrapped(console, _more(groups, top))


def _more(groups: list[FindingGroup], top: int) -> str:
    """What the listing leaves out."""
    return f"{len(groups) - top} more in --format json (or raise --top)"


FINDING_COLUMNS = (
    Col("#", identifies=True),
    Col("strategy", text=True, min=20),
    Col("sev.", text=True, min=6, drop=1),
    Col("where", text=True, wrap=True, min=16, name_lines=2),
    Col("est. savings"),
    Col("what was measured", text=True, wrap=True, min=24, break_words=True),
)


def _findings(groups: list[FindingGroup], top: int, origin: int, width: int) -> RenderableType:
    """Findings as a table (wide terminals), best first."""
    rows = [
        [str(i), g.first.strategy, g.severity, "\n".join([*g.location(), *_at(g.first, origin)]),
         fmt_ns(g.est_savings_ns), _measured(g)]
        for i, g in enumerate(groups[:top], 1)
    ]  # fmt: skip
    if not groups:
        rows = [["", "none", "", "no rule fired", "", ""]]
    more = _more(groups, top) if len(groups) > top else ""
    return fitted_table("Findings, ranked by estimated savings (estimates)", FINDING_COLUMNS,
                        rows, width, caption=more)  # fmt: skip


STRATEGY_COLUMNS = (
    Col("strategy", text=True, min=20),
    Col("why", text=True, wrap=True, min=16),
    Col("watch for", text=True, wrap=True, min=12),
)


def _strategies(findings: list[Finding], width: int) -> RenderableType | None:
    """Why each recommended strategy helps and what to watch for (once per rule); None
    without findings."""
    seen: dict[str, Finding] = {}
    for f in findings:
        seen.setdefault(f.rule, f)
    if not seen:
        return None
    rows = [[f.strategy, f.rationale, f.watch_for] for f in seen.values()]
    return fitted_table("Strategies: why, and what to watch for", STRATEGY_COLUMNS, rows, width)


def _section(section: sections.Section, console: Console) -> None:
    """One table of the shared report definitions, fitted to the console width; for an empty
    one only its note (what was left out), if it has one."""
    if section.empty:
        if section.note:
            print_wrapped(console, f"{section.title}: none; {section.note}", "dim")
        return
    console.print(fitted_table(section.title, section.cols, section.rows, console.width))
    if section.note:
        print_wrapped(console, section.note, "dim")


def render(
    a: Analysis,
    findings: list[Finding],
    console: Console,
    top: int = 10,
    ranks: list[dict[str, Any]] | None = None,
) -> None:
    """Print the report to ``console`` (``ranks``: the traces of a job read as one, a row
    per trace: parts.rank_rows)."""
    _header(a, console)
    if ranks is not None:
        _section(sections.ranks(ranks), console)
    _section(sections.summary(a), console)
    groups = group_across_devices(findings)
    if console.width < NARROW:
        _findings_list(groups, top, a.origin_ns, console)
    else:
        console.print(_findings(groups, top, a.origin_ns, console.width))
    strategies = _strategies([g.first for g in groups[:top]], console.width)
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
    print_wrapped(
        console,
        "Times in ns/us/ms/s of device time. Savings are estimates (upper bounds under the "
        "model in docs/metrics.md). 'at +T': where the worst instance starts, T after the "
        "trace's first GPU op.",
        "dim",
    )
