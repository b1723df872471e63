"""The gate's statistics: is a candidate's metric worse than the baseline's beyond its
tolerance, and is the change more than noise?

Each side is a list of traces, each trace an array of per-instance samples (one value per
range instance or kernel launch; a single value for whole-trace totals). A side's value is
the median of its traces' medians (traces are blocks). The decision (docs/gate.md):

- counts (launches per instance, ...) are exact: the medians are compared;
- per-instance samples: a one-sided Mann-Whitney U test, on the per-trace medians when
  both sides have 3 traces or more, else on the pooled instances; and a bootstrap
  confidence interval of the ratio candidate / baseline (traces resampled, then instances
  within each: a hierarchical bootstrap). A change is a regression (or improvement) when it
  exceeds the tolerance, p <= alpha and the whole interval lies beyond the tolerance;
- one value per trace: the rank test on 3 or more traces per side, else the tolerance
  (at least ``noise_floor``) alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor.rules.registry import TextEnum

BOOTSTRAP_RESAMPLES = 2000
SEED = 20261201  # fixed: the same inputs give the same interval
MIN_BLOCKS = 3  # traces per side for a rank test on per-trace medians (p can reach 0.05)


class GateStatus(TextEnum):
    """What the gate says of one row (metric, or new finding): the judgements of ``judge``,
    a range or kernel only one side has, a new finding. Each member is its text."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    NOT_SIGNIFICANT = "not significant"
    ONLY_IN_BASELINE = "only in baseline"
    ONLY_IN_CANDIDATE = "only in candidate"
    NEW_FINDING = "new finding"


@dataclass(frozen=True)
class Judgement:
    """The verdict on one metric: side values, status and the test that decided it."""

    baseline: float
    candidate: float
    status: GateStatus  # regression | improvement | unchanged | not significant
    test: str  # which test decided, for people
    limit: float  # the tolerance, in the metric's unit
    kind: str = "instances"  # count | instances | traces | values | tolerance (the test)
    n: tuple[int, int] = (0, 0)  # samples compared per side (instances, traces or values)
    p: float | None = None
    ci: tuple[float, float] | None = None  # bootstrap interval of candidate / baseline
    ci_kind: str = "ratio"  # "ratio", or "difference" when the baseline is 0


def side_value(traces: list[np.ndarray]) -> float:
    """The median of the traces' medians."""
    return float(np.median([np.median(t) for t in traces]))


def _boot_side(traces: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """BOOTSTRAP_RESAMPLES resampled side values: instances resampled within each trace,
    then traces resampled with replacement; the median of the resampled traces' medians."""
    b = BOOTSTRAP_RESAMPLES
    meds = np.empty((len(traces), b))
    for i, x in enumerate(traces):
        meds[i] = np.median(x[rng.integers(0, len(x), size=(b, len(x)))], axis=1)
    if len(traces) == 1:
        return meds[0]
    pick = rng.integers(0, len(traces), size=(b, len(traces)))
    return np.median(meds[pick, np.arange(b)[:, None]], axis=1)


def bootstrap_interval(
    base: list[np.ndarray], cand: list[np.ndarray], confidence: float
) -> tuple[tuple[float, float], str]:
    """The two-sided bootstrap interval of candidate / baseline (or of candidate -
    baseline when the baseline's value is 0) and which of the two it is."""
    rng = np.random.default_rng(SEED)
    bb, cc = _boot_side(base, rng), _boot_side(cand, rng)
    q = [(1 - confidence) / 2, 1 - (1 - confidence) / 2]
    if side_value(base) == 0:
        lo, hi = np.quantile(cc - bb, q)
        return (float(lo), float(hi)), "difference"
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(bb != 0, cc / np.where(bb != 0, bb, 1), np.inf)
    lo, hi = np.quantile(ratio, q)
    return (float(lo), float(hi)), "ratio"


def _rank_p(cand: np.ndarray, base: np.ndarray, greater: bool) -> float:
    from scipy.stats import mannwhitneyu  # imported on use: scipy is slow to import

    if len(cand) == 0 or len(base) == 0:
        return 1.0
    alt = "greater" if greater else "less"
    return float(mannwhitneyu(cand, base, alternative=alt).pvalue)


def judge(
    base: list[np.ndarray],
    cand: list[np.ndarray],
    worse_up: bool,
    limit: float,
    *,
    alpha: float,
    confidence: float,
    noise_floor: float,
    exact: bool = False,
    unit: str = "instances",
) -> Judgement:
    """Judge one metric (``base``/``cand``: per-trace sample arrays; ``limit``: the
    tolerance in the metric's unit; ``exact``: a count, compared without a test)."""
    b, c = side_value(base), side_value(cand)
    up = c > b
    worse = up == worse_up

    def verdict(status_if_beyond: bool, test: str, lim: float, **kw) -> Judgement:
        if not status_if_beyond:
            return Judgement(b, c, GateStatus.NOT_SIGNIFICANT, test, lim, **kw)
        status = GateStatus.REGRESSION if worse else GateStatus.IMPROVEMENT
        return Judgement(b, c, status, test, lim, **kw)

    if exact:
        test = "exact count: medians per instance compared"
        n = (sum(map(len, base)), sum(map(len, cand)))
        if abs(c - b) <= limit:
            return Judgement(b, c, GateStatus.UNCHANGED, test, limit, "count", n)
        return verdict(True, test, limit, kind="count", n=n)
    singles = all(len(t) == 1 for t in base + cand)
    if singles:
        nb, nc = len(base), len(cand)
        if nb >= MIN_BLOCKS and nc >= MIN_BLOCKS:
            test = f"rank test on {nb} vs {nc} traces (one value each)"
            if abs(c - b) <= limit:
                return Judgement(b, c, GateStatus.UNCHANGED, test, limit, "values", (nb, nc))
            pooled_b, pooled_c = np.concatenate(base), np.concatenate(cand)
            p = _rank_p(pooled_c, pooled_b, up)
            return verdict(p <= alpha, test, limit, p=p, kind="values", n=(nb, nc))
        lim = max(limit, noise_floor * abs(b))
        test = f"tolerance only ({nb} vs {nc} value(s): too few for a test)"
        if abs(c - b) <= lim:
            return Judgement(b, c, GateStatus.UNCHANGED, test, lim, "tolerance", (nb, nc))
        return verdict(nb < 2 or nc < 2, test, lim, kind="tolerance", n=(nb, nc))
    blocks = len(base) >= MIN_BLOCKS and len(cand) >= MIN_BLOCKS
    if blocks:
        kind, n = "traces", (len(base), len(cand))
        test = f"rank test on the medians of {len(base)} vs {len(cand)} traces"
    else:
        kind, n = "instances", (sum(map(len, base)), sum(map(len, cand)))
        traces = "" if len(base) == len(cand) == 1 else f" of {len(base)} vs {len(cand)} traces"
        test = f"rank test on {n[0]} vs {n[1]} {unit}{traces}"
    if abs(c - b) <= limit:
        return Judgement(b, c, GateStatus.UNCHANGED, test, limit, kind, n)
    if blocks:
        p = _rank_p(
            np.array([np.median(t) for t in cand]), np.array([np.median(t) for t in base]), up
        )
    else:
        p = _rank_p(np.concatenate(cand), np.concatenate(base), up)
    ci, ci_kind = bootstrap_interval(base, cand, confidence)
    lo, hi = ci
    if ci_kind == "ratio":
        beyond = (lo - 1) * abs(b) > limit if up else (1 - hi) * abs(b) > limit
    else:
        beyond = lo > limit if up else -hi > limit
    test += f", bootstrap {confidence:.0%} interval of the {ci_kind}"
    return verdict(p <= alpha and beyond, test, limit, p=p, ci=ci, ci_kind=ci_kind, kind=kind, n=n)
