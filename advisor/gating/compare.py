"""Compare the metric sets of baseline and candidate traces: one row per metric with the
test that decided it, what moved and the candidate finding that explains it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from advisor.errors import AdvisorInputError
from advisor.gating.config import COUNTS, KERNEL, OVERALL, RANGE, GateConfig
from advisor.gating.metricset import GateFinding, KernelEntry, KernelKey, MetricSet, load
from advisor.gating.stats import GateStatus, Judgement, judge, side_value
from advisor.rules.finding import FindingKey
from advisor.units import fmt_ns, fmt_pct

SEVERITY_ORDER = {"low": 0, "medium": 1, "high": 2}
QUALITY_NOTES = 3  # data-quality warnings shown per trace

# what each metric measures, for the sentence that names what moved
LABELS = {
    "span_ns": "GPU time",
    "gpu_busy_ns": "GPU busy time",
    "tail_idle_ns": "wave-tail idle",
    "underfill_idle_ns": "under-filled wave idle",
    "launch_overhead_ns": "launch overhead (GPU idle between host launches)",
    "sync_idle_ns": "synchronization idle (GPU idle after blocking host calls)",
    "exposed_comm_ns": "exposed communication",
    "overlap_ratio": "comm/compute overlap",
    "launches": "GPU operations launched",
    "sync_gaps": "blocking synchronizations",
    "median_ns": "median GPU time",
}
# the parts a span is made of, for naming which one moved
SPAN_PARTS = ("gpu_busy_ns", "launch_overhead_ns", "sync_idle_ns", "exposed_comm_ns")


@dataclass
class Row:
    scope: str  # overall | range | kernel | finding
    key: str
    metric: str
    baseline: float | None
    candidate: float | None
    status: GateStatus
    detail: str = ""  # the test's numbers, short (p, interval, tolerance)
    test: str = ""  # which test decided, in words
    test_kind: str = ""  # count | instances | traces | values | tolerance | new finding
    samples: tuple[int, int] = (0, 0)  # compared per side (instances, traces or values)
    p: float | None = None  # the rank test's one-sided p-value
    ci: tuple[float, float] | None = None  # bootstrap interval (ci_kind: ratio|difference)
    ci_kind: str = ""
    tolerance: float | None = None  # in the metric's unit
    cause: str = ""  # what moved, in words
    explained_by: list[str] = field(default_factory=list)  # candidate findings: rule: title
    kernel: KernelKey | None = None  # a kernel row's kernel (``key`` is its text)

    @property
    def delta(self) -> float | None:
        if self.baseline is None or self.candidate is None:
            return None
        return self.candidate - self.baseline


@dataclass
class GateResult:
    rows: list[Row]
    method: str
    notes: list[str]

    @property
    def failed(self) -> bool:
        return any(r.status in FAILING for r in self.rows)


FAILING = (GateStatus.REGRESSION, GateStatus.NEW_FINDING)


def _limit(cfg: GateConfig, metric: str, base: float, busy: float | None) -> float:
    """The tolerance of a metric at the baseline value ``base`` (its unit): max(rel * base,
    abs); ``rel: parts`` (span_ns) weighs gpu_busy_ns's rel by the busy time ``busy`` and
    launch_overhead_ns's rel by the rest."""
    th = cfg.metrics.get(metric)
    if th is None:
        return float("inf")
    if th.rel == "parts":
        busy = min(max(busy or 0.0, 0.0), abs(base))
        rel_part = busy * cfg.rel("gpu_busy_ns") + (abs(base) - busy) * cfg.rel(
            "launch_overhead_ns"
        )
        return max(rel_part, th.abs)
    return max(float(th.rel) * abs(base), th.abs)


def fmt_value(metric: str, value: float | None) -> str:
    """A metric's value in its unit: time, percent (overlap_ratio) or a count."""
    if value is None:
        return "-"
    if metric == "overlap_ratio":
        return fmt_pct(value)
    if metric in COUNTS:
        return f"{value:g}"
    return fmt_ns(value)


def _detail(j: Judgement) -> str:
    parts = []
    if j.p is not None:
        parts.append(f"p={j.p:.3f}" if j.p >= 0.001 else "p<0.001")
    if j.ci is not None:
        lo, hi = j.ci
        if j.ci_kind == "ratio":
            parts.append(f"x{lo:.3f}-{hi:.3f}")
        else:
            parts.append(f"{fmt_ns(lo)} to {fmt_ns(hi)}")
    return ", ".join(parts)


def _row(scope, key, metric, j: Judgement, kernel: KernelKey | None = None) -> Row:
    tol = fmt_value(metric, j.limit)
    detail = _detail(j)
    detail = f"{detail}; tolerance {tol}" if detail else f"tolerance {tol}"
    return Row(scope, key, metric, j.baseline, j.candidate, j.status, detail, j.test,
               j.kind, j.n, j.p, j.ci, j.ci_kind if j.ci else "", j.limit,
               kernel=kernel)  # fmt: skip


def _range_arrays(sets: list[MetricSet], key: str, metric: str) -> list[np.ndarray]:
    """Per trace of a side: the samples of one metric of a range (traces without it are
    skipped)."""
    out = []
    for s in sets:
        entry = s.regions.get(key)
        values = entry.samples.get(metric) if entry is not None else None
        if values:
            out.append(np.asarray(values, dtype=np.float64))
    return out


def _kernel_arrays(entries: list[KernelEntry | None]) -> list[np.ndarray]:
    """Per trace of a side: a kernel's samples (traces without it are skipped)."""
    return [np.asarray(e.samples, dtype=np.float64) for e in entries if e is not None and e.samples]


def _loaded(sets: Sequence[MetricSet | dict], side: str) -> list[MetricSet]:
    """Metric sets as made or as stored (metricset.load: earlier versions read, damaged ones
    refused naming the trace)."""
    return [load(s, side) for s in sets]


def compare(
    base_sets: Sequence[MetricSet | dict], cand_sets: Sequence[MetricSet | dict], cfg: GateConfig
) -> GateResult:
    """Compare metric sets (several traces per side allowed; as made or as stored);
    incompatible sets raise."""
    base, cand = _loaded(base_sets, "baseline"), _loaded(cand_sets, "candidate")
    gb = {g for s in base for g in s.gpus}
    gc = {g for s in cand for g in s.gpus}
    if gb and gc and gb != gc:
        raise AdvisorInputError(None, f"incompatible traces: baseline GPUs {', '.join(sorted(gb))}"
                                      f" vs candidate {', '.join(sorted(gc))}")  # fmt: skip
    rb = {k for s in base for k in s.regions}
    rc = {k for s in cand for k in s.regions}
    if rb and rc and not rb & rc:
        raise AdvisorInputError(None, "incompatible traces: no NVTX range in common")
    kw: dict[str, Any] = dict(alpha=cfg.alpha, confidence=cfg.confidence,
                              noise_floor=cfg.noise_floor)  # fmt: skip
    rows: list[Row] = []

    # whole trace: one steady-state total per trace
    busy_b = side_value([np.array([s.overall["gpu_busy_ns"]]) for s in base])
    for metric, worse_up in OVERALL.items():
        bv = [np.array([s.overall[metric]], float) for s in base
              if s.overall.get(metric) is not None]  # fmt: skip
        cv = [np.array([s.overall[metric]], float) for s in cand
              if s.overall.get(metric) is not None]  # fmt: skip
        if bv and cv:
            limit = _limit(cfg, metric, side_value(bv), busy_b)
            rows.append(_row("overall", "all", metric, judge(bv, cv, worse_up, limit, **kw)))

    # ranges: one sample per steady instance
    for key in sorted(rb | rc):
        if key not in rc or key not in rb:
            rows.append(_one_side("range", key, key in rb))
            continue
        busy = _range_arrays(base, key, "gpu_busy_ns")
        busy_value = side_value(busy) if busy else None
        for metric, worse_up in RANGE.items():
            bv, cv = _range_arrays(base, key, metric), _range_arrays(cand, key, metric)
            if not (bv and cv) or metric not in cfg.metrics:
                continue
            limit = _limit(cfg, metric, side_value(bv), busy_value)
            j = judge(bv, cv, worse_up, limit, exact=metric in COUNTS, **kw)
            rows.append(_row("range", key, metric, j))

    # kernels: one sample per steady launch
    kb = [s.kernels_by_text() for s in base]
    kc = [s.kernels_by_text() for s in cand]
    keys = {text: e.key for side in (kb, kc) for by_text in side for text, e in by_text.items()}
    for key in sorted(keys):
        in_b, in_c = any(key in k for k in kb), any(key in k for k in kc)
        if not (in_b and in_c):
            rows.append(_one_side("kernel", key, in_b, keys[key]))
            continue
        bv = _kernel_arrays([k.get(key) for k in kb])
        cv = _kernel_arrays([k.get(key) for k in kc])
        for metric, worse_up in KERNEL.items():
            if metric in cfg.metrics:
                limit = _limit(cfg, metric, side_value(bv), None)
                j = judge(bv, cv, worse_up, limit, unit="launches", **kw)
                rows.append(_row("kernel", key, metric, j, keys[key]))

    rows.extend(_new_findings(base, cand, cfg))
    _name_causes(rows, base, cand)
    notes = (_startup_notes("baseline", base) + _startup_notes("candidate", cand)
             + _quality_notes("baseline", base) + _quality_notes("candidate", cand))  # fmt: skip
    return GateResult(rows=rows, method=_method(base, cand, cfg), notes=notes)


def _one_side(scope: str, key: str, in_baseline: bool, kernel: KernelKey | None = None) -> Row:
    """A range or kernel that only one side has: listed, nothing to compare."""
    status = GateStatus.ONLY_IN_BASELINE if in_baseline else GateStatus.ONLY_IN_CANDIDATE
    return Row(scope, key, "-", None, None, status, kernel=kernel)


def _method(base: list[MetricSet], cand: list[MetricSet], cfg: GateConfig) -> str:
    per_side = f"{len(base)} vs {len(cand)} trace(s)"
    return (
        f"steady state of {per_side} (start-up and cold instances left out); per range "
        f"instance and kernel launch: one-sided Mann-Whitney U (alpha {cfg.alpha}) and a "
        f"bootstrap {cfg.confidence:.0%} interval of the ratio, which must clear the "
        "metric's tolerance; counts compared exactly; each row names its test"
    )


GROWN = 1.1  # a finding whose estimate grew by more than 10 % can explain a change
# the rows whose change is said in words (and may be explained by findings)
JUDGED_CHANGE = (GateStatus.REGRESSION, GateStatus.IMPROVEMENT, GateStatus.NOT_SIGNIFICANT)


def _name_causes(rows: list[Row], base: list[MetricSet], cand: list[MetricSet]) -> None:
    """Fill ``cause`` (what moved, in words) and ``explained_by``: the candidate findings
    (new, or with an estimate grown by more than 10 %) of rules that explain the metric,
    at that range or kernel (any, for whole-trace rows)."""
    by_key = {(r.scope, r.key, r.metric): r for r in rows}
    before: dict[FindingKey, int] = {}
    for s in base:
        for f in s.findings:
            before[f.key] = max(before.get(f.key, 0), f.est_savings_ns or 0)

    def grown(f: GateFinding) -> bool:
        return f.key not in before or (f.est_savings_ns or 0) > GROWN * before[f.key]

    findings = [f for s in cand for f in s.findings if grown(f)]
    for r in rows:
        if r.status not in JUDGED_CHANGE:
            continue
        per = {"range": f" per {r.key} instance", "kernel": " per launch"}.get(r.scope, "")
        change = ""
        if r.metric in COUNTS and r.delta is not None:
            change = f" ({r.delta:+g})"
        elif r.baseline and r.delta is not None:
            change = f" ({r.delta / r.baseline:+.1%})"
        r.cause = (f"{LABELS.get(r.metric, r.metric)}{per}: {fmt_value(r.metric, r.baseline)} -> "
                   f"{fmt_value(r.metric, r.candidate)}{change}")  # fmt: skip
        if r.metric == "span_ns":
            parts = [(p, by_key.get((r.scope, r.key, p))) for p in SPAN_PARTS]
            moved = [(x.delta, p) for p, x in parts if x is not None and x.delta]
            if moved:
                delta, part = max(moved, key=lambda m: abs(m[0]))
                sign = "+" if delta > 0 else "-"
                r.cause += f"; mostly {LABELS[part]} ({sign}{fmt_ns(abs(delta))})"
        name = r.kernel.name if r.kernel else None
        for f in findings:
            here = f.kernel == name if r.scope == "kernel" else f.region == r.key
            if (here or r.scope == "overall") and r.metric in f.explains:
                text = f"{f.rule}: {f.title or f.rule}"
                if text not in r.explained_by:
                    r.explained_by.append(text)


def _startup_notes(side: str, sets: list[MetricSet]) -> list[str]:
    """What each trace's steady state leaves out (start-up idle, cold instances)."""
    notes = []
    for s in sets:
        cold = s.startup.cold_instances
        idle = s.startup.startup_idle_ns or 0
        if not cold and not idle:
            continue
        what = [f"{fmt_ns(idle)} of start-up idle"] if idle else []
        for c in cold[:2]:
            what.append(f"cold {c.range} on device {c.device} ({fmt_ns(c.period_ns)}: "
                        f"{c.reason})")  # fmt: skip
        if len(cold) > 2:
            what.append(f"{len(cold) - 2} more cold instance(s)")
        notes.append(f"{side} {s.trace}: left out of the steady state: " + "; ".join(what))
    return notes


def _quality_notes(side: str, sets: list[MetricSet]) -> list[str]:
    """Each trace's data-quality warnings: the numbers compared may be limited by them."""
    notes = []
    for s in sets:
        notes += [f"{side} {s.trace}: {w}" for w in s.warnings[:QUALITY_NOTES]]
        if len(s.warnings) > QUALITY_NOTES:
            notes.append(f"{side} {s.trace}: {len(s.warnings) - QUALITY_NOTES} more warning(s)")
    return notes


def _new_findings(base: list[MetricSet], cand: list[MetricSet], cfg: GateConfig) -> list[Row]:
    if cfg.fail_on_new_findings == "none":
        return []
    floor = SEVERITY_ORDER[cfg.fail_on_new_findings]
    seen = {f.key for s in base for f in s.findings}
    out = []
    for s in cand:
        for f in s.findings:
            if f.key not in seen and SEVERITY_ORDER[f.severity] >= floor:
                out.append(Row("finding", f"{f.rule} ({f.key.place()})", f.strategy, None,
                               float(f.est_savings_ns), GateStatus.NEW_FINDING,
                               f"severity {f.severity}", "new finding", "new finding",
                               cause=f.title or f.rule))  # fmt: skip
                seen.add(f.key)
    return out
