"""The compiled Kineto event scanner (advisor/trace/_kscan.c) against msgspec, the reference:
hand-built events with the expected columns worked out by hand, every Kineto fixture read both
ways (the same tables), the chunked and threaded memory-mapped read, and random corruptions
(the scanner never accepts bytes msgspec rejects, and agrees with it where it accepts)."""

import gzip
import json
import os
import re
import struct

import msgspec
import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.errors import AdvisorInputError
from advisor.trace import kineto
from advisor.trace.kineto import mapped
from advisor.trace.kineto.scan import chunk_of
from advisor.trace.load import load_trace

try:
    from advisor.trace import _kscan
except ImportError:  # not built (no C compiler, or a non-editable install beside this tree)
    if os.environ.get("ADVISOR_REQUIRE_SCANNER") == "1":  # (.ci/run: it must be built)
        raise
    pytest.skip("the compiled scanner is not built here", allow_module_level=True)

FIXTURES = sorted((SAMPLES / "kineto").glob("*.json.gz")) + sorted(
    (SAMPLES.parent / "tests" / "data" / "public" / "kineto").glob("*.json.gz")
)
TABLES = ("kernels", "api", "memcpy", "memset", "nvtx")

# Kernel with an escaped quote in its name, short grid, a block of two;
# a runtime call with an epoch-style timestamp (above 2^43 us: converted through the double,
# as kineto._ns does) and a 5-digit duration; an instant and a ts-less kernel (not kept);
# two cpu_ops of which the keep callback takes one; a python_function with a string pid.
EVENTS = b"""[
  {
    "ph": "X", "cat": "kernel", "name": "k\\"q", "pid": 0, "tid": 7,
    "ts": 5267163990010.123, "dur": 15.877,
    "args": {
      "External id": 5, "device": 1, "stream": 7, "correlation": 101, "grid": [7, 19],
      "block": [256, 2], "registers per thread": 196, "shared memory": 147456
    }
  },
  {
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11,
    "ts": 1695835542514261.5, "dur": 2.00049,
    "args": {"correlation": 101, "stream": "0x0"}
  },
  {"ph": "i", "cat": "kernel", "name": "not a complete event", "ts": 1},
  {"ph": "X", "cat": "kernel", "name": "no ts"},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 11, "ts": 2.5,
   "args": {"Input Dims": [[2, 3], [3, 4]]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 10, "tid": 11, "ts": 3},
  {"ph": "X", "cat": "python_function", "name": "f", "pid": "Spans", "tid": "x", "ts": 1}
]"""
CATS = ("kernel", "cuda_runtime", "cpu_op")


def _columns(found):
    rows, raw, names, closed = found
    types = {"cat": "b", "name": "i", "start": "q", "dur": "q", "args_off": "q", "args_len": "q"}
    cols = {k: struct.unpack(f"{rows}{types.get(k, 'd')}", v) for k, v in raw.items()}
    return rows, cols, names, closed


def _same(a, b) -> bool:
    return all(x == y or (x != x and y != y) for x, y in zip(a, b, strict=True))


def test_hand_built_columns():
    nan = float("nan")
    found = _kscan.scan(EVENTS, CATS, "kar", keep=lambda raw: raw == b"aten::mm")
    rows, c, names, closed = _columns(found)
    assert rows == 3 and closed == len(EVENTS)
    assert c["cat"] == (0, 1, 2)
    assert [names[i] for i in c["name"]] == [b'k\\"q', b"cudaLaunchKernel", b"aten::mm"]
    # 5267163990010.123 us -> ...010 us * 1000 + 123 ns; 1695835542514261.5 us (0.5 is
    # exact in the double) -> ...261 * 1000 + 500 ns; 2.5 us -> 2500 ns
    assert c["start"] == (5267163990010123, 1695835542514261500, 2500)
    # 15.877 us -> 15877 ns; 2.00049 us -> 2000.49 -> 2000 ns; no dur -> 0
    assert c["dur"] == (15877, 2000, 0)
    assert _same(c["pid"], (0, 10, 10)) and _same(c["tid"], (7, 11, 11))
    assert _same(c["device"], (1, nan, nan)) and _same(c["stream"], (7, nan, nan))
    assert _same(c["correlation"], (101, 101, nan))  # (the runtime's "stream" is not read)
    assert _same(c["grid_x"] + c["grid_y"] + c["grid_z"], (7, nan, nan, 19, nan, nan) + (nan,) * 3)
    assert _same(c["block_x"] + c["block_y"] + c["block_z"],
                 (256, nan, nan, 2, nan, nan, nan, nan, nan))  # fmt: skip
    assert _same(c["registers"], (196, nan, nan)) and _same(c["smem"], (147456, nan, nan))
    off, n = c["args_off"][2], c["args_len"][2]
    assert (c["args_len"][0], c["args_len"][1]) == (0, 0)  # ('k', 'a': fields, not spans)
    assert json.loads(EVENTS[off : off + n]) == {"Input Dims": [[2, 3], [3, 4]]}


def test_regions_between_cuts():
    # three events; a region ends at the comma after an event (stop) or where the array
    # closes, and starts at the '[' or at the comma before an event
    one = b'{"ph": "X", "cat": "kernel", "name": "a", "ts": 1}'
    buf = b"[" + one + b",\n  " + one + b",\n  " + one + b"]"
    first_cut = buf.index(b",\n  ")
    head = _kscan.scan(buf, ("kernel",), "k", 0, first_cut)
    rest = _kscan.scan(buf, ("kernel",), "k", first_cut)
    assert (head[0], head[3]) == (1, -1) and (rest[0], rest[3]) == (2, len(buf))
    assert _kscan.scan(buf, ("kernel",), "k", 1) is None  # not at '[' or ','
    assert _kscan.scan(buf, ("kernel",), "k", 0, first_cut + 3) is None  # not a cut


@pytest.mark.parametrize(
    "event",
    [
        b'{"ph": "X", "c\\u0061t": "kernel", "name": "k", "ts": 1}',  # an escaped key
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "ts": 2}',  # a duplicate key
        # a string that may be a float literal (Python's float() decides: msgspec reads it)
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"device": "1.5e"}}',
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": []}',
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"grid": [1, true]}}',
        # what kineto._xyz and _num count as malformed (a warning): msgspec reads and counts
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"block": [256, null, 1]}}',
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"grid": [8, 1, 1, 9]}}',
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"grid": []}}',
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"device": "abc"}}',
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"stream": ""}}',
        b'{"ph": "X", "cat": "kernel", "name": 5, "ts": 1}',
        b'{"ph": "X", "cat": "python_function", "name": "f", "ts": 01}',  # not JSON
        b'{"ph": "X", "cat": "python_function", "name": "\xff", "ts": 1}',  # not UTF-8
    ],
)
def test_declines_what_it_does_not_read_as_msgspec_does(event, tmp_path):
    buf = b"[" + event + b"]"
    assert _kscan.scan(buf, CATS, "kar") is None
    # and the trace reads (or fails) exactly as with msgspec alone
    kernel = b'{"ph": "X", "cat": "kernel", "name": "g", "ts": 5, "args": {"device": 0}}'
    doc = b'{"traceEvents": [\n  ' + kernel + b",\n  " + event + b",\n  " + kernel + b"\n  ]}"
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(doc)
    assert _read_both(path)


def _read_both(path) -> bool:
    """Read ``path`` with the scanner and with msgspec alone: the same Trace tables, or the
    same error."""
    out = []
    for flag in ("1", "0"):
        os.environ[kineto.SCANNER_ENV] = flag
        try:
            out.append(kineto.read_kineto(path))
        except AdvisorInputError as exc:
            out.append(str(exc))
        finally:
            os.environ.pop(kineto.SCANNER_ENV)
    a, b = out
    if isinstance(a, str) or isinstance(b, str):
        # (msgspec's location is relative to what it decoded: a chunk or the document)
        where = re.compile(r" \(byte \d+\)| - at `[^`]*`")
        assert where.sub("", a) == where.sub("", b)
        return True
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    assert (a.gpus, a.rank, a.warnings, a.sources) == (b.gpus, b.rank, b.warnings, b.sources)
    return True


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_fixtures_read_alike_and_are_scanned(fixture, tmp_path, monkeypatch):
    plain = tmp_path / fixture.name.removesuffix(".gz")
    plain.write_bytes(gzip.decompress(fixture.read_bytes()))
    scanned = []
    chunk = mapped._chunk  # (what the memory-mapped read makes of each chunk's raw scan)

    def chunk_and_keep(mm, start, stop, raw):
        scanned.append(raw is not None and chunk_of(mm, raw) is not None)
        return chunk(mm, start, stop, raw)

    monkeypatch.setattr(mapped, "_chunk", chunk_and_keep)
    assert _read_both(plain)
    if scanned:  # (a minified document is decoded whole: nothing to scan)
        assert all(scanned), "the scanner declined a chunk of a fixture"
    # small chunks read by three threads: the same tables as one pass
    whole = kineto.read_kineto(plain, processes=1)
    monkeypatch.setattr(kineto, "SCAN_CHUNK_BYTES", 4096)
    chunked = kineto.read_kineto(plain, processes=3)
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(whole, name), getattr(chunked, name))


def test_gzip_and_plain_read_alike(tmp_path):
    src = SAMPLES / "kineto" / "h200_train_steps.pt.trace.json.gz"
    plain = tmp_path / "steps.pt.trace.json"
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    a, b = load_trace(src), load_trace(plain)
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))


def test_keep_callback_errors_propagate():
    def boom(raw):
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        _kscan.scan(EVENTS, CATS, "kar", keep=boom)


# --- random corruptions ----------------------------------------------------------------

BASE = bytes(
    b"[\n  "
    + b",\n  ".join(
        json.dumps(e).encode()
        for e in [
            {"ph": "X", "cat": "kernel", "name": "gemm\u00e9", "pid": 0, "tid": 7,
             "ts": 12.5, "dur": 3.25, "args": {"device": 0, "stream": 7, "correlation": 9,
                                               "grid": [4, 2, 1], "block": [128, 1, 1],
                                               "registers per thread": 32,
                                               "shared memory": 1024}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 3,
             "tid": 4, "ts": 11.0, "dur": 1.5, "args": {"correlation": 9}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)",
             "pid": 0, "tid": 7, "ts": 20, "dur": 1, "args": {"device": 0, "stream": 7,
                                                               "bytes": 64, "correlation": 10}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 3, "tid": 4, "ts": 10,
             "dur": 5, "args": {"Input Dims": [[8, 16], [16, 4]], "Input type": ["float"]}},
            {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 3, "tid": 4,
             "ts": 9, "dur": 30},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "pid": 3, "tid": 4, "ts": 11, "id": 9},
        ]
    )
    + b"\n]"
)  # fmt: skip


def _tables(chunk) -> dict:
    collect = kineto._Collector()
    collect.append(chunk)
    return {k: v for k, v in collect.tables().items() if v is not None}


def _reference(buf: bytes):
    try:
        return _tables(kineto._decode_events(kineto._EVENTS.decode(buf)))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "error"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(BASE) - 1),
            st.sampled_from(["delete", "insert", "replace"]),
            st.sampled_from(list(b'{}[],:"\\ 0123456789.-eEtrufalsn\n\xc3\xff')),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_corruptions_are_declined_or_read_alike(edits):
    buf = bytearray(BASE)
    for at, op, byte in edits:
        at = min(at, len(buf) - 1)
        if op == "delete":
            del buf[at]
        elif op == "insert":
            buf.insert(at, byte)
        else:
            buf[at] = byte
    buf = bytes(buf)
    # (a region may start at a cut's comma, which the scanner reads as the array's '[': the
    # reference decodes the same events)
    ref = _reference(b"[" + buf[1:] if buf[:1] == b"," else buf)
    found = kineto._scan_events(buf)
    if found is None or found[1] != len(buf):
        return  # declined: msgspec decides (add_json)
    assert ref != "error", "the scanner accepted bytes msgspec rejects"
    tables = _tables(found[0])
    assert set(tables) == set(ref)
    for name, table in tables.items():
        pd.testing.assert_frame_equal(table, ref[name], check_exact=True)


def test_uncorrupted_base_is_scanned():
    found = kineto._scan_events(BASE)
    assert found is not None and found[1] == len(BASE)
    tables, ref = _tables(found[0]), _reference(BASE)
    assert set(tables) == set(ref) == {"kernels", "api", "memcpy", "nvtx"}
    # (in the trace's order)
    assert tables["nvtx"]["text"].tolist() == ["aten::mm, sizes = [[8,16],[16,4]]", "step"]
    assert np.array_equal(tables["kernels"]["start"], [12500])


def test_numbers_written_as_strings_read_as_the_reference_reads_them(tmp_path):
    # PyTorch <= 1.10 wrote thread ids as strings ("1890023232", and "stream 7" for GPU
    # rows): digits are the number, text no float can hold is NaN, as msgspec's reader has it
    buf = (b'[{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 1, '
           b'"args": {"device": "1", "correlation": 5}}, {"ph": "X", "cat": "cuda_runtime", '
           b'"name": "cudaLaunchKernel", "pid": 7, "tid": "1890023232", "ts": 0, "dur": 1, '
           b'"args": {"correlation": 5}}]')  # fmt: skip
    found = _kscan.scan(buf, ("kernel", "cuda_runtime"), "ka")
    assert found is not None
    plain = tmp_path / "old.json"
    plain.write_bytes(b'{"traceEvents": ' + buf + b"}")
    assert _read_both(plain)
    t = kineto.read_kineto(plain)
    assert t.api["tid"].tolist() == [1890023232] and t.kernels["device"].tolist() == [1]
