"""Command-line options shared by several commands, each defined once (flag, metavar, help),
as sqlite-utils defines its shared option decorators; and the one change advisor makes to
typer's help output, installed by the CLI when it builds its app (``install_help_style``)."""

from __future__ import annotations

from typing import Any

import typer
import typer.core

GPU = typer.Option(
    None,
    "--gpu",
    metavar="NAME",
    help="GPU model when the trace lacks device facts (see `advisor gpus`); "
    "'none' skips occupancy/wave metrics.",
)
GPU_SPEC = typer.Option(
    None, "--gpu-spec", metavar="FILE", help="GPU facts from a YAML file (docs/metrics.md)."
)
RULES = typer.Option(
    None,
    "--rules",
    metavar="PATH",
    help="Extra rule file or folder (repeatable), added to the built-in.",
)
SHAPE = typer.Option(
    None,
    "--shape",
    metavar="PATTERN=MxNxK",
    help="GEMM shape PATTERN=MxNxK (repeatable); PATTERN: regex on kernel or range name.",
)
COUNTERS = typer.Option(
    None,
    "--counters",
    metavar="FILE",
    help="Hardware counters joined to the trace's kernels: an Nsight Compute report "
    "(.ncu-rep, with ncu on PATH) or its raw page CSV, a rocprofv3 counter_collection.csv "
    "or rocpd database with counters, or a rocprof-compute pmc_perf.csv (docs/metrics.md).",
)
GEMM = typer.Option(
    None,
    "--gemm",
    metavar="PATTERN",
    help="Kernels whose name or range matches the regex PATTERN are GEMMs (repeatable; "
    "confirms a structural guess when the trace does not say).",
)
EMIT = typer.Option(
    None, "--emit", metavar="DIR", help="Write a reference config per finding into this folder."
)
STORE = typer.Option(None, "--store", metavar="FILE", help="Baseline store (SQLite) to use.")
DASK = typer.Option(
    None,
    "--dask",
    metavar="ADDRESS",
    help="Analyse the traces on a Dask cluster: its scheduler (tcp://host:port, or tls://host:port "
    "with Dask's TLS settings), or 'local' for one started here on loopback; workers read the "
    "traces by path (docs/scaling.md, docs/dask_security.md).",
)


def top(default: int, help: str) -> Any:
    """--top N (N >= 1) with the command's own default and what a row is. (Any, as
    typer.Option declares its own result: the parameter default of an ``int`` parameter.)"""
    return typer.Option(default, "--top", metavar="N", min=1, help=help)


def install_help_style() -> None:
    """Help shows each parameter's METAVAR (set on every option), not typer's Python-type
    column (``<list[str]>``, ``<bool>``); flags and arguments show no type at all. Changes
    typer's rich help hook where the installed typer has it (once; a no-op elsewhere)."""
    for param in (typer.core.TyperArgument, typer.core.TyperOption):
        original = getattr(param, "display_type_rich", None)
        if original is None or getattr(original, "_advisor_style", False):
            continue

        def display_type_rich(self, ctx, _original=original):
            if isinstance(self, typer.core.TyperArgument) or getattr(self, "is_flag", False):
                return None
            return self.metavar or _original(self, ctx)

        display_type_rich._advisor_style = True  # type: ignore[attr-defined]
        param.display_type_rich = display_type_rich  # type: ignore[method-assign]
