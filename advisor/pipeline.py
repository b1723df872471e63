"""One call from a trace path to its analysis and findings (shared by the CLI commands)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from advisor.analysis import Analysis, analyze
from advisor.errors import AdvisorInputError
from advisor.findings import find
from advisor.memory import advise_huge_pages
from advisor.metrics.gemm import ShapeOption
from advisor.rules.engine import Rule
from advisor.trace.load import load_trace


def run(
    path: str,
    gpu: str | None = None,
    rules: list[Rule] | None = None,
    shapes: Sequence[ShapeOption] = (),
    range_text: str | None = None,
    device: int | None = None,
    step: Callable[[str | None], None] | None = None,
) -> tuple[Analysis, list[dict]]:
    """Load ``path``, analyze it, narrow it to ``range_text``/``device`` (Analysis.select)
    and apply the rules (built-in when ``rules`` is None). ``step`` is called after each
    stage with the name of the next one (None at the end), for progress display.

    Raises AdvisorInputError when ``device`` ran no GPU work or ``range_text`` matches no
    top-level NVTX range.
    """
    step = step or (lambda _: None)
    advise_huge_pages(0)  # reading touches each page about once: small pages
    trace = load_trace(path, gpu=gpu)
    advise_huge_pages(sum(len(t) for t in (trace.kernels, trace.memcpy, trace.memset)))
    step("computing metrics")
    a = analyze(trace, shapes, release_api=True)  # this trace is ours alone
    step("applying rules")
    if device is not None and device not in trace.devices:
        raise AdvisorInputError(
            path,
            f"--device {device}: no GPU work on that device (devices: "
            f"{', '.join(map(str, trace.devices))})",
        )
    a = a.select(range_text, device)
    if range_text and a.regions.empty:
        raise AdvisorInputError(path, f"--range {range_text!r}: no top-level NVTX range matches")
    findings = find(a, rules)
    step(None)
    return a, findings
