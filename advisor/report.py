"""Write ``advisor report`` outputs atomically: the markdown file and its PNG charts.

Everything is rendered into a temporary folder beside the output first and moved into
place at the end, so a failure never leaves a half-written report.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from advisor.analysis import Analysis
from advisor.errors import AdvisorInputError
from advisor.render import markdown
from advisor.rules.finding import Finding
from advisor.staged import place, staging


def write_report(
    a: Analysis,
    findings: list[Finding],
    out: str | os.PathLike[str],
    assets: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """Render the report and its charts; returns the files written."""
    from advisor.render import charts as chart_render  # matplotlib: imported on use

    out = Path(out)
    assets = Path(assets) if assets else out.parent / f"{out.stem}_assets"
    try:
        with staging(out.parent, ".advisor-report-") as stage:
            rel = Path(os.path.relpath(assets, out.parent))
            charts = {}
            for name, draw in chart_render.CHARTS.items():
                if draw(a, stage / f"{name}.png") is not None:  # None: nothing to draw
                    charts[name] = (rel / f"{name}.png").as_posix()
            linked = [  # config links relative to the report
                f.with_emitted(replace(f.emitted, config=_relative(f.emitted.config, out.parent)))
                if f.emitted is not None and f.emitted.config
                else f
                for f in findings
            ]
            (stage / out.name).write_text(markdown.report(a, linked, charts))
            assets.mkdir(parents=True, exist_ok=True)
            moves = [(f"{name}.png", assets / f"{name}.png") for name in charts]
            written = place(stage, [*moves, (out.name, out)])  # the report last
            return [written[-1], *written[:-1]]
    except OSError as exc:
        raise AdvisorInputError(str(out), f"cannot write the report: {exc.strerror}") from None


def _relative(paths: tuple[str, ...], folder: Path) -> tuple[str, ...]:
    return tuple(os.path.relpath(p, folder) for p in paths)


def write_text(text: str, out: str | Path, what: str = "report") -> Path:
    """Write one text file (the ``what``, for errors) atomically: a temporary file, then
    a rename."""
    out = Path(out)
    try:
        with staging(out.parent, ".advisor-report-") as stage:
            (stage / out.name).write_text(text)
            return place(stage, [(out.name, out)])[0]
    except OSError as exc:
        raise AdvisorInputError(str(out), f"cannot write the {what}: {exc.strerror}") from None
