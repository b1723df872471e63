"""advisor.gating.stats: the tests that decide a gate row, on samples whose answers are known
by hand."""

import numpy as np
import pytest

from advisor.gating.stats import judge, side_value

KW = dict(alpha=0.05, confidence=0.95, noise_floor=0.02)


def arr(*values):
    return np.asarray(values, dtype=float)


def test_side_value_is_the_median_of_trace_medians():
    # trace medians 2 and 10 -> their median 6 (not the pooled median 3)
    assert side_value([arr(1, 2, 3), arr(10)]) == 6.0


def test_counts_are_exact():
    base = [np.full(29, 42.0)]
    more = judge(base, [np.full(29, 50.0)], True, 0.5, exact=True, **KW)
    assert (more.status, more.kind, more.baseline, more.candidate) == ("regression", "count",
                                                                        42, 50)  # fmt: skip
    # one instance of 29 with an extra launch leaves the median at 42: unchanged
    one = judge(base, [np.r_[np.full(28, 42.0), 43.0]], True, 0.5, exact=True, **KW)
    assert one.status == "unchanged"


def test_shift_of_ten_percent_on_one_trace_per_side():
    base = np.arange(100.0, 129.0)  # 29 instances, median 114
    cand = base * 1.1  # median 125.4: ratio exactly 1.1
    j = judge([base], [cand], True, 0.03 * 114, **KW)
    assert j.status == "regression" and j.kind == "instances" and j.n == (29, 29)
    assert j.p < 0.001
    lo, hi = j.ci
    assert lo <= 1.1 <= hi and lo > 1.03  # the interval clears the 3 % tolerance
    assert j.candidate / j.baseline == pytest.approx(1.1)


def test_overlapping_shift_is_not_significant():
    # +4 on a 28-wide uniform spread: past a 3.42 tolerance (118 / 114 = x1.035), and the
    # rank test alone would just call it (p ~ 0.047), but the interval of the ratio reaches
    # below 1: it does not clear the tolerance
    base = np.arange(100.0, 129.0)
    j = judge([base], [base + 4], True, 0.03 * 114, **KW)
    assert j.status == "not significant" and j.ci[0] < 1.0 < j.ci[1]
    wide = judge([base], [base + 1], True, 0.0, **KW)  # no tolerance: the test decides
    assert wide.status == "not significant" and wide.p > 0.05


def test_within_tolerance_is_unchanged_whatever_the_test_says():
    base = np.full(30, 100.0)
    j = judge([base], [np.full(30, 102.0)], True, 3.0, **KW)
    assert j.status == "unchanged"


def test_three_traces_per_side_are_blocks():
    rng = np.random.default_rng(1)
    base = [m + rng.normal(0, 0.1, 10) for m in (100, 101, 102)]
    cand = [m + rng.normal(0, 0.1, 10) for m in (110, 111, 112)]
    j = judge(base, cand, True, 3.0, **KW)
    # every candidate trace above every baseline trace: exact one-sided p = 1 / C(6, 3)
    assert j.kind == "traces" and j.n == (3, 3)
    assert j.p == pytest.approx(1 / 20) and j.status == "regression"


def test_one_value_per_side_uses_the_tolerance_with_a_noise_floor():
    # limit max(50, 2 % of 1000 = 20) = 50
    assert judge([arr(1000)], [arr(1060)], True, 50, **KW).status == "regression"
    assert judge([arr(1000)], [arr(1040)], True, 50, **KW).status == "unchanged"
    # the floor wins over a smaller tolerance: 2 % of 1000 = 20 > 10
    floor = judge([arr(1000)], [arr(1015)], True, 10, **KW)
    assert floor.status == "unchanged" and floor.limit == 20
    # two values per side can never reach significance
    two = judge([arr(1000), arr(1001)], [arr(1100), arr(1101)], True, 50, **KW)
    assert two.status == "not significant"


def test_zero_baseline_uses_a_difference_interval():
    j = judge([np.zeros(29)], [np.full(29, 76_000.0)], True, 20_000, **KW)
    assert j.status == "regression" and j.ci_kind == "difference"
    assert j.ci == (76_000.0, 76_000.0)


def test_lower_is_worse():
    # overlap ratio 0.8 -> 0.7 with abs tolerance 0.05: a regression (one value per side)
    j = judge([arr(0.8)], [arr(0.7)], False, 0.05, **KW)
    assert j.status == "regression"
    assert judge([arr(0.7)], [arr(0.8)], False, 0.05, **KW).status == "improvement"
