"""One call from trace paths to an analysis and its findings (shared by every command)."""

from __future__ import annotations

from collections.abc import Callable

from advisor.analysis import TraceAnalysis, analyze, check_device, check_range
from advisor.findings import find_on_device
from advisor.memory import paused_gc
from advisor.options import AnalysisOptions
from advisor.rules.engine import Rule
from advisor.rules.finding import Finding
from advisor.trace.counters import join_counters
from advisor.trace.load import expected_rows, load_counters, load_trace
from advisor.trace.model import Trace

Step = Callable[[str | None], None]
# process memory policy, called with the rows a trace is expected to hold before its read
# (load.expected_rows: 0 where unknown) and with its table rows before its analysis (the
# console passes memory.advise_for_rows; the library sets no policy itself)
MemoryAdvice = Callable[[int], None]


def _no_advice(_: int) -> None:
    return None


def run(
    path: str,
    options: AnalysisOptions | None = None,
    rules: list[Rule] | None = None,
    step: Step | None = None,
    memory_advice: MemoryAdvice | None = None,
) -> tuple[TraceAnalysis, list[Finding]]:
    """Load ``path`` (with the options' --counters joined to its kernels), analyze it with
    ``options`` (--gpu, --shape, --gemm), narrow it to the options' range/device
    (TraceAnalysis.select) and apply ``rules`` (default: the options' rules). ``step`` is called
    after each stage with the name of the next one (None at the end), for progress display;
    ``memory_advice``: see MemoryAdvice. The garbage collector is paused meanwhile
    (memory.paused_gc).

    Raises AdvisorInputError when the device ran no GPU work or the range matches no
    top-level NVTX range.
    """
    options = options or AnalysisOptions()
    if memory_advice is not None:
        # (a trace of millions of rows: the heap policy before the read allocates its
        # columns, so that what the read frees is reused rather than faulted in again later)
        memory_advice(expected_rows(path))
    with paused_gc():  # (memory.paused_gc: short-lived objects, few cycles)
        trace = load_trace(path, gpu=options.gpu_override, lean=True)
        if options.counters:
            join_counters(trace, load_counters(options.counters), options.counters)
        return run_trace(trace, options, rules, step, memory_advice)


def run_trace(
    trace: Trace,
    options: AnalysisOptions | None = None,
    rules: list[Rule] | None = None,
    step: Step | None = None,
    memory_advice: MemoryAdvice | None = None,
) -> tuple[TraceAnalysis, list[Finding]]:
    """``run`` for a Trace already read (one file, or the ranks of a job merged into one),
    the garbage collector paused meanwhile (memory.paused_gc)."""
    options = options or AnalysisOptions()
    step = step or (lambda _: None)
    with paused_gc():
        step("computing metrics")
        a = analysis_of(trace, options, memory_advice)
        step("applying rules")
        check_device(trace, options.device)
        whole = a.select(options.range_text, None)  # (every device: see find_on_device)
        check_range(whole, options.range_text)
        findings = find_on_device(whole, options.device,
                                  options.rules() if rules is None else rules)  # fmt: skip
        if options.device is not None:
            whole = a.select(options.range_text, options.device)
    step(None)
    return whole, findings


def analysis_of(
    trace: Trace,
    options: AnalysisOptions,
    memory_advice: MemoryAdvice | None = None,
    cores: int | None = None,
) -> TraceAnalysis:
    """Every metric of a Trace read for this analysis alone (its API rows are released once
    used), with the options' --shape and --gemm; unselected, no rules (``run_trace`` goes
    on from here; a rank of a job, parts.rank_part, too). ``cores``: the threads it may use
    (analysis.analyze)."""
    (memory_advice or _no_advice)(sum(len(t) for t in (trace.kernels, trace.memcpy, trace.memset)))
    return analyze(trace, options.shape_options, release_api=True, gemms=options.gemm_options,
                   cores=cores)  # fmt: skip
