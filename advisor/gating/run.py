"""The gate's library entry points: traces -> metric sets, a gate run (baseline traces or a
saved baseline against candidates) and the comparison of two traces. The CLI only parses
options and renders what these return."""

from __future__ import annotations

from pathlib import Path

from advisor import pipeline
from advisor.analysis import Analysis, TraceAnalysis
from advisor.cluster import runner
from advisor.errors import AdvisorInputError
from advisor.findings import find
from advisor.gating.compare import GateResult, compare
from advisor.gating.config import GateConfig
from advisor.gating.digest import metric_set
from advisor.options import AnalysisOptions
from advisor.parts import RankPart, merge_parts
from advisor.pipeline import MemoryAdvice


def metric_sets(
    paths: list[str], options: AnalysisOptions, memory_advice: MemoryAdvice | None = None
) -> list[dict]:
    """The metric set of each trace as stored (MetricSet.to_dict: what ``advisor baseline
    save`` writes; each analysed on its own, with the options' rules; ``memory_advice``:
    pipeline.MemoryAdvice). With ``options.dask``, each trace's set is computed on the Dask
    cluster (only the sets travel)."""
    if options.dask:
        return _digests(_remote(paths, options))
    rule_set = options.rules()
    sets = []
    for path in paths:
        analysis, findings = pipeline.run(path, options, rule_set, None, memory_advice)
        sets.append(metric_set(analysis, findings).to_dict())
    return sets


def trace_digest(a: TraceAnalysis, options: AnalysisOptions) -> dict:
    """The metric set of one analysed trace with the options' rules, as stored (a rank
    task's extra)."""
    return metric_set(a, find(a, options.rules())).to_dict()


def _digests(parts: list[RankPart]) -> list[dict]:
    """The metric sets the parts carry (each was asked for one: trace_digest)."""
    return [p.extra for p in parts if p.extra is not None]


def _remote(paths: list[str], options: AnalysisOptions) -> list[RankPart]:
    """Each trace's part and metric set, computed on the options' Dask cluster; the first
    unreadable trace's error is raised (AdvisorInputError), after all have finished."""
    with runner(options) as run:
        parts = run.map(paths, options, extra=trace_digest)
    for p in parts:
        if p.error:
            raise AdvisorInputError(None, p.error)
    return parts


def run_gate(
    candidates: list[str],
    cfg: GateConfig,
    options: AnalysisOptions,
    baseline: list[str] | None = None,
    baseline_name: str | None = None,
    store: str | None = None,
    memory_advice: MemoryAdvice | None = None,
) -> GateResult:
    """Candidates against baseline traces or the baseline saved as ``baseline_name`` (in
    ``store``, default the user's store). AdvisorInputError on a usage mistake or bad input."""
    from advisor import baselines

    if not candidates:
        raise AdvisorInputError(None, "give --candidate TRACE... (or --calibrate TRACE...)")
    if bool(baseline) == bool(baseline_name):
        raise AdvisorInputError(None, "give --baseline TRACE... or --baseline-name NAME")
    if baseline_name:
        base = baselines.load(baseline_name, Path(store) if store else None)
    else:
        base = metric_sets(baseline or [], options, memory_advice)
    return compare(base, metric_sets(candidates, options, memory_advice), cfg)


def compare_two(
    baseline: str,
    candidate: str,
    cfg: GateConfig,
    options: AnalysisOptions,
    memory_advice: MemoryAdvice | None = None,
) -> tuple[GateResult, Analysis, Analysis]:
    """Two traces compared as ``advisor report BASELINE CANDIDATE`` shows them: the gate
    result and both analyses (for their summaries)."""
    if options.dask:  # (the summaries are the parts' device windows)
        parts = _remote([baseline, candidate], options)
        stored = _digests(parts)
        base, cand = (merge_parts([p]) for p in parts)
        return compare(stored[:1], stored[1:], cfg), base, cand
    rule_set = options.rules()
    runs = [pipeline.run(t, options, rule_set, None, memory_advice) for t in (baseline, candidate)]
    made = [metric_set(a, f) for a, f in runs]
    return compare(made[:1], made[1:], cfg), runs[0][0], runs[1][0]
