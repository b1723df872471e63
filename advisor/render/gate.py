"""Renderers for a gate verdict: terminal table, pull-request markdown, JSON, GitHub
Actions annotations. Regressions first; unchanged rows only counted."""

from rich.console import Console

from advisor.gating import GateResult, GateStatus, Row
from advisor.gating.compare import FAILING
from advisor.gating.compare import fmt_value as _fmt
from advisor.gating.config import COUNTS
from advisor.render.fit import Col, fitted_table, print_wrapped
from advisor.render.json import json_text
from advisor.units import fmt_ns

ORDER = {GateStatus.REGRESSION: 0, GateStatus.NEW_FINDING: 1, GateStatus.IMPROVEMENT: 2,
         GateStatus.NOT_SIGNIFICANT: 3, GateStatus.ONLY_IN_BASELINE: 4,
         GateStatus.ONLY_IN_CANDIDATE: 5, GateStatus.UNCHANGED: 6}  # fmt: skip
ONE_SIDE = (GateStatus.ONLY_IN_BASELINE, GateStatus.ONLY_IN_CANDIDATE)


def change_text(r: Row) -> str:
    """How much a row moved: ``+3.79 us (+6.9%)``, ``+8 (+16.0%)``, ``+1.5 pts``; ``-``."""
    if r.delta is None:
        return "-"
    rel = f" ({r.delta / r.baseline:+.1%})" if r.baseline else ""
    if r.metric == "overlap_ratio":
        return f"{r.delta * 100:+.1f} pts"
    if r.metric in COUNTS:
        return f"{r.delta:+g}{rel}"
    sign = "+" if r.delta >= 0 else "-"
    return f"{sign}{fmt_ns(abs(r.delta))}{rel}"


def test_label(r: Row) -> str:
    """Which test decided a row, short: ``rank 29v29`` (instances), ``rank 3v3 traces``,
    ``count`` (exact), ``tolerance`` (one value per side)."""
    nb, nc = r.samples
    return {
        "count": "count",
        "instances": f"rank {nb}v{nc}",
        "traces": f"rank {nb}v{nc} traces",
        "values": f"rank {nb}v{nc} traces",
        "tolerance": "tolerance",
    }.get(r.test_kind, r.test_kind)


def test_numbers(r: Row) -> str:
    """The test in words with its numbers: interval, p-value, tolerance."""
    parts = [r.test]
    if r.ci is not None:
        lo, hi = r.ci
        shown = (
            f"x{lo:.3f} to x{hi:.3f}"
            if r.ci_kind == "ratio"
            else f"{_fmt(r.metric, lo)} to {_fmt(r.metric, hi)}"
        )
        parts.append(f"interval {shown}")
    if r.p is not None:
        parts.append(f"p={r.p:.3f}" if r.p >= 0.001 else "p<0.001")
    if r.tolerance is not None:
        parts.append(f"tolerance {_fmt(r.metric, r.tolerance)}")
    return "; ".join(parts)


def why(r: Row) -> str:
    """What moved and the candidate findings that explain it."""
    text = r.cause
    if r.explained_by:
        text += "; explained by " + "; ".join(r.explained_by)
    return text


def _what(r: Row) -> str:
    return "all (steady state)" if r.scope == "overall" else f"{r.scope} {r.key}"


def impact_ns(r: Row) -> float:
    """How much time a row moves (ns): |candidate - baseline| for time metrics, a new
    finding's estimated savings; 0 for ratios and rows present on one side only."""
    if r.metric == "overlap_ratio":
        return 0.0
    if r.status == GateStatus.NEW_FINDING:
        return abs(r.candidate or 0.0)
    return abs(r.delta) if r.delta is not None else 0.0


def shown(result: GateResult) -> list[Row]:
    """The changed rows: regressions first, then by the time they move, largest first."""
    rows = [r for r in result.rows if r.status != GateStatus.UNCHANGED]
    return sorted(rows, key=lambda r: (ORDER[r.status], -impact_ns(r), r.scope, r.key, r.metric))


def verdict(result: GateResult) -> str:
    n = sum(r.status in FAILING for r in result.rows)
    if result.failed:
        return f"FAIL: {n} regression(s)"
    return f"PASS: no regression ({len(result.rows)} metric(s) compared)"


# What a row is about and how much it changed are always shown; when narrow, the test is
# left out first, then baseline and candidate together, then the metric (it then joins the
# what cell), then the status (the verdict and the "Why:" lines still name each regression).
GATE_COLUMNS = (
    Col("what", text=True, wrap=True, min=20, identifies=True),
    Col("metric", text=True, min=18, drop=4, identifies=True, fold=True),
    Col("baseline", drop=5),
    Col("candidate", drop=5),
    Col("change"),
    Col("status", text=True, min=17, drop=3),
    Col("test", text=True, min=10, drop=7),
)


def table(result: GateResult, console: Console, top: int) -> None:
    """The verdict, the changed rows as a table that fits the console (GATE_COLUMNS) and
    why each regression happened; prose wrapped with numbers kept whole."""
    print_wrapped(console, verdict(result), "bold red" if result.failed else "bold green")
    print_wrapped(console, f"method: {result.method}")
    for note in result.notes:
        print_wrapped(console, f"note: {note}", "yellow", hanging="  ")
    rows = shown(result)
    if not rows:  # nothing moved beyond its threshold: the verdict says it all
        return
    cells = [
        (_what(r), r.metric, _fmt(r.metric, r.baseline), _fmt(r.metric, r.candidate),
         change_text(r), r.status, test_label(r))
        for r in rows[:top]
    ]  # fmt: skip
    console.print(fitted_table("Changes (unchanged metrics omitted)", GATE_COLUMNS, cells,
                               console.width))  # fmt: skip
    failing = [r for r in rows[:top] if r.status in FAILING]
    if failing:
        console.print("Why:", style="bold")
        for r in failing:
            print_wrapped(console, f"- {_what(r)} {r.metric}: {why(r)}", hanging="  ")
            if r.status == GateStatus.REGRESSION:
                print_wrapped(console, f"test: {test_numbers(r)}", indent="  ", hanging="    ")
    unchanged = sum(r.status == GateStatus.UNCHANGED for r in result.rows)
    print_wrapped(
        console, f"{unchanged} metric(s) unchanged; {len(rows)} listed above (first {top})."
    )


def markdown(result: GateResult, top: int = 50) -> str:
    lines = [f"### advisor gate: {verdict(result)}", "", f"Method: {result.method}.", ""]
    if result.notes:
        lines += [f"- note: {n}" for n in result.notes] + [""]
    if not shown(result):
        return "\n".join(lines) + "\n"
    lines += [
        "| status | what | metric | baseline | candidate | change | test | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in shown(result)[:top]:
        test = test_numbers(r) if r.test_kind != "new finding" else "new finding"
        cells = [r.status, _what(r), r.metric, _fmt(r.metric, r.baseline),
                 _fmt(r.metric, r.candidate), change_text(r), test, why(r)]  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    unchanged = sum(r.status == GateStatus.UNCHANGED for r in result.rows)
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
                      candidate=r.candidate, status=r.status, detail=r.detail, test=r.test,
                      test_kind=r.test_kind, samples=list(r.samples), p=r.p,
                      ci=list(r.ci) if r.ci else None, ci_kind=r.ci_kind or None,
                      tolerance=r.tolerance, cause=r.cause, explained_by=r.explained_by)
                 for r in shown(result)],
        "unchanged": sum(r.status == GateStatus.UNCHANGED for r in result.rows),
    })  # fmt: skip


def annotations(result: GateResult) -> str:
    """GitHub Actions workflow commands: ::error:: per regression, ::warning:: for the rest
    of the notable changes."""
    out = []
    for r in shown(result):
        if r.status in FAILING:
            level = "error"
        elif r.status == GateStatus.NOT_SIGNIFICANT or r.status in ONE_SIDE:
            level = "warning"
        else:
            continue
        if r.status in ONE_SIDE:  # nothing to compare: say what is missing
            msg = f"advisor gate: {r.scope} {r.key} is {r.status}"
        else:
            msg = (
                f"advisor gate {r.status}: {_what(r)} {r.metric} "
                f"{_fmt(r.metric, r.baseline)} -> {_fmt(r.metric, r.candidate)}"
                + (f" ({why(r)})" if r.cause else "")
            )
        out.append(f"::{level}::{msg.replace(chr(10), ' ')}")
    return "\n".join(out)


NOISE_COLUMNS = (
    Col("metric", text=True, min=12, identifies=True),
    Col("keys"),
    Col("spread"),
    Col("where", text=True, min=12, drop=1),
    Col("tolerance written", text=True, min=12),
)


def noise_table(noise, console: Console) -> None:
    """The measured run-to-run noise per metric (advisor gate --calibrate)."""
    from advisor.gating.config import COUNTS as counts

    cells = []
    for n in noise:
        if not n.keys:
            spread = "-"
        elif n.metric in counts or n.metric == "overlap_ratio":
            spread = f"{n.spread:g}"
        else:
            spread = f"{n.spread:.1%}"
        rel = n.rel if isinstance(n.rel, str) else f"{n.rel:g}"
        cells.append((n.metric, str(n.keys), spread, n.where, f"rel {rel}, abs {n.abs:g}"))
    spread = ("spread: the largest max/min - 1 between the runs' values, over the keys its abs "
              "does not cover")  # fmt: skip
    console.print(fitted_table("Run-to-run noise of the calibration traces (steady state)",
                               NOISE_COLUMNS, cells, console.width, caption=spread))  # fmt: skip
