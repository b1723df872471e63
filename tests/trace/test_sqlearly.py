"""The Nsight kernel table's early scan (advisor/trace/sqlearly.py): which command lines
start one, that the reader takes it only for the same plan of the same unchanged file, that
no other table's read waits for it, and that the tables are those of the usual read."""

import os
import shutil
import sqlite3
import subprocess
import sys

import pandas as pd
import pytest
from conftest import H200_SINGLE, PUBLIC_NSYS

from advisor.trace import nsys, sqlearly, sqlscan
from advisor.trace.nsys_schema import KERNEL

if not sqlscan.available():
    if os.environ.get("ADVISOR_REQUIRE_SCANNER"):
        raise RuntimeError("advisor.trace._sqlscan was not built (ADVISOR_REQUIRE_SCANNER set)")
    pytest.skip("the compiled SQLite scanner was not built", allow_module_level=True)


@pytest.fixture
def export(tmp_path):
    """A copy of the single-GPU H200 export (its own file: its identity is the test's)."""
    path = tmp_path / "steps.sqlite"
    shutil.copy(H200_SINGLE, path)
    return path


@pytest.fixture
def taken(monkeypatch):
    """What each ``sqlearly.take`` returned for the kernel table, in order."""
    got = []
    take = sqlearly.take

    def spy(path, table, plan):
        found = take(path, table, plan)
        if table == KERNEL:
            got.append(found)
        return found

    monkeypatch.setattr(sqlearly, "take", spy)
    yield got
    sqlearly.take(H200_SINGLE, KERNEL, None)  # (drop anything a failed test left started)


def test_the_one_large_sqlite_file_of_an_analyze_command_is_started(export, tmp_path):
    other = tmp_path / "other.sqlite"
    shutil.copy(export, other)
    text = tmp_path / "notes.sqlite"
    text.write_bytes(b"not a database" * 100)
    size = export.stat().st_size
    assert sqlearly.trace_argument(["analyze", str(export), "--format", "json"], 0) == export
    assert sqlearly.trace_argument(["analyze", str(export), str(text)], 0) == export
    assert sqlearly.trace_argument(["report", str(export)], 0) is None  # (analyze only)
    assert sqlearly.trace_argument(["analyze", str(export), str(other)], 0) is None  # (two)
    assert sqlearly.trace_argument(["analyze", str(export)], size + 1) is None  # (too small)
    assert sqlearly.trace_argument(["analyze", str(tmp_path / "missing.sqlite")], 0) is None
    assert sqlearly.trace_argument([], 0) is None


def _same(a, b) -> None:
    for name in ("kernels", "api", "nvtx", "memcpy"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))


def test_the_reader_takes_the_scan_and_reads_the_same_tables(export, taken):
    # (the early scan is an analysis's: planned for the lean read)
    sqlearly.start(["analyze", str(export)], min_bytes=0)
    early = nsys.read_nsys(export, lean=True)
    assert len(taken) == 1 and taken[0] is not None and taken[0].scanned is not None
    usual = nsys.read_nsys(export, lean=True)  # (nothing started: scanned by the reader)
    assert len(taken) == 2 and taken[1] is None
    _same(early, usual)
    with sqlite3.connect(export) as db:  # (every kernel row, counted by SQLite itself)
        (rows,) = db.execute(f"SELECT COUNT(*) FROM {KERNEL}").fetchone()
    assert len(early.kernels) == rows > 0


def test_a_file_changed_since_the_start_is_read_as_usual(export, taken):
    sqlearly.start(["analyze", str(export)], min_bytes=0)
    for thread in list(sqlearly._starters):
        thread.join()
    stat = export.stat()
    os.utime(export, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    trace = nsys.read_nsys(export, lean=True)
    assert taken == [None]
    _same(trace, nsys.read_nsys(export, lean=True))


def test_another_files_scan_is_dropped(export, tmp_path, taken):
    other = tmp_path / "other.sqlite"
    shutil.copy(export, other)
    sqlearly.start(["analyze", str(other)], min_bytes=0)
    nsys.read_nsys(export, lean=True)
    assert taken == [None]
    nsys.read_nsys(other, lean=True)  # (dropped by the first take: scanned as usual)
    assert taken == [None, None]


def test_a_full_read_neither_takes_the_analysiss_scan_nor_loses_a_column(tmp_path, taken):
    # the early scan leaves out the columns no metric reads; a full read (the Python API's
    # load_trace) plans them and scans the table itself; the lean read is the full one
    # without them (an export whose kernels have cluster dims: 2 x 1 x 1 and 4 x 1 x 1)
    export = tmp_path / "clusters.sqlite"
    shutil.copy(PUBLIC_NSYS / "nsysai_2gpu_sendrecv_after_nsys2026.2.sqlite", export)
    sqlearly.start(["analyze", str(export)], min_bytes=0)
    full = nsys.read_nsys(export)
    assert taken == [None]
    lean = nsys.read_nsys(export, lean=True)
    unread = ["cluster_x", "cluster_y", "cluster_z"]
    assert set(unread) <= set(full.kernels) and not set(unread) & set(lean.kernels)
    pd.testing.assert_frame_equal(full.kernels.drop(columns=unread), lean.kernels)
    assert sorted(full.kernels["cluster_x"].unique().tolist()) == [0, 2, 4]


def test_another_tables_read_neither_waits_nor_takes(export):
    sqlearly.start(["analyze", str(export)], min_bytes=0)
    assert sqlearly.take(export, "CUPTI_ACTIVITY_KIND_RUNTIME", None) is None
    assert sqlearly._starters  # (still there for the kernel table)
    sqlearly.take(export, KERNEL, None)  # (a plan of None matches nothing: dropped)
    assert not sqlearly._starters and not sqlearly._started


def test_a_scan_the_reader_did_not_take_is_not_held(export, monkeypatch):
    # the reader plans its own read (here: SQLite's, the scanner switched off for it): the
    # early scan is released once the kernel table is read, and one ending later not kept
    sqlearly.start(["analyze", str(export)], min_bytes=0)
    for thread in list(sqlearly._starters):
        thread.join()
    assert sqlearly._started
    monkeypatch.setattr(nsys, "read_columns", lambda *a, **k: None)
    nsys.read_nsys(export)
    assert not sqlearly._started and not sqlearly._starters
    sqlearly._begin(export)  # (a scan ending after the release)
    assert not sqlearly._started


def test_the_entry_and_the_early_scans_load_without_numpy_or_pandas():
    code = (
        "import sys\n"
        "import advisor.launch\n"
        "from advisor.trace import sqlearly, sqllayout, nsys_schema, _sqlscan\n"
        "assert 'numpy' not in sys.modules and 'pandas' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
