"""``advisor gate --calibrate``: measure the run-to-run noise of a user's own repeated runs
of unchanged code and derive gate tolerances from it.

Per metric, each trace's value of every range, kernel or whole-trace total that all the
traces have (the median of its steady samples) is compared across the traces: the
*spread* of a key is max / min - 1. The metric's relative tolerance is the least that
covers SAFETY times every key's spread: max over keys of SAFETY x (max - min) / min, at
least MIN_REL, rounded up to 0.005; a key whose SAFETY x (max - min) the metric's abs
tolerance already covers needs no rel (tiny kernels jitter by tens of ns: abs covers
them, so their relative jitter does not loosen the tolerance of long kernels). abs stays
as configured. Counts get ``abs`` = the largest spread of the median count + 0.5 (0.5:
exact); overlap_ratio gets ``abs`` = SAFETY x the largest difference (at least its
configured abs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np

from advisor.errors import AdvisorInputError
from advisor.gating.config import COUNTS, KERNEL, OVERALL, RANGE, GateConfig
from advisor.gating.metricset import KernelEntry, MetricSet, load

SAFETY = 1.5  # tolerance = SAFETY x the largest spread seen between unchanged runs
MIN_REL = 0.01
MIN_TRACES = 3
ENOUGH_TRACES = 5  # fewer: warned that rarer noise (a slow host state) may be missing


@dataclass
class Noise:
    """The measured noise of one metric and the tolerance derived from it."""

    metric: str
    keys: int  # ranges / kernels / totals compared
    spread: float  # largest max/min - 1 not covered by abs (max - min: counts, ratios)
    where: str  # the key where it was largest
    rel: float | str  # the tolerance written ('parts' for span_ns)
    abs: float


def _per_trace(
    sets: list[MetricSet], kernels: list[dict[str, KernelEntry]], scope: str, key: str | None,
    metric: str,
) -> list[float]:  # fmt: skip
    """Each trace's value (median of its samples); [] when a trace lacks it (``kernels``:
    each set's kernels by text)."""
    out = []
    for s, by_text in zip(sets, kernels, strict=True):
        samples: list[float] | None
        if scope == "overall":
            v = s.overall.get(metric)
            if v is None:
                return []
            out.append(float(v))
            continue
        if scope == "kernels":
            entry = by_text.get(key or "")
            samples = entry.samples if entry is not None else None
        else:
            region = s.regions.get(key or "")
            samples = region.samples.get(metric) if region is not None else None
        if not samples:
            return []
        out.append(float(np.median(samples)))
    return out


def _round_up(x: float, step: float = 0.005) -> float:
    return round(math.ceil(x / step - 1e-9) * step, 6)


def calibrate(given: Sequence[MetricSet | dict], cfg: GateConfig) -> list[Noise]:
    """The noise of every configured metric over ``given`` (metric sets of unchanged runs,
    as made or as stored)."""
    if len(given) < MIN_TRACES:
        raise AdvisorInputError(None, f"calibration needs {MIN_TRACES} or more traces of "
                                      f"unchanged code, got {len(given)}")  # fmt: skip
    sets = [load(s, "calibration") for s in given]
    by_text = [s.kernels_by_text() for s in sets]
    keys: dict[str, list[tuple[str, str | None]]] = {m: [("overall", None)] for m in OVERALL}
    ranges = set.intersection(*(set(s.regions) for s in sets))
    for metric in RANGE:
        keys.setdefault(metric, []).extend(("regions", k) for k in sorted(ranges))
    kernels = set.intersection(*(set(k) for k in by_text))
    for metric in KERNEL:
        keys.setdefault(metric, []).extend(("kernels", k) for k in sorted(kernels))
    out = []
    for metric, where in keys.items():
        th = cfg.metrics.get(metric)
        if th is None:
            continue
        worst, worst_at, n = 0.0, "-", 0
        for scope, key in where:
            values = _per_trace(sets, by_text, scope, key, metric)
            if not values:
                continue
            lo, hi = min(values), max(values)
            n += 1
            if metric in COUNTS or metric == "overlap_ratio":
                spread = hi - lo
            elif SAFETY * (hi - lo) <= th.abs or lo <= 0:
                continue  # abs covers it (or a ratio is undefined)
            else:
                spread = hi / lo - 1
            if spread > worst or worst_at == "-":
                worst, worst_at = spread, "all" if key is None else key
        if n == 0:  # nothing measured: the configured tolerance stays
            rel, abs_ = th.rel, th.abs
        elif metric in COUNTS:
            rel, abs_ = th.rel, worst + 0.5
        elif metric == "overlap_ratio":
            rel, abs_ = th.rel, max(th.abs, round(SAFETY * worst, 4))
        elif th.rel == "parts":
            rel, abs_ = "parts", th.abs
        else:
            rel, abs_ = max(MIN_REL, _round_up(SAFETY * worst)), th.abs
        out.append(Noise(metric, n, worst, worst_at, rel, abs_))
    return out


def config_yaml(noise: list[Noise], cfg: GateConfig, traces: list[str]) -> str:
    """A gate.yaml holding the calibrated tolerances, each with its measurement."""
    lines = [
        f"# advisor gate thresholds calibrated on {date.today().isoformat()} by",
        "# `advisor gate --calibrate` from these runs of unchanged code (docs/gate.md):",
        *[f"#   {t}" for t in traces],
        f"# rel = {SAFETY} x the largest spread (max/min - 1) between the runs' values of",
        f"# the metric over its ranges/kernels (at least {MIN_REL}); counts: abs = largest",
        "# spread + 0.5; overlap_ratio: abs from the largest difference.",
        f"alpha: {cfg.alpha}",
        f"confidence: {cfg.confidence}",
        f"noise_floor: {cfg.noise_floor}",
        f"fail_on_new_findings: {cfg.fail_on_new_findings}",
        "metrics:",
    ]
    for n in noise:
        rel = n.rel if isinstance(n.rel, str) else f"{n.rel:g}"
        spread = (f"{n.spread:g}" if n.metric in COUNTS or n.metric == "overlap_ratio"
                  else f"{n.spread:.1%}")  # fmt: skip
        measured = (f"largest spread {spread} ({n.where}) over {n.keys} key(s)" if n.keys
                    else "nothing to measure: default kept")  # fmt: skip
        lines.append(f"  {n.metric + ':':20s}{{rel: {rel}, abs: {n.abs:g}}}   # {measured}")
    return "\n".join(lines) + "\n"


def calibration_warnings(traces: list[str]) -> list[str]:
    """What limits a calibration (one line each)."""
    if len(traces) < ENOUGH_TRACES:
        return [
            f"{len(traces)} runs: a rarer noise state (a slow host, another session) may "
            f"be missing from them; calibrate from {ENOUGH_TRACES}+ runs spread over "
            "sessions (docs/gate.md: 3 runs in one host state gave 3 false alarms in 6)"
        ]
    return []
