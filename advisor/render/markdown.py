"""Markdown tuning report (``advisor report``): summary, ranked findings with evidence,
kernel wave table, gap breakdown, comm/compute, NVTX ranges, charts, configs."""

from __future__ import annotations

from pathlib import Path

from advisor.analysis import Analysis, MergedAnalysis
from advisor.gating import GateResult
from advisor.render import gate as gate_render
from advisor.render import sections
from advisor.render.fit import shorten_middle
from advisor.rules.finding import Finding, device_list, group_across_devices
from advisor.units import fmt_ns


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out + [""]


def _summary(a: Analysis) -> list[str]:
    t = a.trace
    gpus = sorted({f"{g.name} ({g.sm_count} {'CUs' if g.vendor == 'amd' else 'SMs'}, facts "
                   f"from {g.source})" for d, g in t.gpus.items() if d in t.devices})  # fmt: skip
    paths = t.inputs
    what = "Trace" if len(paths) == 1 else f"Traces ({len(paths)}, one per rank, in rank order)"
    lines = [
        f"{what}: {', '.join(f'`{p}`' for p in paths)} ({t.format}, {t.producer_version}); devices "
        f"{device_list(t.devices) if t.devices else 'none'}; GPU: {'; '.join(gpus) or 'no facts'}.",
        "",
    ]
    lines += [f"> warning: {w}" for w in a.warnings] + ([""] if a.warnings else [])
    return lines + _section(sections.summary(a))


def _evidence_value(key: str, value) -> str:
    """One evidence value as text: times (keys ending in _ns) with units, lists item by item."""
    if isinstance(value, list):
        return "[" + ", ".join(_evidence_value(key, v) for v in value) + "]"
    return fmt_ns(value) if key.endswith("_ns") and value is not None else str(value)


def _findings(findings: list[Finding], top: int) -> list[str]:
    """The findings table and a section per finding (one rule at one kernel and range on
    several devices: one row, the devices' savings summed, the largest's evidence)."""
    if not findings:
        return ["No rule fired.", ""]
    groups = group_across_devices(findings)
    rows = []
    for i, g in enumerate(groups[:top], 1):
        f = g.first
        where = ", ".join(g.location())
        if f.at_rel_ns is not None:
            where += f", at +{fmt_ns(f.at_rel_ns)}"
        rows.append([i, f.strategy, g.severity, where, fmt_ns(g.est_savings_ns),
                     " ".join(filter(None, (f.summary, g.others())))])  # fmt: skip
    lines = _table(["#", "strategy", "severity", "where", "est. savings", "measured"], rows)
    for i, g in enumerate(groups[:top], 1):
        f = g.first
        lines.append(f"### {i}. {f.title} (`{f.rule}` -> `{f.strategy}`)")
        lines.append("")
        if g.also():
            lines.append(f"- Devices: {device_list(g.devices)}, their savings summed above; "
                         f"the evidence below is device {f.device}'s ({g.also()})")  # fmt: skip
        ev = ", ".join(f"{k}={_evidence_value(k, v)}" for k, v in f.evidence.items())
        lines += [f"- Evidence: {ev}", f"- Why: {f.rationale}",
                  f"- Watch for: {f.watch_for}"]  # fmt: skip
        if f.at_ns is not None:
            rel = fmt_ns(f.at_rel_ns)
            lines.append(f"- Where to look: the worst instance starts at trace time "
                         f"{f.at_ns} ns (+{rel} after the first GPU op)")  # fmt: skip
        if f.config:
            links = ", ".join(f"[{Path(p).name}]({p})" for p in f.config)
            lines.append(f"- Reference config: {links}")
        if f.missing:
            lines.append(f"- No config: missing {f.missing}")
        lines.append("")
    return lines


MARKDOWN_TEXT = 60  # text cells (kernel and range names) shortened in the middle to this


def _section(section: sections.Section, empty: str = "") -> list[str]:
    """A shared table definition as a markdown table (``empty``: what to say without rows;
    the section's note, what it left out, in either case)."""
    if section.empty:
        note = section.note
        if empty and note:  # (a sentence of its own after ``empty``'s)
            note = note[0].upper() + note[1:]
        said = [text for text in (empty, note) if text]
        return [" ".join(said), ""] if said else []
    rows = [[shorten_middle(c, MARKDOWN_TEXT) if col.text else c
             for c, col in zip(row, section.cols, strict=True)]
            for row in section.rows]  # fmt: skip
    lines = _table([c.header for c in section.cols], rows)
    return lines + ([section.note, ""] if section.note else [])


def report(a: Analysis, findings: list[Finding], charts: dict[str, str], top: int = 10) -> str:
    """The whole report; ``charts`` maps chart name -> image path relative to the report."""
    title = f"# advisor tuning report: {a.trace.short_name()}"
    lines = [title, "", "## Summary", ""] + _summary(a)
    if "gaps" in charts:  # (it plots the summary's idle rows)
        lines += [f"![Why was the GPU idle? Steady-state idle time by cause]({charts['gaps']})",
                  ""]  # fmt: skip
    lines += ["## Findings, ranked by estimated savings (estimates)", ""] + _findings(findings, top)
    lines += ["## Top kernels by GPU time", ""] + _section(sections.top_kernels(a, top))
    lines += ["## Wave quantization per kernel", ""] + _section(
        sections.quantization(a, top), "No kernel group measured."
    )
    if "waves" in charts:
        lines += [f"![Kernels by wave-quantization idle]({charts['waves']})", ""]
    lines += ["## Launch gaps", ""] + _section(sections.gaps(a))
    lines += ["## Synchronization stalls by blocking call", ""] + _section(
        sections.sync_stalls(a, a.origin_ns), "No synchronization stalls."
    )
    lines += ["## Memory copies and sets", ""] + _section(
        sections.copies(a), "No memory copies or sets."
    )
    if a.summary()["comm_ns"]:
        lines += ["## Communication and compute per device", ""] + _section(sections.comm(a))
        if "comm" in charts:
            lines += [f"![comm vs compute]({charts['comm']})", ""]
    stages = sections.pipeline(a)
    if not stages.empty:
        lines += ["## Pipeline stages", ""] + _section(stages)
    lines += ["## Top-level NVTX ranges (worst first)", ""] + _section(
        sections.regions(a, top), "The trace has no NVTX ranges."
    )
    if "timeline" in charts:
        lines += [f"![GPU busy over time, by range]({charts['timeline']})", ""]
    elif charts and isinstance(a, MergedAnalysis):
        lines += ["No timeline chart for the ranks of a job: their busy time is merged as "
                  "totals, not over time (a report of one rank has it).", ""]  # fmt: skip
    if any(f.config for f in findings):
        lines += [
            "## Running the reference configs",
            "",
            "GEMM scripts: `python FILE.py --check --bench` on the GPU (`--m --n --k` for "
            "another size, re-planned; `--tune` to search the knobs on your GPU; "
            "`TRITON_INTERPRET=1 ... --check` on a CPU); grid-stride scripts: `--check "
            "--bench`; launch scripts: `python FILE.py`; notes (`.md`): read them. See "
            "docs/configs.md.",
            "",
        ]
    lines += ["Every number is defined in docs/metrics.md; times are device time.", ""]
    return "\n".join(lines)


def diff_report(result: GateResult, base: Analysis, cand: Analysis) -> str:
    """Comparison report of two traces: the gate verdict and both summaries."""
    lines = [f"# advisor comparison: {base.trace.short_name()} -> "
             f"{cand.trace.short_name()}", ""]  # fmt: skip
    lines += gate_render.markdown(result).replace("### ", "## ", 1).splitlines() + [""]
    lines += ["## Baseline summary", ""] + _summary(base)
    lines += ["## Candidate summary", ""] + _summary(cand)
    return "\n".join(lines)
