"""advisor as a library: ``advisor.analyze`` and ``advisor.gate`` (docs/api.md).

The CLI is a thin layer over these two calls: ``advisor analyze`` renders the ``Result``
this module returns, in every format, so a notebook and the terminal show the same numbers
by construction (the tables below are built from the same JSON document
``--format json`` prints).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from advisor.analysis import Analysis
from advisor.errors import AdvisorInputError
from advisor.memory import paused_gc
from advisor.options import AnalysisOptions
from advisor.output_paths import check_output_dir
from advisor.rules.finding import Finding

if TYPE_CHECKING:  # (the gate loads only when a gate runs)
    from advisor.gating.compare import GateResult

TracePaths = str | PathLike | Sequence[str | PathLike]
# the steady idle by cause in the summary (docs/metrics.md, "Why the GPU waited"), then
# the start-up idle that the shares exclude
IDLE_CAUSES = {
    "launch_overhead": "launch_overhead_ns",
    "synchronization": "sync_idle_ns",
    "blocking_copy": "copy_idle_ns",
    "input_pipeline": "input_idle_ns",
    "host_busy": "host_busy_idle_ns",
    "queued_wait": "queued_idle_ns",
    "unattributed": "unattributed_idle_ns",
    "startup": "startup_idle_ns",
}
# the columns of ``Result.findings`` (the rest of each finding stays in ``Result.document``)
FINDING_COLUMNS = ("rule", "severity", "strategy", "title", "device", "kernel", "region",
                   "est_savings_ns", "confidence", "at_ns", "summary")  # fmt: skip


@dataclass(frozen=True)
class Result:
    """One analysis: the Analysis itself, its findings, the ranks (when several traces were
    read as one job) and the traces that could not be read. Every table is a view of
    ``document``, the content of ``advisor analyze --format json`` (docs/json.md)."""

    analysis: Analysis
    finding_list: list[Finding]
    ranks: list[dict] | None = None
    errors: list[str] = field(default_factory=list)

    @cached_property
    def document(self) -> dict:
        """The JSON document as Python values (schema in docs/json.md). Built with the
        garbage collector paused (memory.paused_gc: a dict per kernel group and range
        instance, none in a cycle; with it running, 400K kernel groups took 3.4-4.7 s
        instead of 2.1)."""
        from advisor.render import json as json_render

        with paused_gc():
            return json_render.document(self.analysis, self.finding_list, self.ranks)

    def to_json(self) -> str:
        """The document as ``advisor analyze --format json`` prints it."""
        from advisor.render import json as json_render

        return json_render.json_text(self.document)

    def to_json_bytes(self) -> bytes:
        """``to_json`` as UTF-8 bytes (no text copy of a large document)."""
        return b"".join(self.json_parts())

    def json_parts(self) -> Iterator[bytes]:
        """``to_json_bytes`` in consecutive pieces, each made when the next is asked for (what
        the command line spools and then writes): unless ``document`` was asked for, its long
        lists (kernel groups, range instances) are made into dicts a part at a time
        (render/json.document_parts)."""
        from advisor.render import json as json_render

        if "document" in self.__dict__:  # (the cached_property, already computed)
            yield json_render.json_bytes(self.document)
            return
        with paused_gc():
            yield from json_render.document_parts(self.analysis, self.finding_list, self.ranks)

    @property
    def summary(self) -> dict:
        """Where the GPU time went: window, busy, idle by cause, communication (ns)."""
        return self.document["summary"]

    @cached_property
    def findings(self) -> pd.DataFrame:
        """One row per finding, most important first (FINDING_COLUMNS; est_savings_ns and
        at_ns in ns)."""
        rows = self.document["findings"]
        return pd.DataFrame([{k: f[k] for k in FINDING_COLUMNS} for f in rows],
                            columns=list(FINDING_COLUMNS))  # fmt: skip

    @cached_property
    def kernels(self) -> pd.DataFrame:
        """One row per kernel group (name, launch configuration, device): launches, time,
        waves, tail and underfill idle (ns)."""
        return pd.DataFrame(self.document["kernels"])

    @cached_property
    def idle_by_cause(self) -> pd.DataFrame:
        """The idle time by cause (cause, idle_ns, share_of_steady): the steady causes, whose
        shares are of the steady time (window minus start-up idle), then the start-up."""
        s = self.summary
        steady = s["window_ns"] - s["startup_idle_ns"]
        rows = [{"cause": cause, "idle_ns": s[key],
                 "share_of_steady": (s[key] / steady if steady > 0 and cause != "startup"
                                     else None)}
                for cause, key in IDLE_CAUSES.items()]  # fmt: skip
        return pd.DataFrame(rows, columns=["cause", "idle_ns", "share_of_steady"])

    @cached_property
    def ranges(self) -> pd.DataFrame:
        """One row per top-level range (NVTX, record_function) and device: its GPU window,
        busy and idle by cause (ns)."""
        return pd.DataFrame(self.document["regions"])

    @cached_property
    def steps(self) -> pd.DataFrame:
        """One row per repeated top-level range (a step family) and device: per-step medians
        over the steady steps (ns) and the whole-step CUDA-graph saving."""
        return pd.DataFrame(self.document["steps"])

    @cached_property
    def copies(self) -> pd.DataFrame:
        """One row per kind of copy (direction, host memory, device): count, bytes, time."""
        return pd.DataFrame(self.document["copies"])

    def write_report(self, out: str | PathLike, assets: str | PathLike | None = None) -> list:
        """Write the markdown tuning report and its PNG charts (``assets``: their folder,
        default ``<out stem>_assets`` beside it); returns the paths written."""
        from advisor.report import write_report

        return write_report(self.analysis, self.finding_list, out, assets)

    def emit(self, folder: str | PathLike) -> Result:
        """Write a reference configuration per finding into ``folder``; returns the result
        whose findings name their configs."""
        check_output_dir(str(folder), self.analysis.trace.inputs, "emit folder")
        from advisor.configs.emit import emit_into  # (only when scripts are written)

        found = emit_into(self.finding_list, self.analysis.trace.gpus, str(folder))
        return replace(self, finding_list=found)


def options_for(
    gpu: str | None = None,
    gpu_spec: str | PathLike | None = None,
    rules: Sequence[str | PathLike] = (),
    shapes: Sequence[str] = (),
    gemms: Sequence[str] = (),
    range_text: str | None = None,
    device: int | None = None,
    emit: str | PathLike | None = None,
    jobs: int | None = None,
    dask: str | None = None,
    counters: str | PathLike | None = None,
) -> AnalysisOptions:
    """The CLI's options as keyword arguments (checked: AdvisorInputError names a bad one)."""
    return AnalysisOptions(
        gpu=gpu, gpu_spec=str(gpu_spec) if gpu_spec else None,
        rule_paths=tuple(str(r) for r in rules), shapes=tuple(shapes), gemms=tuple(gemms),
        range_text=range_text, device=device, emit_dir=str(emit) if emit else None, jobs=jobs,
        dask=dask, counters=str(counters) if counters else None,
    ).check()  # fmt: skip


def analyze(
    traces: TracePaths,
    *,
    progress: Callable[[str | None], None] | None = None,
    memory_advice: Callable[[int], None] | None = None,
    **options,
) -> Result:
    """Analyze one trace, or several as the ranks of one job (a folder of ``.sqlite``
    exports stands for them). ``options``: those of ``options_for`` (``gpu``, ``gpu_spec``,
    ``rules``, ``shapes``, ``gemms``, ``range_text``, ``device``, ``emit``, ``jobs``,
    ``dask``). ``progress`` is called with each stage's name (None at the end).

    Raises AdvisorInputError (its text names the file and what is wrong) on bad input."""
    from advisor import pipeline

    paths = expand_paths(traces)
    opts = options_for(**options)
    if opts.emit_dir:
        check_output_dir(opts.emit_dir, paths, "emit folder")
    rule_set = opts.rules()
    if opts.counters and (len(paths) > 1 or opts.dask):
        raise AdvisorInputError(None, "--counters joins one trace's kernels: give one trace "
                                      "(no --dask)")  # fmt: skip
    if len(paths) == 1 and not opts.dask:
        analysis, found = pipeline.run(paths[0], opts, rule_set, progress, memory_advice)
        result = Result(analysis, found)
    else:
        result = _ranks(paths, opts, rule_set, progress)
    return result.emit(opts.emit_dir) if opts.emit_dir else result


def analyze_each(traces: TracePaths, **options) -> tuple[list[Result], list[str]]:
    """Each trace analysed on its own (``advisor analyze --separate``): the results of those
    that could be read, in order, and one error line per trace that could not."""
    from advisor.errors import error_line

    results, errors = [], []
    for path in expand_paths(traces):
        try:
            results.append(analyze(path, **options))
        except AdvisorInputError as exc:
            errors.append(error_line(path, exc))
    return results, errors


def _ranks(paths: list[str], opts: AnalysisOptions, rule_set, progress) -> Result:
    """Several traces, one per rank, as one job (here with --jobs processes, or on Dask)."""
    from advisor.cluster import runner
    from advisor.multi import analyze_ranks

    step = progress or (lambda _: None)
    with runner(opts) as run:
        job = analyze_ranks(paths, opts, rule_set, step, run)
    return Result(job.analysis, job.findings, job.ranks if len(paths) > 1 else None, job.errors)


def expand_paths(traces: TracePaths) -> list[str]:
    """Trace paths as strings; a folder stands for the traces it holds (folder_traces)."""
    given = [traces] if isinstance(traces, str | PathLike) else list(traces)
    out: list[str] = []
    for t in given:
        p = Path(t)
        found = folder_traces(p) if p.is_dir() else []
        out += [str(f) for f in found] or [str(t)]
    return out


def folder_traces(folder: Path) -> list[Path]:
    """The traces of one job that ``folder`` holds, by name: its Nsight exports
    (``*.sqlite``); else, unless it is a rocprof output folder (CSVs, read as one trace),
    its PyTorch profiler or rocprofv3 JSON traces (``*.json``, ``*.json.gz``: one per rank,
    as each rank's profiler writes them). Empty: the folder is read as one trace."""
    found = sorted(folder.glob("*.sqlite"))
    if found or any(folder.glob("*.csv")) or any(folder.glob("*.csv.gz")):
        return found
    return sorted([*folder.glob("*.json"), *folder.glob("*.json.gz")])


def gate(
    candidates: TracePaths,
    baseline: TracePaths | None = None,
    *,
    baseline_name: str | None = None,
    store: str | PathLike | None = None,
    config: str | PathLike | None = None,
    **options,
) -> GateResult:
    """Compare candidate traces with baseline traces (or a baseline saved as
    ``baseline_name``): ``.failed`` is the verdict, ``.rows`` each metric's comparison
    (docs/gate.md). ``options``: gpu, gpu_spec, rules, dask as for ``analyze``."""
    from advisor.gating import load_config
    from advisor.gating.run import run_gate

    cfg = load_config(str(config) if config else None)
    opts = options_for(**options)
    base = expand_paths(baseline) if baseline is not None else None
    return run_gate(expand_paths(candidates), cfg, opts, base, baseline_name,
                    str(store) if store else None)  # fmt: skip


def gate_rows(result: GateResult) -> pd.DataFrame:
    """A gate result's rows as a table (scope, key, metric, baseline, candidate, status,
    detail, test)."""
    cols = ["scope", "key", "metric", "baseline", "candidate", "status", "detail", "test"]
    return pd.DataFrame([{c: getattr(r, c) for c in cols} for r in result.rows], columns=cols)
