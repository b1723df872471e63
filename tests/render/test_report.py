"""advisor report: exact sections and numbers of the markdown, valid PNG charts."""

import json
import subprocess
import sys

import pytest
from conftest import H200_2GPU, H200_SINGLE, SAMPLES, analysis_of

from advisor.errors import AdvisorInputError
from advisor.findings import find
from advisor.render import charts
from advisor.render.markdown import report
from advisor.report import write_report
from advisor.units import fmt_ns, fmt_pct

PNG = b"\x89PNG\r\n\x1a\n"


def test_markdown_sections_and_numbers(single):
    text = report(single, find(single), {"waves": "a/waves.png", "gaps": "a/gaps.png"})
    for section in ("# advisor tuning report: h200_scheduling.sqlite", "## Summary",
                    "## Findings, ranked by estimated savings (estimates)",
                    "## Top kernels by GPU time", "## Wave quantization per kernel",
                    "## Launch gaps", "## Synchronization stalls by blocking call",
                    "## Memory copies and sets",
                    "## Top-level NVTX ranges (worst first)"):  # fmt: skip
        assert f"\n{section}\n" in f"\n{text}", section
    # no communication in this trace: no comm section (and no comm chart, below)
    assert "## Communication and compute per device" not in text
    # shares are of the steady time: the window less its start-up idle (the Triton
    # compilation and module loads before the steady state)
    s = single.summary()
    steady = s["window_ns"] - s["startup_idle_ns"]
    assert f"| steady-state time (window - start-up) | {fmt_ns(steady)} | 100.0 % |" in text
    assert f"| GPU busy | 10.41 ms | {fmt_pct(s['gpu_busy_ns'] / steady)} |" in text
    tail = fmt_pct(747_481 / steady)
    assert f"| wave-quantization tail idle (inside busy) | 747.48 us | {tail} |" in text
    assert f"({fmt_pct(s['startup_idle_ns'] / s['window_ns'])} of the window)" in text
    # launches under 5 us (the 864 ns elementwise chain) are not ranked by quantization idle
    assert "| vectorized_elementwise_kernel | 0 | 4x1x1 |" not in text
    assert "launches under 5.00 us left out" in text
    # the sync range's only instance starts 2.84 s after the first GPU op; its idle is the
    # host's np.sort after each .item() (tests/test_samples.py, test_sync_in_loop_range);
    # the finding points at its longest host-busy piece: the 14.30 ms before the range's
    # first op, from +2.82 s (tests/rules/test_tables.py checks the pointer on public traces)
    busy = fmt_ns(single.regions.set_index("name").loc["sync_in_loop", "host_busy_idle_ns"])
    assert f"| 1 | host_work | high | range sync_in_loop, device 0, at +2.82 s | {busy} |" in text
    assert (
        "| tiled_gemm_kernel | 0 | 7x19x1 | 256 | 6 | 1.12 ms | 1 (registers) | 1.008 | "
        "49.6 % | 558.09 us | tail |"
    ) in text
    # the blocking calls per call and the host range that made it ("step i": "step")
    assert "| 0 | cudaStreamSynchronize (in step) | 19 |" in text
    assert "| tiled_gemm_kernel | 0 | 18 | 4.64 ms | 187.34 us | 44.9 % |" in text
    assert "![Kernels by wave-quantization idle](a/waves.png)" in text
    # the idle-by-cause chart plots the summary's rows: it comes right after them
    gaps = text.index("![Why was the GPU idle? Steady-state idle time by cause](a/gaps.png)")
    assert text.index("| GPU idle (steady) |") < gaps < text.index("## Findings")


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


def test_charts_draw_what_is_there(tmp_path, single, two_gpu):
    # no communication: no comm chart (and the report links none)
    written = write_report(single, find(single), tmp_path / "one.md")
    assert [p.name for p in written[1:]] == ["timeline.png", "waves.png", "gaps.png"]
    assert "comm.png" not in written[0].read_text()
    # the waves chart leaves out NCCL kernels (their grids do not quantize) and shows the
    # persistent dominant GEMM only as such (tests/render/test_charts.py)
    rows = charts.wave_rows(two_gpu, top=50).rows
    assert not rows["name"].str.startswith("nccl").any()
    assert (rows["status"].str.startswith("persistent") == rows["dominant_gemm"]).all()
    assert two_gpu.kernel_table()["comm"].any()  # (there were NCCL kernels to leave out)


def test_timeline_compresses_start_up(single):
    t = charts.timeline_data(single)
    # 2.78 s of the 2.88 s window is start-up idle: most of it is compressed into bands in
    # which the GPU ran under 2 % of the time (here), so the steady state fills the drawing
    assert sum(b.end_ns - b.start_ns for b in t.bands) > 2.7e9
    ops = single.ops
    for b in t.bands:
        ran = ((ops["end"].clip(upper=b.end_ns) - ops["start"].clip(lower=b.start_ns))
               .clip(lower=0).sum())  # fmt: skip
        assert ran <= 0.02 * (b.end_ns - b.start_ns)
    assert t.width < 0.05 * (t.t1 - t.t0) / 1e6


COUNTER_RUN = SAMPLES / "counters"


def _advisor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_a_report_with_counters_says_what_they_say(tmp_path):
    # the captured counters run (sample_traces/counters: an nsys timeline and the ncu raw
    # page of the same program): the markdown findings carry the counters' sentence, as the
    # JSON summaries do (issue 29: "what the counters say" in terminal, markdown and JSON)
    timeline, raw = COUNTER_RUN / "counters.sqlite", COUNTER_RUN / "counters.ncu.raw.csv.gz"
    out = tmp_path / "r.md"
    proc = _advisor("report", str(timeline), "--counters", str(raw), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(_advisor("analyze", str(timeline), "--counters", str(raw), "--format",
                              "json").stdout)  # fmt: skip
    said = [f["summary"] for f in doc["findings"] if f.get("counters")]
    assert len(said) == 3  # wave-tail-gemm, warp-specialization-by-counters, memory-bound
    text = out.read_text()
    for summary in said:
        assert summary[summary.index("; counters (") :][:60] in text
    plain = tmp_path / "plain.md"
    assert _advisor("report", str(timeline), "-o", str(plain)).returncode == 0
    assert "; counters (" not in plain.read_text()


def test_a_comparison_report_takes_no_counters(tmp_path):
    t = str(COUNTER_RUN / "counters.sqlite")
    proc = _advisor("report", t, t, "--counters", str(COUNTER_RUN / "counters.ncu.raw.csv.gz"),
                    "-o", str(tmp_path / "r.md"))  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "--counters joins one trace's kernels" in proc.stderr


def test_an_empty_table_still_says_what_it_left_out():
    # why_step_host_work: two kernel groups (x * 0.999 and x + 0.001 on 4096 elements, 200
    # launches each, 864 ns at the median), both under quantization_min_launch_ns (5 us): the
    # quantization table has no rows, and its note says why, in the report and the terminal
    import io

    from rich.console import Console

    from advisor.render.terminal import render

    a = analysis_of(SAMPLES / "why" / "why_step_host_work.pt.trace.json.gz")
    note = "2 kernel group(s) with launches under 5.00 us left out"
    md = report(a, find(a), {})
    at = md.index("## Wave quantization per kernel")
    assert md[at:].split("\n")[2].startswith(f"No kernel group measured. {note}")
    out = io.StringIO()
    render(a, find(a), Console(file=out, width=200))
    assert f"Kernels by quantization idle (tail + under-fill): none; {note}" in out.getvalue()
