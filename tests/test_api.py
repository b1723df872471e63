"""The Python API (docs/api.md): its example runs, and the result it returns is the one the
CLI renders (same document, same numbers), for one trace and for ranks of one job."""

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import advisor
from advisor.api import IDLE_CAUSES, gate_rows
from advisor.errors import AdvisorInputError

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "sample_traces" / "h200_train_steps.sqlite"
TWO_GPUS = ROOT / "sample_traces" / "h200x2_allreduce.sqlite"


def _cli_json(*args) -> dict:
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", *args, "-f", "json"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def train():
    return advisor.analyze(str(TRAIN))


def test_the_docs_example_runs_and_prints_what_the_json_says(monkeypatch):
    text = (ROOT / "docs" / "api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "docs/api.md has no python example"
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "docs/api.md", "exec"), {})
    printed = out.getvalue()
    # the truth from the CLI's JSON, not from the API: the steady cause with the most idle
    summary = _cli_json(str(TRAIN))["summary"]
    steady = {c: summary[k] for c, k in IDLE_CAUSES.items() if c != "startup"}
    worst = max(steady, key=steady.get)
    assert f"most idle: {worst} {steady[worst] / 1e6:.2f} ms" in printed
    assert "host-bound-steps" in printed


def test_the_result_is_the_document_the_cli_prints(train):
    assert json.loads(train.to_json()) == _cli_json(str(TRAIN))
    # byte for byte: the CLI writes the document's UTF-8 bytes and one newline
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", str(TRAIN), "-f", "json"],
                          capture_output=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert proc.stdout == train.to_json_bytes() + b"\n" == (train.to_json() + "\n").encode()


def test_the_tables_are_the_documents_rows(train):
    doc = train.document
    assert len(train.findings) == len(doc["findings"])
    assert train.findings["est_savings_ns"].tolist() == [f["est_savings_ns"] for f in
                                                         doc["findings"]]  # fmt: skip
    assert train.kernels["total_ns"].sum() == sum(k["total_ns"] for k in doc["kernels"])
    assert train.steps.to_dict("records") == doc["steps"]
    assert len(train.copies) == len(doc["copies"]) and len(train.ranges) == len(doc["regions"])


# traces whose idle has several causes: launch overhead and host busy (train), a queued
# wait behind an event (event_wait), a DataLoader and blocking copies (Kineto)
IDLE_TRACES = [TRAIN, ROOT / "sample_traces/why/why_event_wait.sqlite",
               ROOT / "sample_traces/why/why_dataloader.pt.trace.json.gz",
               ROOT / "sample_traces/why/why_pageable_copy.pt.trace.json.gz"]  # fmt: skip


@pytest.mark.parametrize("path", IDLE_TRACES, ids=lambda p: p.name)
def test_idle_by_cause_holds_every_idle_ns_once(path):
    result = advisor.analyze(str(path))
    s = result.summary
    t = result.idle_by_cause
    assert t["idle_ns"].sum() == s["idle_ns"] == s["window_ns"] - s["gpu_busy_ns"]
    steady = s["window_ns"] - s["startup_idle_ns"]
    share = t.set_index("cause")["share_of_steady"]
    for cause, key in IDLE_CAUSES.items():
        if cause != "startup":
            assert share[cause] == pytest.approx(s[key] / steady)
    assert pd.isna(share["startup"])
    assert (t["idle_ns"] > 0).sum() >= 2  # (several causes: the sum is a real check)


def test_steps_in_the_document_are_the_step_findings_numbers(train):
    # the host-bound-steps finding's saving is the step table's graph saving
    step = train.steps.iloc[0]
    finding = train.findings[train.findings["rule"] == "host-bound-steps"].iloc[0]
    assert step["name"] == finding["region"]
    assert step["graph_saving_ns"] == finding["est_savings_ns"]
    assert step["steps"] >= step["steady_steps"] >= 1


def test_ranks_of_one_job_as_the_cli_gives_them(tmp_path):
    sys.path.insert(0, str(ROOT / "sample_traces"))
    from split_ranks import split  # (the sample's own splitter)

    ranks = split(str(TWO_GPUS), tmp_path)
    result = advisor.analyze([str(p) for p in ranks], jobs=1)
    assert result.ranks is not None and len(result.ranks) == 2
    assert json.loads(result.to_json()) == _cli_json(*map(str, ranks), "--jobs", "1")


def test_a_folder_stands_for_the_traces_of_one_job(tmp_path):
    from advisor.api import folder_traces

    public = ROOT / "tests" / "data" / "public" / "kineto"
    ranks = ["hta_sampled_rank-0.json.gz", "hta_sampled_rank-1.json.gz"]
    kineto = tmp_path / "kineto"
    kineto.mkdir()
    for name in ranks:  # (each rank's profiler writes its own trace)
        (kineto / name).write_bytes((public / name).read_bytes())
    assert folder_traces(kineto) == [kineto / n for n in ranks]
    by_folder = advisor.analyze(str(kineto), jobs=1)
    by_files = advisor.analyze([str(kineto / n) for n in ranks], jobs=1)
    assert by_folder.ranks is not None and len(by_folder.ranks) == 2
    assert by_folder.to_json() == by_files.to_json()
    # Nsight exports win over JSON; a rocprof output folder (CSVs) is one trace; so is a
    # folder holding none of these (its reader says what is missing)
    (kineto / "r0.sqlite").write_bytes(b"")
    assert folder_traces(kineto) == [kineto / "r0.sqlite"]
    (rocprof := tmp_path / "rocprof").mkdir()
    (rocprof / "a_kernel_trace.csv").write_text("")
    (rocprof / "a_results.json").write_text("")
    assert folder_traces(rocprof) == [] and folder_traces(tmp_path) == []


def test_options_are_the_clis_and_bad_ones_say_which(tmp_path):
    with pytest.raises(AdvisorInputError, match="--shape"):
        advisor.analyze(str(TRAIN), shapes=["no-shape-here"])
    one = advisor.analyze(str(TRAIN), device=0)
    assert one.document["selection"]["device"] == 0
    with pytest.raises(AdvisorInputError):
        advisor.analyze(str(TRAIN), device=7)


def test_report_and_emit_from_the_result(train, tmp_path):
    written = train.write_report(tmp_path / "r.md")
    assert written[0] == tmp_path / "r.md" and (tmp_path / "r.md").read_text().startswith("#")
    emitted = train.emit(tmp_path / "cfg")
    assert any(f.config for f in emitted.finding_list)
    assert all(Path(p).exists() for f in emitted.finding_list for p in (f.config or ()))


def test_report_of_the_ranks_of_one_job(tmp_path):
    # a merged job keeps its ranks' busy time as totals, not over time: the report says
    # there is no timeline instead of failing (it was a RuntimeError through the API)
    public = ROOT / "tests/data/public/kineto"
    ranks = [str(public / f"hta_sampled_rank-{r}.json.gz") for r in (0, 1)]
    written = advisor.analyze(ranks).write_report(tmp_path / "job.md")
    text = (tmp_path / "job.md").read_text()
    assert written[0] == tmp_path / "job.md" and "No timeline chart for the ranks of a job" in text
    assert not (tmp_path / "job_assets" / "timeline.png").exists()
    assert (tmp_path / "job_assets" / "gaps.png").exists()


def test_gate_on_the_same_trace_passes_with_every_row_unchanged():
    result = advisor.gate(str(TRAIN), str(TRAIN))
    rows = gate_rows(result)
    assert not result.failed and len(rows) > 0
    assert set(rows["status"]) == {"unchanged"}


def test_import_advisor_is_light_and_the_cli_has_version():
    code = "import sys, advisor; print('pandas' in sys.modules, advisor.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert out.stdout.split() == ["False", advisor.__version__]
    proc = subprocess.run([sys.executable, "-m", "advisor", "--version"], capture_output=True,
                          text=True, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == f"advisor {advisor.__version__}\n"
