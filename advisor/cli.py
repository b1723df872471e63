"""Command line: parse options, call the library, pick a renderer, set the exit code.

Exit codes: 0 success, 2 bad input or usage (one line on stderr, no traceback).
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from contextlib import contextmanager, suppress
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import typer

from advisor import __version__, api, cli_options, staged
from advisor.errors import AdvisorInputError, NoTraceRead
from advisor.memory import advise_for_rows
from advisor.options import AnalysisOptions
from advisor.output_paths import check_output_dir, check_output_file, silence_stdout
from advisor.render.progress import progress_bar
from advisor.rules.engine import load_rules
from advisor.trace.gpus import builtin_gpus

if TYPE_CHECKING:
    from rich.console import Console

cli_options.install_help_style()

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Measure scheduling idle time in GPU traces (wave tails, launch gaps, comm bubbles) "
    "and recommend strategies.",
)


def _show_version(value: bool) -> None:
    if value:
        _out(f"advisor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_show_version, help="Print the version."
    ),
) -> None:
    """Measure scheduling idle time in GPU traces (wave tails, launch gaps, comm bubbles) and
    recommend strategies."""


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


def _out(text: str) -> None:
    """One block of output on stdout. A reader that stops early (e.g. `| head`) silences
    the rest instead of ending the command, whose exit code still tells its result."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()


def _out_bytes(parts: Iterable[bytes]) -> None:
    """``_out`` of UTF-8 bytes made in pieces (a JSON document): spooled whole first
    (staged.spooled: its bytes are not all held in memory, and a failure making a piece
    writes nothing), then copied to stdout's binary buffer where it has one (no text copy)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # (a text-only stream, e.g. a test's capture)
        _out(b"".join(parts).decode())
        return
    with staged.spooled(parts) as whole:
        try:
            sys.stdout.flush()  # (what was written as text comes first)
            shutil.copyfileobj(whole, buffer)
            buffer.write(b"\n")
            buffer.flush()
        except BrokenPipeError:
            silence_stdout()


def _console() -> Console:
    """The console tables are printed on (render/console.py; rich loads here, not for
    commands that print JSON or markdown)."""
    from advisor.render.console import stdout_console

    return stdout_console()


def _errors(lines: list, end: bool = True) -> None:
    """One ``advisor: error:`` line on stderr per item; with ``end`` (and any item) the
    command ends with exit 2."""
    for line in lines:
        typer.echo(f"advisor: error: {line}", err=True)
    if end and lines:
        raise typer.Exit(2)


@contextmanager
def _input_errors():
    """Run the block; bad input inside it ends the command: one error line per trace that
    could not be read when none could (NoTraceRead), else the one AdvisorInputError line;
    exit 2."""
    try:
        yield
    except NoTraceRead as exc:
        _errors(exc.errors)
    except AdvisorInputError as exc:
        _errors([exc])


@app.command()
def analyze(
    traces: list[str] = typer.Argument(
        ...,
        metavar="TRACE",
        help="Trace file(s): Nsight Systems export (.sqlite, or .nsys-rep with nsys on PATH), "
        "PyTorch profiler (Kineto) JSON (.json/.json.gz), rocprofv3 rocpd database, rocprof "
        "CSV/JSON or folder, Nsight Compute report (.ncu-rep with ncu on PATH, or its raw "
        "page CSV) or AMD counters (rocprofv3 counter_collection.csv, rocprof-compute "
        "pmc_perf.csv): kernels and counters, no timeline. Several traces (or a folder of "
        ".sqlite exports) are analysed as the ranks of one job.",
    ),
    format: OutputFormat = typer.Option(
        OutputFormat.table, "--format", "-f", help="Output format."
    ),
    gpu: str = cli_options.GPU,
    gpu_spec: str = cli_options.GPU_SPEC,
    range_text: str = typer.Option(
        None, "--range", metavar="TEXT", help="Only top-level NVTX ranges whose text contains TEXT."
    ),
    device: int = typer.Option(None, "--device", metavar="N", help="Only this device id."),
    top: int = cli_options.top(10, "Rows per table in the terminal report."),
    rules: list[str] = cli_options.RULES,
    shape: list[str] = cli_options.SHAPE,
    gemm: list[str] = cli_options.GEMM,
    emit_dir: str = cli_options.EMIT,
    jobs: int = typer.Option(
        None,
        "--jobs",
        "-j",
        metavar="N",
        min=1,
        help="Worker processes for several traces (default: cores).",
    ),
    dask: str = cli_options.DASK,
    separate: bool = typer.Option(
        False,
        "--separate",
        help="Several traces: analyse each on its own (not as the ranks of one job).",
    ),
    counters: str = cli_options.COUNTERS,
) -> None:
    """Analyze traces: idle time by cause, per kernel and per NVTX range, with findings.

    Several traces are the ranks of one job (refused if they cannot be); --separate: each alone."""
    paths = api.expand_paths(traces)
    options = _AnalyzeOptions(gpu=gpu, gpu_spec=gpu_spec, rules=rules or (), shapes=shape or (),
                              gemms=gemm or (), range_text=range_text, device=device,
                              emit=emit_dir, jobs=jobs, dask=dask, counters=counters)  # fmt: skip
    with _input_errors():
        api.options_for(**options)  # bad options fail here, before any trace is read
        if separate and (emit_dir or dask or counters):
            raise AdvisorInputError(None, "--separate takes no --emit, --dask or --counters: "
                                          "run one trace at a time for those")  # fmt: skip
    if separate:
        _analyze_each(paths, options, format, top)
        return
    with _input_errors():
        if len(paths) == 1 and not dask:
            with progress_bar(3, f"reading {Path(paths[0]).name}") as bar:
                result = api.analyze(paths, progress=bar.advance, memory_advice=advise_for_rows,
                                     **options)  # fmt: skip
        else:
            n = len(paths)
            where = f" on {dask}" if dask else ""
            with progress_bar(n + 1, f"analysing {n} traces{where}") as bar:
                result = api.analyze(paths, progress=_rank_steps(bar, n, where), **options)
                bar.advance(None)
    if format is OutputFormat.json:
        _out_bytes(result.json_parts())
    else:
        from advisor.render import terminal

        terminal.render(result.analysis, result.finding_list, _console(), top=top,
                        ranks=result.ranks)  # fmt: skip
    _errors(result.errors)  # the traces that could not be read, after the others' report


class _AnalyzeOptions(TypedDict):
    """``analyze``'s options, as api.options_for (and api.analyze) take them."""

    gpu: str | None
    gpu_spec: str | None
    rules: Sequence[str]
    shapes: Sequence[str]
    gemms: Sequence[str]
    range_text: str | None
    device: int | None
    emit: str | None
    jobs: int | None
    dask: str | None
    counters: str | None


def _analyze_each(
    paths: list[str], options: _AnalyzeOptions, format: OutputFormat, top: int
) -> None:
    """--separate: each trace on its own; JSON: a list of documents, one per trace read;
    the traces that could not be read: one error line each, exit 2 at the end."""
    with progress_bar(len(paths), f"analysing {len(paths)} traces one by one") as bar:
        results, errors = api.analyze_each(paths, **options)
        bar.advance(None)
    if format is OutputFormat.json:
        _out("[" + ",\n".join(r.to_json() for r in results) + "]")
    else:
        from advisor.render import terminal

        console = _console()
        for r in results:
            console.rule(f"[bold]{r.analysis.trace.path}")
            terminal.render(r.analysis, r.finding_list, console, top=top)
    _errors(errors)


def _rank_steps(bar, n: int, where: str):
    """The progress callback for ``n`` ranks: one step per trace analysed, then merging."""
    done = iter(range(1, n + 1))

    def read(_) -> None:
        i = next(done)
        bar.advance(f"{i}/{n} traces analysed{where}" if i < n else "merging the ranks")

    return read


rules_app = typer.Typer(help="List and validate rule files (the YAML symptom matrix).")
app.add_typer(rules_app, name="rules")


@rules_app.command("list")
def rules_list(
    rules: list[str] = cli_options.RULES,
) -> None:
    """List the rules in force: id, scope, strategy, title, file."""
    with _input_errors():
        rule_set = load_rules(rules or [])
    from advisor.render.tables import rule_listing

    console = _console()
    console.print(rule_listing(rule_set, console.width))


@rules_app.command("validate")
def rules_validate(
    paths: list[str] = typer.Argument(..., help="Rule files or folders to check."),
) -> None:
    """Check rule files (with the built-in rules, for duplicate ids); exit 2 on a problem."""
    with _input_errors():
        rule_set = load_rules(paths)
    users = [r for r in rule_set if not r.source.startswith("rules/")]
    _out(f"ok: {len(users)} rule(s) in {', '.join(paths)} are valid")


@app.command()
def gpus() -> None:
    """List the built-in GPU spec table (values for --gpu)."""
    from advisor.render.tables import gpu_listing

    console = _console()
    console.print(gpu_listing([g.to_dict() for g in builtin_gpus()], console.width))


@app.command()
def version() -> None:
    """Print the advisor version."""
    _out(__version__)


class GateFormat(str, Enum):
    table = "table"
    markdown = "markdown"
    json = "json"


@app.command()
def gate(
    baseline: list[str] = typer.Option(
        None, "--baseline", metavar="TRACE", help="Baseline trace (repeatable)."
    ),
    candidate: list[str] = typer.Option(
        None, "--candidate", metavar="TRACE", help="Candidate trace (repeatable)."
    ),
    calibrate: list[str] = typer.Option(
        None,
        "--calibrate",
        metavar="TRACE",
        help="Runs of unchanged code (3+): measure their noise, write thresholds (-o).",
    ),
    output: str = typer.Option(
        "gate.yaml", "--output", "-o", metavar="FILE", help="Where --calibrate writes."
    ),
    baseline_name: str = typer.Option(
        None,
        "--baseline-name",
        metavar="NAME",
        help="Use a baseline saved with `advisor baseline save`.",
    ),
    store: str = cli_options.STORE,
    config: str = typer.Option(
        None, "--config", metavar="FILE", help="Gate thresholds (YAML), docs/gate.md."
    ),
    format: GateFormat = typer.Option(
        GateFormat.table,
        "--format",
        "-f",
        help="Output: terminal table, markdown (for a pull-request comment) or JSON.",
    ),
    gpu: str = cli_options.GPU,
    gpu_spec: str = cli_options.GPU_SPEC,
    rules: list[str] = cli_options.RULES,
    top: int = cli_options.top(30, "Rows in the table/markdown."),
    dask: str = cli_options.DASK,
) -> None:
    """Compare candidate traces with a baseline: exit 0 pass, 1 regression, 2 bad input.
    With --calibrate: measure the noise of repeated unchanged runs into a gate.yaml."""
    from advisor.gating import load_config as load_gate_config
    from advisor.gating.run import run_gate
    from advisor.render import gate as gate_render

    with _input_errors():
        cfg = load_gate_config(config)
        options = AnalysisOptions(
            gpu=gpu, gpu_spec=gpu_spec, rule_paths=tuple(rules or ()), dask=dask
        ).check()
    if calibrate:
        _calibrate(calibrate, output, cfg, options)
        return
    with _input_errors():
        result = run_gate(candidate, cfg, options, baseline, baseline_name, store, advise_for_rows)
    if format is GateFormat.json:
        _out(gate_render.as_json(result))
    elif format is GateFormat.markdown:
        _out(gate_render.markdown(result, top))
    else:
        gate_render.table(result, _console(), top)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        # workflow commands go to stderr: GitHub reads both streams, and stdout (or the file
        # it is redirected to, the pull-request comment) stays the report alone
        notes = gate_render.annotations(result)
        if notes:
            typer.echo(notes, err=True)
    raise typer.Exit(1 if result.failed else 0)


def _calibrate(traces, output, cfg, options: AnalysisOptions) -> None:
    """gate --calibrate: the noise table on stdout, the thresholds into ``output``."""
    from advisor.gating.calibrate import calibrate, calibration_warnings, config_yaml
    from advisor.gating.run import metric_sets
    from advisor.render import gate as gate_render
    from advisor.report import write_text

    with _input_errors():
        check_output_file(output, traces, "gate config")
        noise = calibrate(metric_sets(traces, options, advise_for_rows), cfg)
        written = write_text(config_yaml(noise, cfg, traces), output, "gate config")
    gate_render.noise_table(noise, _console())
    for line in calibration_warnings(traces):
        typer.echo(f"warning: {line}", err=True)
    _out(f"wrote {written}")


baseline_app = typer.Typer(help="Named baselines for `advisor gate --baseline-name`.")
app.add_typer(baseline_app, name="baseline")


@baseline_app.command("save")
def baseline_save(
    name: str = typer.Argument(..., help="Baseline name."),
    traces: list[str] = typer.Argument(..., help="Trace files of the baseline."),
    store: str = cli_options.STORE,
    gpu: str = cli_options.GPU,
    gpu_spec: str = cli_options.GPU_SPEC,
) -> None:
    """Analyze TRACES and store their metric sets under NAME (replacing an older NAME)."""
    from advisor import baselines
    from advisor.gating.run import metric_sets

    with _input_errors():
        if store:
            check_output_file(store, traces, "baseline store")
        sets = metric_sets(
            traces, AnalysisOptions(gpu=gpu, gpu_spec=gpu_spec).check(), advise_for_rows
        )
        path = baselines.save(name, sets, Path(store) if store else None)
    _out(f"saved baseline {name!r}: {len(sets)} trace(s) in {path}")


@baseline_app.command("list")
def baseline_list(
    store: str = cli_options.STORE,
) -> None:
    """List saved baselines: name, traces, when saved (UTC)."""
    from advisor import baselines

    with _input_errors():
        rows = baselines.listing(Path(store) if store else None)
    from advisor.render.tables import baseline_listing

    console = _console()
    title = f"baselines in {store or baselines.default_store()}"
    console.print(baseline_listing(rows, title, console.width))


@app.command()
def report(
    traces: list[str] = typer.Argument(..., help="TRACE, or BASELINE CANDIDATE for a diff."),
    output: str = typer.Option(
        ..., "--output", "-o", metavar="FILE", help="Markdown file to write."
    ),
    assets: str = typer.Option(None, "--assets", metavar="DIR", help="Folder for the PNG charts."),
    gpu: str = cli_options.GPU,
    gpu_spec: str = cli_options.GPU_SPEC,
    rules: list[str] = cli_options.RULES,
    shape: list[str] = cli_options.SHAPE,
    gemm: list[str] = cli_options.GEMM,
    emit_dir: str = cli_options.EMIT,
    config: str = typer.Option(
        None, "--config", metavar="FILE", help="Gate thresholds (diff reports)."
    ),
    dask: str = cli_options.DASK,
    counters: str = cli_options.COUNTERS,
) -> None:
    """Write a markdown tuning report with PNG charts (or, for two traces, a comparison)."""
    from advisor.gating import load_config as load_gate_config
    from advisor.gating.run import compare_two
    from advisor.render import markdown
    from advisor.report import write_text

    with _input_errors():
        if len(traces) not in (1, 2):
            raise AdvisorInputError(None, "report takes TRACE or BASELINE CANDIDATE")
        check_output_file(output, traces, "report")
        if assets:
            check_output_dir(assets, traces, "chart folder")
        if emit_dir:
            check_output_dir(emit_dir, traces, "emit folder")
        options = AnalysisOptions(
            gpu=gpu, gpu_spec=gpu_spec, rule_paths=tuple(rules or ()), shapes=tuple(shape or ()),
            gemms=tuple(gemm or ()), dask=dask,
        ).check()  # fmt: skip
        if len(traces) == 2 and counters:
            raise AdvisorInputError(None, "--counters joins one trace's kernels: a report of "
                                    "one TRACE takes it, not a comparison")  # fmt: skip
        if len(traces) == 2:
            baseline, candidate = traces
            compared, base, cand = compare_two(
                baseline, candidate, load_gate_config(config), options, advise_for_rows
            )
            written = [write_text(markdown.diff_report(compared, base, cand), output)]
        else:
            if dask:  # (its charts are drawn from every GPU op of the trace)
                typer.echo("advisor: note: a one-trace report is analysed here; --dask is "
                           "for BASELINE CANDIDATE", err=True)  # fmt: skip
            result = api.analyze(traces[0], memory_advice=advise_for_rows, gpu=gpu,
                                 gpu_spec=gpu_spec, rules=rules or (), shapes=shape or (),
                                 gemms=gemm or (), emit=emit_dir,
                                 counters=counters)  # fmt: skip
            written = result.write_report(output, assets)
    for path in written:
        _out(f"wrote {path}")


# options that take several values after one flag (`--baseline a b`), as well as repeated
MULTI_VALUE = {"gate": ("--baseline", "--candidate", "--calibrate")}


def _spread_values(argv: list[str]) -> list[str]:
    """``gate --baseline a b --candidate c`` -> ``--baseline a --baseline b --candidate c``
    (the commands in MULTI_VALUE take no positional arguments, so this is unambiguous)."""
    flags = MULTI_VALUE.get(argv[0], ()) if argv else ()
    out: list[str] = []
    current = None
    for token in argv:
        if token in flags:
            current = token
        elif token.startswith("-"):
            current = None
        elif current is not None and out and out[-1] != current:
            out.append(current)
        out.append(token)
    return out


def _click_errors() -> tuple[type[BaseException], ...]:
    """Click's usage-error classes: typer's own copy (typer >= 0.20 vendors click as
    typer._click), and click's where typer has none or click is loaded already (importing
    click only to name its class would cost every command ~6 ms)."""
    found: list[type[BaseException]] = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        if found and module.split(".")[0] not in sys.modules:
            continue
        with suppress(ImportError):
            found.append(__import__(module, fromlist=["ClickException"]).ClickException)
    return tuple(found)


def _run_app() -> int:
    """Run the typer app; a usage error (unknown option, missing argument, bad value)
    becomes one ``advisor: error:`` line and exit 2 instead of click's box."""
    errors = _click_errors()
    try:
        code = app(args=_spread_values(sys.argv[1:]), prog_name="advisor", standalone_mode=False)
    except errors as exc:
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":  # `advisor` or `advisor gate` alone
            typer.echo(ctx.get_help() if ctx else str(exc))
            return 0
        where = f"{ctx.command_path}: " if ctx else ""
        hint = f" (see `{ctx.command_path} --help`)" if ctx else ""
        # (a ClickException, of click or of typer's vendored copy: typed as BaseException here)
        message = exc.format_message()  # type: ignore[attr-defined]
        typer.echo(f"advisor: error: {where}{message}{hint}", err=True)
        return 2
    return code if isinstance(code, int) else 0


# write errors that say the output has no room (a full disk, quota or file size limit)
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def main() -> None:
    """Entry point. Bad input exits 2 with one line (raised as AdvisorInputError, or a usage
    error), and so does an output with no room left (stdout on a full disk); anything
    unexpected exits 3 with one line instead of a traceback (ADVISOR_DEBUG=1 shows it)."""
    try:
        sys.exit(_run_app())
    except KeyboardInterrupt:
        typer.echo("advisor: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:  # the reader of our output stopped (e.g. `| head`): not an error
        silence_stdout()
        sys.exit(0)
    except Exception as exc:  # a bug, not bad input: still one line, never a traceback
        if isinstance(exc, OSError) and exc.errno in _NO_ROOM:  # (the disk, not a bug)
            silence_stdout()  # (what is still buffered cannot be written either)
            where = f"{exc.filename}: " if exc.filename else "the output: "
            typer.echo(f"advisor: error: {where}cannot write: {exc.strerror}", err=True)
            sys.exit(2)
        if os.environ.get("ADVISOR_DEBUG"):
            raise
        command = " ".join(sys.argv[1:3])
        typer.echo(
            f"advisor: internal error in `advisor {command}`: {type(exc).__name__}: {exc} "
            "(a bug: please report it; ADVISOR_DEBUG=1 shows the traceback)",
            err=True,
        )
        sys.exit(3)


def entry() -> None:
    """Console entry point: ``main()``, then leave without tearing down the analysis (on a
    million-kernel trace Python spends a noticeable part of a second freeing tables the OS
    frees at once; docs/scaling.md).
    Output is flushed first; the exit code is main's."""
    code = 0
    try:
        main()
    except SystemExit as exc:
        if isinstance(exc.code, str):
            sys.stderr.write(exc.code + "\n")
            code = 1
        else:
            code = exc.code or 0
    for stream in (sys.stdout, sys.stderr):
        with suppress(BrokenPipeError):  # the reader stopped (e.g. `| head`): not an error
            stream.flush()
    os._exit(code)
