"""Several traces are the ranks of one job only when what they record allows it (issue 31):
traces of different profilers, two that say they are the same rank, different world sizes,
or GPU work hours apart on the UTC clock are refused with one line; --separate analyses
each on its own. The clocks each reader reports (Trace.epoch_offset_ns) are checked against
the files, read here without advisor."""

import gzip
import json
import re
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from advisor.trace.load import load_trace

ROOT = Path(__file__).resolve().parents[1]
NSYS_TRAIN = ROOT / "sample_traces/h200_train_steps.sqlite"
NSYS_SCHED = ROOT / "sample_traces/h200_scheduling.sqlite"
KINETO_TRAIN = ROOT / "sample_traces/kineto/h200_train_steps.pt.trace.json.gz"
KINETO = ROOT / "tests/data/public/kineto"


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", "analyze", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip


def _session(path: Path) -> tuple[int, int, int]:
    """(session start UTC ns, first GPU op start, last GPU op end) from the export."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    (epoch,) = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    lo, hi = [], []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_MEMSET"):  # fmt: skip
        a, b = db.execute(f"SELECT min(start), max(end) FROM {table}").fetchone()
        if a is not None:
            lo.append(a)
            hi.append(b)
    return epoch, min(lo), max(hi)


def _kineto_base(path: Path) -> int | None:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return doc.get("baseTimeNanoseconds")


def test_each_reader_says_what_its_clock_counts_from():
    epoch, _, _ = _session(NSYS_TRAIN)
    assert load_trace(NSYS_TRAIN).epoch_offset_ns == epoch
    base = _kineto_base(KINETO_TRAIN)
    assert base and load_trace(KINETO_TRAIN).epoch_offset_ns == base
    # no baseTimeNanoseconds: ts in us since the epoch (2023) -> 0; since boot -> unknown
    sampled = KINETO / "hta_sampled_rank-0.json.gz"
    assert _kineto_base(sampled) is None and load_trace(sampled).epoch_offset_ns == 0
    owl = KINETO / "tracelens_owlv2_mi300x.json.gz"  # (ts since boot, base at the end)
    assert load_trace(owl).epoch_offset_ns == _kineto_base(owl) == 1751410836000000000


@pytest.mark.parametrize(("ts_us", "offset"), [(1000.0, None), (1.7e15, 0)])
def test_a_kineto_clock_without_base_is_epoch_only_when_its_values_are(tmp_path, ts_us, offset):
    # one kernel at ts_us (us): 1 ms since boot says nothing of when; 1.7e15 us is 2023
    event = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts_us,
             "dur": 5.0, "args": {"device": 0, "stream": 7, "correlation": 1,
                                  "grid": [1, 1, 1], "block": [128, 1, 1]}}  # fmt: skip
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": [event]}))
    assert load_trace(path).epoch_offset_ns == offset


def test_traces_of_two_profilers_are_refused_with_one_line():
    proc = _run(NSYS_TRAIN, KINETO_TRAIN)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot be ranks of one job" in lines[0]
    assert "Nsight Systems" in lines[0] and "PyTorch profiler" in lines[0]
    assert "--separate" in lines[0]


def test_exports_hours_apart_are_refused_saying_how_far():
    # the truth from the exports: the scheduling capture ended before the training one began
    e1, _, end1 = _session(NSYS_SCHED)
    e2, start2, _ = _session(NSYS_TRAIN)
    hours = ((e2 + start2) - (e1 + end1)) / 3.6e12
    assert hours > 1
    proc = _run(NSYS_TRAIN, NSYS_SCHED)
    assert proc.returncode == 2
    assert f"ran {hours:.1f} hours apart" in proc.stderr
    ended = datetime.fromtimestamp((e1 + end1) / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f"the first ended {ended}" in proc.stderr


@pytest.mark.parametrize(
    ("traces", "why"),
    [
        (["hta_sampled_rank-0.json.gz", "hta_negative_queue_rank0.json.gz"],
         "both say they are rank 0"),
        (["hta_sampled_rank-1.json.gz", "hta_nccl_data.json.gz"],
         "their world sizes differ (128 and 2)"),
    ],
)  # fmt: skip
def test_ranks_the_traces_contradict_are_refused(traces, why):
    proc = _run(*(KINETO / t for t in traces))
    assert proc.returncode == 2 and why in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_real_jobs_are_still_one_job():
    proc = _run(*(KINETO / f"hta_sampled_rank-{r}.json.gz" for r in (0, 1)), "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["ranks"]) == 2


def test_separate_gives_each_traces_own_document():
    proc = _run(NSYS_TRAIN, KINETO_TRAIN, "--separate", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    alone = [json.loads(_run(t, "-f", "json").stdout) for t in (NSYS_TRAIN, KINETO_TRAIN)]
    assert docs == alone
    table = _run(NSYS_TRAIN, KINETO_TRAIN, "--separate")
    assert table.returncode == 0
    assert re.search(r"h200_train_steps\.sqlite", table.stdout)
    assert re.search(r"h200_train_steps\.pt\.trace\.json\.gz", table.stdout)
