"""advisor report: exact sections and numbers of the markdown, valid PNG charts."""

import subprocess
import sys

import pytest
from conftest import H200_2GPU, H200_SINGLE, analysis_of

from advisor.errors import AdvisorInputError
from advisor.findings import find
from advisor.render.markdown import report
from advisor.report import write_report

PNG = b"\x89PNG\r\n\x1a\n"


def test_markdown_sections_and_numbers(single):
    text = report(single, find(single), {"waves": "a/waves.png"})
    for section in ("# advisor tuning report: h200_scheduling.sqlite", "## Summary",
                    "## Findings, ranked by estimated savings (estimates)",
                    "## Wave quantization per kernel", "## Launch gaps",
                    "## Communication and compute per device",
                    "## Top-level NVTX ranges (worst first)"):  # fmt: skip
        assert f"\n{section}\n" in f"\n{text}", section
    assert "| GPU busy | 10.41 ms | 0.4 % |" in text
    assert "| 1 | remove_sync | high | range sync_in_loop, device 0 | 29.20 ms |" in text
    assert (
        "| tiled_gemm_kernel | 0 | 7x19x1 | 256 | 6 | 1.12 ms | 1 (registers) | 1.008 | "
        "49.6 % | 558.09 us |"
    ) in text
    assert "| 0 | startup | 35 | 2.83 s | 9.96 ms | 1.98 s |" in text
    assert "![waves per kernel](a/waves.png)" in text


def test_report_files_and_charts(tmp_path):
    a = analysis_of(H200_2GPU)
    out = tmp_path / "r" / "report.md"
    written = write_report(a, find(a), out)
    assert written[0] == out and out.read_text().startswith("# advisor tuning report")
    pngs = written[1:]
    assert [p.name for p in pngs] == ["timeline.png", "waves.png", "gaps.png", "comm.png"]
    for p in pngs:
        data = p.read_bytes()
        assert data[:8] == PNG and len(data) > 5000
        assert f"report_assets/{p.name}" in out.read_text()
    assert sorted(x.name for x in out.parent.iterdir()) == ["report.md", "report_assets"]


def test_unwritable_report_leaves_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(AdvisorInputError, match="cannot write the report"):
        write_report(analysis_of(H200_SINGLE), [], blocker / "x" / "r.md")
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_cli_report_and_diff(tmp_path):
    out = tmp_path / "diff.md"
    proc = subprocess.run([sys.executable, "-m", "advisor", "report", str(H200_SINGLE),
                           str(H200_SINGLE), "-o", str(out)], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text.startswith("# advisor comparison: h200_scheduling.sqlite -> h200_scheduling")
    assert "## advisor gate: PASS: no regression" in text
    assert "## Baseline summary" in text and "## Candidate summary" in text
