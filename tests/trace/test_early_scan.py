"""The early scan (advisor/trace/kineto/early.py, chunks.py): which command lines start one,
that the reader uses it only for the same unchanged file, and that the tables it gives are
those of the usual read."""

import gzip
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import SAMPLES

from advisor.trace import kineto
from advisor.trace.kineto import early
from advisor.trace.kineto import head as head_module
from advisor.trace.kineto.chunks import ChunkScans
from advisor.trace.kineto.head import Head as real_head

try:
    from advisor.trace import _kscan
except ImportError:  # not built (no C compiler, or a non-editable install beside this tree)
    if os.environ.get("ADVISOR_REQUIRE_SCANNER") == "1":  # (.ci/run: it must be built)
        raise
    pytest.skip("the compiled scanner is not built here", allow_module_level=True)

TABLES = ("kernels", "api", "memcpy", "memset", "nvtx", "cpu_ops")
SOURCE = SAMPLES / "kineto" / "h200_train_steps.pt.trace.json.gz"


@pytest.fixture
def plain(tmp_path):
    """The training-steps capture uncompressed (laid out as Kineto writes it)."""
    path = tmp_path / "steps.pt.trace.json"
    path.write_bytes(gzip.decompress(SOURCE.read_bytes()))
    return path


@pytest.fixture
def taken(monkeypatch):
    """What each ``early.take`` returned, in order; small chunks (several per fixture)."""
    got = []
    take = early.take

    def spy(path, fh):
        found = take(path, fh)
        got.append(found)
        return found

    monkeypatch.setattr(early, "take", spy)
    monkeypatch.setattr(kineto, "SCAN_CHUNK_BYTES", 64 << 10)
    yield got
    with open(SOURCE, "rb") as fh:  # (drop anything a failed test left started)
        early.take(SOURCE, fh)


def _same_tables(a, b) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    assert (a.gpus, a.warnings, a.sources) == (b.gpus, b.warnings, b.sources)


def test_the_one_large_json_of_an_analyze_command_is_started(tmp_path):
    big, small, other = tmp_path / "big.json", tmp_path / "spec.json", tmp_path / "b2.JSON"
    big.write_bytes(b"x" * 100)
    small.write_bytes(b"x" * 10)
    other.write_bytes(b"x" * 100)
    (tmp_path / "dir.json").mkdir()
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(b"x" * 100)
    arg = early.trace_argument
    assert arg(["analyze", str(big), "--gpu-spec", str(small)], 50) == big
    assert arg(["analyze", "--format", "json", str(big), str(gz)], 50) == big
    assert arg(["analyze", str(big), str(tmp_path / "dir.json")], 50) == big
    assert arg(["analyze", str(big), str(other)], 50) is None  # (two: the ranks of a job)
    assert arg(["analyze", str(small)], 50) is None  # (small)
    assert arg(["analyze", str(tmp_path / "missing.json")], 50) is None
    assert arg(["report", str(big)], 50) is None  # (another command)
    assert arg([], 50) is None


def test_the_reader_takes_the_scan_and_reads_the_same_tables(plain, taken):
    usual = kineto.read_kineto(plain, processes=2)
    assert taken == [None]
    early.start(["analyze", str(plain)], min_bytes=0)
    read = kineto.read_kineto(plain, processes=2)
    assert isinstance(taken[1], ChunkScans) and len(taken[1].cuts) > 3
    assert taken[1].mm.closed  # (finished: its map is closed)
    _same_tables(usual, read)
    # taken once: the next read reads as usual
    kineto.read_kineto(plain, processes=2)
    assert taken[2] is None


def test_a_file_changed_since_the_start_is_read_as_usual(plain, taken):
    early.start(["analyze", str(plain)], min_bytes=0)
    for thread in early._starters:
        thread.join()
    started = next(iter(early._started.values()))
    for worker in started._workers:  # (a file cut short under a running scan's map: SIGBUS)
        worker.join()  # (no step: the workers stop once every chunk is scanned)
    text = plain.read_bytes()
    plain.write_bytes(text.replace(b'"dur": 1', b'"dur": 2', 1))
    read = kineto.read_kineto(plain, processes=2)
    assert taken == [None] and started.mm.closed  # (dropped, its map closed)
    os.environ.pop(kineto.SCANNER_ENV, None)
    _same_tables(read, kineto.read_kineto(plain, processes=1))


def test_another_files_scan_is_dropped(plain, tmp_path, taken):
    second = tmp_path / "second.pt.trace.json"
    second.write_bytes(plain.read_bytes())
    early.start(["analyze", str(second)], min_bytes=0)
    kineto.read_kineto(plain, processes=2)
    assert taken == [None] and early._started == {}


@pytest.mark.parametrize("case", ["gzip", "scanner off", "not laid out", "not kineto"])
def test_nothing_starts_where_the_reader_would_not_scan(case, plain, tmp_path, monkeypatch):
    path = plain
    if case == "gzip":
        path = tmp_path / "g.json"
        path.write_bytes(SOURCE.read_bytes())
    elif case == "scanner off":
        monkeypatch.setenv(kineto.SCANNER_ENV, "0")
    elif case == "not laid out":  # (minified: no event starts a line)
        path.write_bytes(b'{"traceEvents": [{"ph": "X"}]}')
    else:  # (another tool's JSON: not even its head is read on)
        path.write_bytes(b'{"rocprof": [\n  {"x": 1},\n  {"x": 2}]}')
    heads = []
    monkeypatch.setattr(head_module, "Head", lambda fh: heads.append(fh) or real_head(fh))
    early.start(["analyze", str(path)], min_bytes=0)
    for thread in early._starters:
        thread.join()
    assert early._started == {}
    assert len(heads) == (case == "not laid out")  # (read only where it could be Kineto)


def _finished_by(mm, a, b, raw) -> tuple:
    return a, raw is not None, threading.current_thread().name


def test_chunks_scanned_before_the_step_is_known_are_finished_in_order(plain):
    # (a scanner 2 ms slower per chunk: the worker is still scanning when the step comes)
    slow = SimpleNamespace(scan=lambda *a: time.sleep(0.002) or _kscan.scan(*a),
                           SCAN_CATEGORIES=_kscan.SCAN_CATEGORIES,
                           SCAN_MODES=_kscan.SCAN_MODES)  # fmt: skip
    with open(plain, "rb") as fh:
        head = kineto.reader.Head(fh)
        scans = ChunkScans(fh, head.bracket, 1, 64 << 10, slow, background=True)
    assert len(scans.cuts) > 20
    waited = time.monotonic()
    while len(scans._raw) < 2:  # (the first two scanned and kept raw: no step yet)
        assert time.monotonic() - waited < 30, "the background worker scanned nothing"
        time.sleep(0.001)
    parts = scans.finish(_finished_by, threads=2)
    assert [a for a, _, _ in parts] == [a for a, _ in scans.cuts]  # (in order, all scanned)
    assert all(ok for _, ok, _ in parts) and scans.mm.closed and not scans._raw
    # the chunks are finished by the worker and the calling thread alike
    assert {by for _, _, by in parts} == {"advisor-scan", threading.current_thread().name}


def test_chunks_all_scanned_before_the_step_are_finished_on_two_threads(plain):
    """The early worker returns once it has scanned every chunk; the finishing steps then
    get a worker of their own beside the calling thread (they once ran on the caller
    alone, the second core idle: 80 ms of a 100K-kernel trace's read)."""
    with open(plain, "rb") as fh:
        head = kineto.reader.Head(fh)
        scans = ChunkScans(fh, head.bracket, 1, 64 << 10, _kscan, background=True)
    scans._workers[0].join(timeout=30)  # (every chunk scanned and kept raw)
    assert not scans._workers[0].is_alive() and len(scans._raw) == len(scans.cuts) > 20

    def slow_step(mm, a, b, raw):
        time.sleep(0.005)  # (long enough for both threads to take chunks)
        return _finished_by(mm, a, b, raw)

    parts = scans.finish(slow_step, threads=2)
    assert [a for a, _, _ in parts] == [a for a, _ in scans.cuts]
    assert {by for _, _, by in parts} == {"advisor-scan", threading.current_thread().name}


def test_closing_leaves_the_chunks_not_started(plain):
    with open(plain, "rb") as fh:
        head = kineto.reader.Head(fh)
        scans = ChunkScans(fh, head.bracket, 1, 4 << 10, _kscan, background=True)
    scans.close()
    assert scans.mm.closed and not any(w.is_alive() for w in scans._workers)
    assert not scans._done[-1].done()  # (a file of many 4 KB chunks: the last never began)


def test_a_failing_step_is_raised_and_the_map_closed(plain):
    def boom(mm, a, b, raw):
        raise ValueError("no")

    with open(plain, "rb") as fh:
        head = kineto.reader.Head(fh)
        scans = ChunkScans(fh, head.bracket, 2, 64 << 10, _kscan)
    with pytest.raises(ValueError):
        scans.finish(boom, threads=2)
    assert scans.mm.closed


def test_the_entry_the_package_and_the_early_scan_load_without_numpy_or_pandas():
    code = (
        "import sys\n"
        "import advisor.launch\n"  # (the console entry, up to its start of the scan)
        "from advisor.trace.kineto import early, chunks, head\n"
        "from advisor.trace import _kscan\n"
        "assert 'numpy' not in sys.modules and 'pandas' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
