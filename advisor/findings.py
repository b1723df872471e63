"""Findings: the rules (built-in rules/*.yaml plus user rule folders) applied to an Analysis.

Each finding names the strategy, the kernel/region/device it concerns, the evidence (the
measured numbers that fired it) and ``est_savings_ns``: an estimate of the time the
strategy recovers (an upper bound under the rule's stated model). Findings are ranked by it;
start-up gaps never produce findings. ``Finding`` (advisor.rules.finding) is the type.
"""

from __future__ import annotations

from advisor.analysis import Analysis
from advisor.rules.engine import Rule, evaluate, load_rules
from advisor.rules.finding import Finding
from advisor.rules.tables import build_tables


def steady_spans(a: Analysis) -> dict[int, float]:
    """Per device: its window minus start-up idle (ns), the base of automatic severity."""
    d = a.devices
    steady = d["end_ns"] - d["start_ns"] - d["startup_idle_ns"]
    return steady.groupby(d["device"]).sum().to_dict()


def find(a: Analysis, rules: list[Rule] | None = None) -> list[Finding]:
    """All findings, ranked by estimated savings (largest first)."""
    rules = load_rules() if rules is None else rules
    return evaluate(rules, build_tables(a), steady_spans(a))


def find_on_device(
    a: Analysis, device: int | None, rules: list[Rule] | None = None
) -> list[Finding]:
    """The findings of ``a`` that concern ``device`` (all of them for None), found on all of
    its devices: evidence that crosses devices (which rank a collective waited for, who was
    last) needs them, so a device's findings and savings are the ones the whole run gives
    it."""
    found = find(a, rules)
    return found if device is None else [f for f in found if f.device == device]
