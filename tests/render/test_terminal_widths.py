"""Terminal tables at 60, 72, 80, 100, 120 and 160 columns and piped (issue 31): every
number shown is whole, with its unit on the same line, and equal to the JSON document's
value formatted as the renderer formats it; no line is longer than the width; no table is
cropped. One analysis per trace, rendered in-process at each width; one subprocess for the
piped width."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from conftest import PUBLIC, PUBLIC_NSYS, SAMPLES, why_nsys
from rich.console import Console

import advisor
from advisor import pipeline
from advisor.gating import compare, load_config, metric_set
from advisor.gating.compare import fmt_value
from advisor.render import gate as gate_render
from advisor.render import sections, terminal
from advisor.render.fit import fit
from advisor.render.sections import IDLE_LABELS
from advisor.units import fmt_ns, fmt_pct

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gating"))
from gate_sets import mset  # noqa: E402  (hand-built gate metric sets)

WIDTHS = (60, 72, 80, 100, 120, 160)
TOP = 10  # the CLI's default --top
TRACES = [
    *sorted(SAMPLES.glob("*.sqlite")),
    *sorted((SAMPLES / "kineto").glob("*.json.gz")),
    *why_nsys(),
    PUBLIC_NSYS / "nsysai_h100_2gpu_window_nsys2026.2.sqlite",  # no GPU facts, 2 devices
    PUBLIC / "kineto" / "tracelens_vllm_eager_b200.json.gz",  # long C++ kernel names
    PUBLIC / "kineto" / "hta_nccl_data.json.gz",  # 20 findings, communication
]
UNIT = r"(?:ns|us|ms|s|%|B|KB|MB|GB)"
BOX = "│┃┏┓┡┩└┘━─╇┳┻╋┯┷"


@cache
def _result(path: Path) -> advisor.Result:
    return advisor.analyze(path)


@cache
def _document(path: Path) -> dict:
    """The document ``advisor analyze TRACE --format json`` prints."""
    return json.loads(_result(path).to_json())


def _summary_labels(path: Path) -> list[str]:
    """The summary's row labels (words only: the numbers are checked against the JSON)."""
    return [row[0] for row in sections.summary(_result(path).analysis).rows]


def _rendered(path: Path, width: int) -> str:
    r = _result(path)
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    terminal.render(r.analysis, r.finding_list, console, top=TOP)
    return buf.getvalue()


def _check_layout(out: str, width: int) -> None:
    """No line longer than the width, no table cut at the right edge, no unit on another
    line than its number, no number ending in an ellipsis."""
    lines = out.splitlines()
    for line in lines:
        assert len(line) <= width, f"longer than {width}: {line!r}"
        if line[:1] in BOX:  # a table line ends with its right border
            assert line.rstrip()[-1:] in BOX, f"table cut at the edge: {line!r}"
    for above, below in zip(lines, lines[1:], strict=False):
        head = below.strip(" " + BOX)
        if re.match(rf"{UNIT}\b", head) and re.search(r"\d$", above.rstrip(" " + BOX)):
            pytest.fail(f"unit wrapped away from its number: {above!r} / {below!r}")
    for line in lines:
        for cell in line.split("│"):
            text = cell.strip()
            assert not re.match(rf"{UNIT}(\s|$)", text) or not text, f"unit alone: {line!r}"
            assert not re.search(rf"\d…\s*$|^…\s*{UNIT}\b", text), f"number cut: {line!r}"


def _table(out: str, title: str) -> tuple[list[str], list[dict[str, str]]]:
    """The table titled ``title`` in ``out``: its column names and its body lines, each a
    dict of column -> the line's text in that column."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(title[:24]))
    top = next(i for i in range(at, len(lines)) if lines[i].startswith("┏"))
    rule = next(i for i in range(top, len(lines)) if lines[i].startswith("┡"))
    header_lines = [[c.strip() for c in lines[i].split("┃")[1:-1]] for i in range(top + 1, rule)]
    names = [" ".join(filter(None, parts)) for parts in zip(*header_lines, strict=True)]
    body = []
    for line in lines[rule + 1 :]:
        if line.startswith("└"):
            break
        body.append(dict(zip(names, [c.strip() for c in line.split("│")[1:-1]], strict=True)))
    return names, body


def _rows(body: list[dict[str, str]], starts: str) -> list[dict[str, list[str]]]:
    """Body lines grouped into rows (a row starts where its ``starts`` column is not empty):
    column -> the row's lines in that column."""
    rows: list[dict[str, list[str]]] = []
    for cells in body:
        if not rows or cells[starts]:
            rows.append({n: [] for n in cells})
        for n, c in cells.items():
            rows[-1][n].append(c)
    return rows


def _labelled_rows(body: list[dict[str, str]], column: str, labels: list[str]) -> list[dict]:
    """Body lines grouped into rows by their known ``labels`` (whitespace aside), in order."""
    rows, words = [], []
    for cells in body:
        if not words:
            rows.append({n: [] for n in cells})
        for n, c in cells.items():
            rows[-1][n].append(c)
        words += cells[column].split()
        if " ".join(words) == " ".join(labels[len(rows) - 1].split()):
            words = []
    assert not words and len(rows) == len(labels), (rows, labels)
    return rows


def _single_line(row: dict, column: str) -> str:
    """A number cell: all of it on the row's first line."""
    first, *rest = row[column]
    assert not any(rest), f"{column} spread over lines: {row[column]}"
    return first


def _expected_summary(doc: dict) -> dict[str, tuple[str, str]]:
    """Summary label -> (time, share) as the JSON's numbers formatted by the units module."""
    s = doc["summary"]
    window, startup = s["window_ns"], s["startup_idle_ns"]
    steady = window - startup

    def row(ns: float) -> tuple[str, str]:
        return fmt_ns(ns), fmt_pct(ns / steady) if steady > 0 else "-"

    facts = bool(doc["trace"]["gpus"])
    out = {
        "window": (fmt_ns(window), ""),
        "start-up idle": (fmt_ns(startup), fmt_pct(startup / window) if window else "-"),
        "steady-state time": row(steady),
        "GPU busy": row(s["gpu_busy_ns"]),
        "GPU idle (steady)": row(s["idle_ns"] - startup),
        **{label: row(s[col]) for col, label in IDLE_LABELS.items()},
        "communication": row(s["comm_ns"]),
        "exposed (no compute alongside)": row(s["exposed_comm_ns"]),
        "waiting for other ranks": row(s["comm_wait_ns"]),
        "overlap ratio": ("", fmt_pct(s["overlap_ratio"])),
    }
    for label, col in (("wave-quantization tail idle", "tail_idle_ns"),
                       ("under-filled grid idle", "underfill_idle_ns")):  # fmt: skip
        out[label] = row(s[col]) if facts else ("not computed", "")
    return out


def _whole(number: str, cell: str) -> bool:
    """``number`` (with its unit) appears whole in ``cell``."""
    return bool(re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", cell))


def _check_summary(out: str, doc: dict, labels: list[str]) -> None:
    """The summary's rows (``labels``, in order) hold the JSON's numbers: the time whole on
    the row's first line, the share whole on one line."""
    names, body = _table(out, "Where the GPU time went")
    assert names == ["metric", "time", "share of steady time"], names
    expected = _expected_summary(doc)
    for r, label in zip(_labelled_rows(body, "metric", labels), labels, strict=True):
        key = next(k for k in expected if label.strip().startswith(k))
        time, share = expected[key]
        assert _single_line(r, "time") == time, (label, r["time"], time)
        if share:
            assert any(_whole(share, line) for line in r["share of steady time"]), (label, r)


def _rows_of(findings: list[dict]) -> list[dict]:
    """The report's rows: one per rule at one kernel and range, its devices' savings summed
    (strategy kept), largest first, ties in the order of their best finding."""
    rows: dict[tuple, dict] = {}
    for f in findings:
        key = (f["rule"], f["kernel"], f["region"])
        row = rows.setdefault(key, {"strategy": f["strategy"], "est_savings_ns": 0})
        row["est_savings_ns"] += f["est_savings_ns"]
    return sorted(rows.values(), key=lambda r: -r["est_savings_ns"])


def _check_findings(out: str, doc: dict, width: int) -> None:
    findings = _rows_of(doc["findings"])[:TOP]
    if not findings:
        return
    savings = [fmt_ns(f["est_savings_ns"]) for f in findings]
    if width < terminal.NARROW:  # numbered blocks: the head line holds the savings
        heads = re.findall(r"^(\d+)\. (\S+) \((\w+)\): est\. savings (.+)$", out, re.M)
        assert [int(h[0]) for h in heads] == list(range(1, len(findings) + 1)), heads
        assert [h[3] for h in heads] == savings
        assert [h[1] for h in heads] == [f["strategy"] for f in findings]
        return
    names, body = _table(out, "Findings, ranked by estimated")
    rows = _rows(body, "#")
    assert "est. savings" in names, names
    assert [_single_line(r, "#") for r in rows] == [str(i) for i in range(1, len(rows) + 1)]
    assert [_single_line(r, "est. savings") for r in rows] == savings


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_every_number_whole_at_every_width(trace, width):
    out = _rendered(trace, width)
    _check_layout(out, width)
    doc = _document(trace)
    _check_summary(out, doc, _summary_labels(trace))
    _check_findings(out, doc, width)


def test_piped_output_has_a_sane_width():
    """Piped without COLUMNS: the documented width (not 160), and the same report."""
    trace = SAMPLES / "h200x2_allreduce.sqlite"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", str(trace)],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    width = terminal.PIPED_WIDTH
    assert width <= 120
    assert proc.stdout == _rendered(trace, width)
    _check_layout(proc.stdout, width)
    _check_summary(proc.stdout, _document(trace), _summary_labels(trace))
    _check_findings(proc.stdout, _document(trace), width)


# the gate's terminal table, on real repeated captures (sample_traces/gate/, docs/gate.md)
GATE_SETS = {
    "nsys slow GEMM": ("gate_runs.tar.xz", ["base2", "base3", "base4"],
                       ["slow_gemm1", "slow_gemm2", "slow_gemm3"]),
    "nsys sync": ("gate_runs.tar.xz", ["base2", "base3"], ["sync1", "slow_gemm1"]),
    "kineto launches": ("gate_runs3.tar.xz", ["base2", "base3", "base4"],
                        ["launch1", "slow_gemm2", "launch3"]),
}  # fmt: skip


@pytest.fixture(scope="module")
def gate_results(tmp_path_factory) -> dict:
    """Per set: the GateResult of its baseline and candidate runs."""
    digests: dict[str, dict] = {}
    for tarball in {t for t, _, _ in GATE_SETS.values()}:
        folder = tmp_path_factory.mktemp(tarball.split(".")[0])
        with tarfile.open(SAMPLES / "gate" / tarball) as tar:
            tar.extractall(folder, filter="data")
        for p in [*folder.glob("*.sqlite"), *folder.glob("*.pt.trace.json.gz")]:
            run = p.name.split(".")[0].removeprefix("gate3_").removeprefix("gate_")
            digests[f"{tarball}:{run}"] = p
    cfg = load_config()

    @cache
    def digest(key: str) -> dict:
        return metric_set(*pipeline.run(str(digests[key])))

    results = {
        name: compare([digest(f"{t}:{b}") for b in base],
                      [digest(f"{t}:{c}") for c in cand], cfg)
        for name, (t, base, cand) in GATE_SETS.items()
    }  # fmt: skip
    # hand-built: two long C++ names that differ only in their template arguments
    launches = 54_500 + 10.0 * np.arange(29)
    keys = [f"void cutlass::Kernel2<cutlass_80_simt_sgemm_{tile}_8x4_nn_align1>(T1::Params) "
            "grid=1024x1x1 block=256" for tile in ("128x128", "256x128")]  # fmt: skip
    base = mset(kernels={k: launches for k in keys})
    cand = mset(kernels={k: launches * f for k, f in zip(keys, (1.07, 1.2), strict=True)})
    results["long names"] = compare([base], [cand], cfg)
    return results


def _gate_rendered(result, width: int) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    gate_render.table(result, console, top=30)
    return buf.getvalue()


@pytest.mark.parametrize("width", WIDTHS)
def test_gate_table_at_every_width(gate_results, width):
    for name, result in gate_results.items():
        out = _gate_rendered(result, width)
        _check_layout(out, width)
        rows_json = json.loads(gate_render.as_json(result))["rows"]
        assert rows_json, name
        names, body = _table(out, "Changes (unchanged metrics omitted)")
        rows = _rows(body, "change")
        # what the row is about and how much it changed come first; never left out
        assert names[:1] == ["what"] and "change" in names, (name, width, names)
        assert len(rows) == len(rows_json)
        for r, j, row in zip(rows, rows_json, gate_render.shown(result), strict=True):
            # the kernel or range key whole (grid and block included; a long name may be
            # folded over lines), then its metric: in its column or in the what cell
            what = "".join("".join(r["what"]).split())
            scope = "all" if j["scope"] == "overall" else j["scope"]
            assert what.startswith(scope), what
            if j["scope"] != "overall":
                assert "".join(j["key"].split()) in what, (width, r["what"], j["key"])
            metric = " ".join(r["metric"]) if "metric" in names else what
            assert j["metric"] in metric, (width, r["what"])
            assert _single_line(r, "change") == gate_render.change_text(row)
            for side in ("baseline", "candidate"):
                if side in names:
                    assert _single_line(r, side) == fmt_value(j["metric"], j[side])


def _identities(cols, rows) -> list[tuple[str, ...]]:
    return [tuple(c for c, col in zip(row, cols, strict=True) if col.identifies) for row in rows]


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_rows_that_differ_read_differently_at_every_width(trace):
    """Every table's rows are different things (by their identifying columns: kernel,
    device, grid, block...), and still read differently once columns are left out and
    names shortened: what tells them apart joins the name cell."""
    a = _result(trace).analysis
    tables = [sections.summary(a), sections.top_kernels(a, TOP), sections.quantization(a, TOP),
              sections.regions(a, TOP), sections.gaps(a), sections.sync_stalls(a, a.origin_ns),
              sections.copies(a), sections.streams(a, TOP), sections.pipeline(a)]  # fmt: skip
    for section in tables:
        full = _identities(section.cols, section.rows)
        assert len(set(full)) == len(full), (section.title, full)
        for width in WIDTHS:
            laid = fit(section.cols, section.rows, width)
            assert laid is not None, (section.title, width)
            shown = [" ".join(" ".join(c.split()) for c in ident)
                     for ident in _identities(laid.cols, laid.rows)]  # fmt: skip
            assert len(set(shown)) == len(shown), (section.title, width, shown)


def _drop_order(cols) -> str:
    """A table's columns as docs/terminal.md lists them: left out first to last, then the
    ones always shown."""
    groups: dict[int, list[str]] = {}
    for c in cols:
        if c.drop:
            groups.setdefault(c.drop, []).append(f"`{c.header}`")
    first = "; ".join(" and ".join(groups[d]) for d in sorted(groups, reverse=True))
    always = ", ".join(f"`{c.header}`" for c in cols if not c.drop)
    return f"{first or 'none'}; always shown: {always}"


def test_docs_state_the_order_columns_are_left_out():
    a = _result(SAMPLES / "h200x2_allreduce.sqlite").analysis
    tables = {
        "Where the GPU time went": sections.summary(a).cols,
        "Findings": terminal.FINDING_COLUMNS,
        "Strategies": terminal.STRATEGY_COLUMNS,
        "Top kernels by GPU time": sections.top_kernels(a, TOP).cols,
        "Kernels by quantization idle": sections.quantization(a, TOP).cols,
        "Top-level NVTX ranges": sections.regions(a, TOP).cols,
        "Device idle gaps by cause": sections.gaps(a).cols,
        "Synchronization stalls by blocking call": sections.sync_stalls(a, 0).cols,
        "Memory copies and sets": sections.copies(a).cols,
        "Streams": sections.streams(a, TOP).cols,
        "Pipeline stages": sections.pipeline(a).cols,
        "Gate changes": gate_render.GATE_COLUMNS,
        "Gate calibration noise": gate_render.NOISE_COLUMNS,
    }
    doc = " ".join(
        (Path(__file__).resolve().parents[2] / "docs" / "terminal.md").read_text().split()
    )
    for title, cols in tables.items():
        assert f"- {title}: {_drop_order(cols)}" in doc, title


@pytest.mark.parametrize("width", [80, 120])
def test_a_long_kernel_name_takes_a_few_lines_in_a_finding(width):
    # tracelens' OWLv2 trace (MI300X): its persistent finding's kernel is a templated name of
    # 600+ characters; wrapped on words it took 13 lines of the list (80 columns) and 20 of
    # the table's "where" (120): now at most three, its start and end kept
    from conftest import PUBLIC

    out = _rendered(PUBLIC / "kineto" / "tracelens_owlv2_mi300x.json.gz", width).splitlines()
    start = next(i for i, line in enumerate(out) if "void at::native::elementwise" in line)
    end = next(i for i in range(start, len(out)) if "bool)#1})" in out[i])
    assert 1 <= end - start <= 2, out[start : end + 1]
    assert "range ProfilerStep" in out[end + 1] and "…" in "".join(out[start : end + 1])
