"""advisor.units: the one formatting of times and ratios that rules, gate, emit and the
renderers share (values by hand)."""

import math

from advisor.units import fmt_ns, fmt_pct


def test_times_pick_their_unit():
    assert fmt_ns(812) == "812 ns"
    assert fmt_ns(4_560) == "4.56 us"
    assert fmt_ns(12_300_000) == "12.30 ms"
    assert fmt_ns(2_830_000_000) == "2.83 s"
    assert fmt_ns(-4_560) == "-4.56 us"  # by magnitude
    assert fmt_ns(None) == fmt_ns(math.nan) == "-"


def test_ratios_as_percent():
    assert fmt_pct(0.4962) == "49.6 %"
    assert fmt_pct(None) == fmt_pct(math.nan) == "-"
