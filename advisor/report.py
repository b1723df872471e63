"""Write ``advisor report`` outputs atomically: the markdown file and its PNG charts.

Everything is rendered into a temporary folder beside the output first and moved into
place at the end, so a failure never leaves a half-written report.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from advisor.analysis import Analysis
from advisor.errors import AdvisorInputError
from advisor.render import markdown


def _stage(out: Path) -> Path:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=".advisor-report-", dir=out.parent))
    except OSError as exc:
        raise AdvisorInputError(str(out), f"cannot write the report: {exc.strerror}") from None


def write_report(
    a: Analysis, findings: list[dict], out: str | Path, assets: str | Path | None = None
) -> list[Path]:
    """Render the report and its charts; returns the files written."""
    from advisor.render import charts as chart_render  # matplotlib: imported on use

    out = Path(out)
    assets = Path(assets) if assets else out.parent / f"{out.stem}_assets"
    stage = _stage(out)
    try:
        rel = Path(os.path.relpath(assets, out.parent))
        charts = {}
        for name, draw in chart_render.CHARTS.items():
            draw(a, stage / f"{name}.png")
            charts[name] = (rel / f"{name}.png").as_posix()
        linked = [  # config links relative to the report
            {**f, "config": [os.path.relpath(c, out.parent) for c in f["config"]]}
            if f.get("config")
            else f
            for f in findings
        ]
        (stage / out.name).write_text(markdown.report(a, linked, charts))
        assets.mkdir(parents=True, exist_ok=True)
        written = []
        for name in chart_render.CHARTS:
            os.replace(stage / f"{name}.png", assets / f"{name}.png")
            written.append(assets / f"{name}.png")
        os.replace(stage / out.name, out)
        return [out, *written]
    except OSError as exc:
        raise AdvisorInputError(str(out), f"cannot write the report: {exc.strerror}") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def write_text(text: str, out: str | Path) -> Path:
    """Write one text file atomically (temporary file, then rename)."""
    out = Path(out)
    stage = _stage(out)
    try:
        (stage / out.name).write_text(text)
        os.replace(stage / out.name, out)
        return out
    except OSError as exc:
        raise AdvisorInputError(str(out), f"cannot write the report: {exc.strerror}") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
