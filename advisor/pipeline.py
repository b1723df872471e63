"""One call from a trace path to its analysis and findings (shared by the CLI commands)."""

from __future__ import annotations

from collections.abc import Sequence

from advisor.analysis import Analysis, analyze
from advisor.findings import find
from advisor.metrics.gemm import ShapeOption
from advisor.rules.engine import Rule
from advisor.trace.load import load_trace


def run(
    path: str,
    gpu: str | None = None,
    rules: list[Rule] | None = None,
    shapes: Sequence[ShapeOption] = (),
) -> tuple[Analysis, list[dict]]:
    """Load ``path``, analyze it and apply the rules (built-in when ``rules`` is None)."""
    a = analyze(load_trace(path, gpu=gpu), shapes)
    return a, find(a, rules)
