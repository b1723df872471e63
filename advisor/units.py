"""Human-readable time and ratio formatting (input in ns)."""

from __future__ import annotations

import math


def fmt_ns(ns: float | None) -> str:
    """'812 ns', '4.56 us', '12.30 ms', '2.83 s'; '-' for missing."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    a = abs(ns)
    if a < 1e3:
        return f"{ns:.0f} ns"
    if a < 1e6:
        return f"{ns / 1e3:.2f} us"
    if a < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def fmt_pct(x: float | None) -> str:
    """'49.6 %'; '-' for missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{100 * x:.1f} %"
