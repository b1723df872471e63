"""Command line: parse options, call the library, pick a renderer, set the exit code.

Exit codes: 0 success, 2 bad input or usage (one line on stderr, no traceback).
"""

from __future__ import annotations

import os
import sys
from enum import Enum

import typer
from rich.console import Console
from rich.table import Table

from advisor import __version__
from advisor.analysis import analyze as run_analysis
from advisor.configs.emit import emit
from advisor.errors import AdvisorInputError
from advisor.findings import find
from advisor.metrics.gemm import ShapeOption
from advisor.render import json as json_render
from advisor.render import terminal
from advisor.rules.engine import load_rules
from advisor.trace.gpus import builtin_gpus
from advisor.trace.load import load_trace

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Measure scheduling idle time in GPU traces (wave tails, launch gaps, comm bubbles) "
    "and recommend strategies.",
)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


def _console() -> Console:
    """Rich console; piped or redirected without COLUMNS set: 160 columns, not 80."""
    console = Console()
    if console.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return console
    return Console(width=160)


def _fail(exc: AdvisorInputError) -> None:
    typer.echo(f"advisor: error: {exc}", err=True)
    raise typer.Exit(2)


@app.command()
def analyze(
    trace: str = typer.Argument(
        ..., help="Nsight Systems SQLite export (nsys export --type sqlite)."
    ),
    format: OutputFormat = typer.Option(
        OutputFormat.table, "--format", "-f", help="Output format."
    ),
    gpu: str = typer.Option(
        None,
        "--gpu",
        help="GPU model when the trace lacks device facts (see `advisor gpus`); "
        "'none' skips occupancy/wave metrics.",
    ),
    range_text: str = typer.Option(
        None, "--range", help="Only top-level NVTX ranges whose text contains TEXT."
    ),
    device: int = typer.Option(None, "--device", help="Only this device id."),
    top: int = typer.Option(10, "--top", min=1, help="Rows per table in the terminal report."),
    rules: list[str] = typer.Option(
        None, "--rules", help="Extra rule file or folder (repeatable), added to the built-in."
    ),
    shape: list[str] = typer.Option(
        None,
        "--shape",
        help="GEMM shape PATTERN=MxNxK (repeatable); PATTERN: regex on kernel or range name.",
    ),
    emit_dir: str = typer.Option(
        None, "--emit", help="Write a reference config per finding into this folder."
    ),
) -> None:
    """Analyze one trace: idle time by cause, per kernel and per NVTX range, with findings."""
    try:
        rule_set = load_rules(rules or [])
        shapes = [ShapeOption.parse(s) for s in shape or []]
        loaded = load_trace(trace, gpu=gpu)
        result = run_analysis(loaded, shapes)
        if device is not None and device not in loaded.devices:
            raise AdvisorInputError(
                trace,
                f"--device {device}: no GPU work on that device (devices: "
                f"{', '.join(map(str, loaded.devices))})",
            )
        result = result.select(range_text, device)
        if range_text and result.regions.empty:
            raise AdvisorInputError(
                trace, f"--range {range_text!r}: no top-level NVTX range matches"
            )
        findings = find(result, rule_set)
        if emit_dir:
            emit(findings, loaded.gpus, emit_dir)
    except AdvisorInputError as exc:
        _fail(exc)
    if format is OutputFormat.json:
        sys.stdout.write(json_render.render(result, findings) + "\n")
    else:
        terminal.render(result, findings, _console(), top=top)


rules_app = typer.Typer(help="List and validate rule files (the YAML symptom matrix).")
app.add_typer(rules_app, name="rules")


@rules_app.command("list")
def rules_list(
    rules: list[str] = typer.Option(None, "--rules", help="Extra rule file or folder."),
) -> None:
    """List the rules in force: id, scope, strategy, title, file."""
    try:
        rule_set = load_rules(rules or [])
    except AdvisorInputError as exc:
        _fail(exc)
    tab = Table(title=f"{len(rule_set)} rules", title_justify="left")
    for col in ("id", "scope", "strategy", "title", "file"):
        tab.add_column(col)
    for r in rule_set:
        tab.add_row(r.id, r.spec.scope, r.spec.strategy, r.spec.title, r.source)
    _console().print(tab)


@rules_app.command("validate")
def rules_validate(
    paths: list[str] = typer.Argument(..., help="Rule files or folders to check."),
) -> None:
    """Check rule files (with the built-in rules, for duplicate ids); exit 2 on a problem."""
    try:
        rule_set = load_rules(paths)
    except AdvisorInputError as exc:
        _fail(exc)
    users = [r for r in rule_set if not r.source.startswith("rules/")]
    typer.echo(f"ok: {len(users)} rule(s) in {', '.join(paths)} are valid")


@app.command()
def gpus() -> None:
    """List the built-in GPU spec table (values for --gpu)."""
    tab = Table(title="Built-in GPU facts (used when a trace has none)", title_justify="left")
    for col in ("name", "SMs/CUs", "cc/arch", "warps/SM", "blocks/SM", "regs/SM", "smem/SM (B)"):
        tab.add_column(col)
    for g in builtin_gpus():
        tab.add_row(
            g.name,
            str(g.sm_count),
            g.compute_capability,
            str(g.max_warps_per_sm),
            str(g.max_blocks_per_sm),
            str(g.registers_per_sm),
            str(g.shared_mem_per_sm),
        )
    _console().print(tab)


@app.command()
def version() -> None:
    """Print the advisor version."""
    typer.echo(__version__)


def main() -> None:
    app()
