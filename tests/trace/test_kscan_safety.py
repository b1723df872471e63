"""The compiled scanner's safety contract (advisor/trace/_kscan.c): which buffers it takes
(bytes-like, read access only; a writable one is scanned holding the GIL and never written),
``start``/``stop`` checked (a ValueError, never a read outside the buffer or past ``stop``),
nesting at and one past its depth limit (inside args too: declined there, and the trace still
reads as msgspec reads it), and the bound on distinct names. tests/sanitize/run.sh runs this
file again under AddressSanitizer and UndefinedBehaviorSanitizer."""

from __future__ import annotations

import array
import gc
import mmap
import os
import re

import msgspec
import numpy as np
import pandas as pd
import pytest

from advisor.errors import AdvisorInputError
from advisor.trace import kineto

try:
    from advisor.trace import _kscan
except ImportError:  # not built (no C compiler, or a non-editable install beside this tree)
    if os.environ.get("ADVISOR_REQUIRE_SCANNER") == "1":  # (.ci/run: it must be built)
        raise
    pytest.skip("the compiled scanner is not built here", allow_module_level=True)

KERNEL = b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"device": 0}}'
EVENTS = b"[\n  " + b",\n  ".join([KERNEL] * 3) + b"\n]"
CATS, MODES = kineto.SCAN_CATEGORIES, kineto.SCAN_MODES


def _scan(buf, start: int = 0, stop: int = -1, keep=None):
    """scan's answer with each column as its bytes (columns are buffers: compared by value)."""
    found = _kscan.scan(buf, CATS, MODES, start, stop, keep)
    if found is None:
        return None
    rows, columns, names, closed = found
    return rows, {k: bytes(v) for k, v in columns.items()}, names, closed


def _rows(found) -> int:
    assert found is not None
    return found[0]


# --- buffers ------------------------------------------------------------------------------


def test_read_only_buffers_are_scanned_alike(tmp_path):
    path = tmp_path / "events.json"
    path.write_bytes(EVENTS)
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        from_map = _scan(mm)
    with memoryview(EVENTS) as view:
        from_view = _scan(view)
    assert from_map == from_view == _scan(EVENTS)
    assert _rows(from_map) == 3 and from_map[3] == len(EVENTS)
    assert path.read_bytes() == EVENTS  # (a write into the read-only map would have faulted)


def test_a_writable_buffer_is_scanned_and_left_as_it_was():
    buf = bytearray(EVENTS)
    assert _scan(buf) == _scan(EVENTS)
    with memoryview(buf) as view:
        assert _scan(view[: len(buf)]) == _scan(EVENTS)
    assert buf == EVENTS


def test_a_buffer_changed_during_the_scan_is_never_read_outside():
    # the keep callback (run with the GIL, mid-scan) overwrites the writable buffer: the
    # scan may decline or read the new bytes, but reads nothing outside the buffer (the
    # sanitizer build checks that) and does not crash
    events = b"[" + b",".join(
        b'{"ph": "X", "cat": "cpu_op", "name": "op%d", "ts": 1, "args": {"a": [1, 2]}}' % i
        for i in range(50)
    ) + b"]"  # fmt: skip
    for junk in (b" ", b"[", b"{", b'"', b"\\", b"9", b"\xff"):
        buf = bytearray(events)

        def scribble(_raw: bytes, buf=buf, junk=junk) -> bool:
            buf[:] = junk * len(buf)  # (same length: an exported bytearray cannot resize)
            return True

        found = _kscan.scan(buf, CATS, MODES, 0, -1, scribble)
        assert found is None or found[0] >= 1
        assert buf == junk * len(events)


@pytest.mark.parametrize(
    "buf",
    [array.array("i", [1, 2, 3]), "[]", memoryview(b"[ ]  ")[::2], 5],
    ids=["int array", "str", "strided view", "int"],
)
def test_only_contiguous_buffers_of_bytes_are_taken(buf):
    with pytest.raises((TypeError, BufferError)):
        _scan(buf)


# --- start and stop -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "start, stop",
    [(-1, -1), (len(EVENTS) + 1, -1), (0, -2), (0, len(EVENTS) + 1), (10, 9), (-5, 3)],
)
def test_start_and_stop_outside_the_buffer_are_refused(start, stop):
    with pytest.raises(ValueError, match="start|stop"):
        _scan(EVENTS, start, stop)


def test_start_and_stop_too_large_for_an_offset_are_refused():
    with pytest.raises(OverflowError):
        _scan(EVENTS, 2**70)
    with pytest.raises(OverflowError):
        _scan(EVENTS, 0, -(2**70))


def test_empty_regions_are_declined():
    assert _scan(EVENTS, len(EVENTS)) is None  # (nothing there: not '[' or ',')
    assert _scan(EVENTS, 0, 0) is None
    cut = EVENTS.index(b",\n  ")
    assert _scan(EVENTS, cut, cut) is None
    assert _scan(b"") is None


def test_nothing_at_or_past_stop_is_read():
    cut = EVENTS.index(b",\n  ")
    first = _scan(EVENTS, 0, cut)
    assert _rows(first) == 1 and first[3] == -1
    # the same bytes with garbage from stop on, or with nothing after stop
    assert _scan(EVENTS[:cut] + b"\xff{[garbage", 0, cut) == first
    assert _scan(EVENTS[:cut], 0, cut) == first
    # an event that runs past stop is declined (stop is not the comma after an event)
    assert _scan(EVENTS, 0, cut - 2) is None
    assert _scan(EVENTS[: cut - 2], 0, cut - 2) is None


@pytest.mark.parametrize(
    "categories, modes",
    [(("kernel",), "x"), (("kernel",), "kk"), (("kernel",) * 17, "k" * 17), (("kernel",), "k\0")],
)
def test_categories_and_modes_are_checked(categories, modes):
    with pytest.raises(ValueError):
        _kscan.scan(EVENTS, categories, modes)


def test_a_category_that_is_not_text_is_refused():
    with pytest.raises(TypeError):
        _kscan.scan(EVENTS, (b"kernel",), "k")


# --- nesting depth ------------------------------------------------------------------------


def _nest(depth: int, kind: str) -> bytes:
    """A value of ``depth`` containers: objects ``{"a": ...}`` or arrays ``[...]``."""
    if kind == "object":
        return b'{"a": ' * depth + b"1" + b"}" * depth
    return b"[" * depth + b"1" + b"]" * depth


def _event(where: str, value: bytes) -> bytes:
    """One kept event with ``value`` at ``where``: a member of the event, or of its args,
    for a kernel (its args read; the category before or after args), a cpu_op (its raw args
    returned) and a user_annotation (its args skipped)."""
    if where == "event":
        return b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "x": ' + value + b"}"
    args = b'{"device": 0, "deep": ' + value + b"}"
    if where == "kernel args, cat first":
        return b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": ' + args + b"}"
    if where == "kernel args, cat last":
        return b'{"ph": "X", "name": "k", "ts": 1, "args": ' + args + b', "cat": "kernel"}'
    cat = b"cpu_op" if where == "cpu_op args" else b"user_annotation"
    return b'{"ph": "X", "cat": "' + cat + b'", "name": "aten::mm", "ts": 1, "args": ' + args + b"}"


WHERE = ("event", "kernel args, cat first", "kernel args, cat last", "cpu_op args",
         "user_annotation args")  # fmt: skip


def _tables(chunk) -> dict:
    collect = kineto._Collector()
    collect.append(chunk)
    return {k: v for k, v in collect.tables().items() if v is not None}


def _same_as_msgspec(buf: bytes) -> None:
    found = kineto._scan_events(buf)
    assert found is not None and found[1] == len(buf)
    ref = _tables(kineto._decode_events(kineto._EVENTS.decode(buf)))
    tables = _tables(found[0])
    assert set(tables) == set(ref)
    for name, table in tables.items():
        pd.testing.assert_frame_equal(table, ref[name], check_exact=True)


@pytest.mark.parametrize("kind", ["object", "array"])
@pytest.mark.parametrize("where", WHERE)
def test_nesting_at_the_limit_is_scanned_and_one_past_is_declined(where, kind):
    limit = _kscan.MAX_DEPTH
    assert limit == 256
    inside = 0 if where == "event" else 1  # (an args member is inside the args object)
    for depth in (limit - 1 - inside, limit - inside):  # 255 and 256 containers in all
        _same_as_msgspec(b"[" + _event(where, _nest(depth, kind)) + b"]")
    past = b"[" + _event(where, _nest(limit + 1 - inside, kind)) + b"]"  # 257
    assert _scan(past) is None
    msgspec.json.decode(past)  # (well-formed JSON: msgspec decides, and reads it)


def test_nesting_one_past_the_limit_reads_as_msgspec_reads_it(tmp_path):
    limit = _kscan.MAX_DEPTH
    deep = _event("kernel args, cat first", _nest(limit, "array"))
    doc = b'{"traceEvents": [\n  ' + KERNEL + b",\n  " + deep + b",\n  " + KERNEL + b"\n]}"
    path = tmp_path / "deep.pt.trace.json"
    path.write_bytes(doc)
    reads = []
    for flag in ("1", "0"):  # the scanner (declining the chunk), then msgspec alone
        os.environ[kineto.SCANNER_ENV] = flag
        try:
            reads.append(kineto.read_kineto(path))
        finally:
            os.environ.pop(kineto.SCANNER_ENV)
    pd.testing.assert_frame_equal(reads[0].kernels, reads[1].kernels, check_exact=True)
    assert len(reads[0].kernels) == 3


def test_nesting_far_past_the_limit_is_bad_input(tmp_path):
    deep = _event("kernel args, cat first", _nest(5000, "object"))
    path = tmp_path / "deep.pt.trace.json"
    path.write_bytes(b'{"traceEvents": [\n  ' + KERNEL + b",\n  " + deep + b"\n]}")
    with pytest.raises(AdvisorInputError, match="nests deeper"):
        kineto.read_kineto(path)


def test_a_grid_nested_in_a_list_is_declined():
    event = b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"grid": [[1], 2]}}'
    assert _scan(b"[" + event + b"]") is None


# --- what msgspec rejects anywhere -----------------------------------------------------------

ANY = b'{"ph": "i", "cat": "python_function", "name": "f", "ts": 1'  # an event not kept


@pytest.mark.parametrize(
    "event",
    [
        ANY + b', "x": "\\ud800"}',  # a high surrogate alone (in a value nobody reads)
        ANY + b', "x": "\\ud800\\u0041"}',  # ... followed by another escape
        ANY + b', "x": "\\udc00"}',  # a low surrogate first
        ANY + b', "\\ud800x": 1}',  # ... in a key
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"a": "\\udfff"}}',
        ANY + b', "tid": 1e309}',  # a decoded number past the double range
        b'{"ph": "i", "cat": "python_function", "name": "f", "ts": -1e400}',
        ANY + b', "dur": 2.5E+999}',
        ANY + b', "pid": "\xff\xfe"}',  # decoded text that is not UTF-8
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"device": "\xc3("}}',
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"grid": [1, 1, 1, 1e999]}}',
    ],
)
def test_what_msgspec_rejects_in_any_event_the_scanner_declines(event, tmp_path):
    buf = b"[" + event + b"]"
    assert _scan(buf) is None
    with pytest.raises((msgspec.DecodeError, msgspec.ValidationError)):
        kineto._decode_events(kineto._EVENTS.decode(buf))
    path = tmp_path / "t.pt.trace.json"  # and the reader refuses it, both ways, alike
    path.write_bytes(b'{"traceEvents": [\n  ' + KERNEL + b",\n  " + event + b"\n]}")
    errors = []
    for flag in ("1", "0"):
        os.environ[kineto.SCANNER_ENV] = flag
        try:
            with pytest.raises(AdvisorInputError) as err:
                kineto.read_kineto(path)
            errors.append(str(err.value))
        finally:
            os.environ.pop(kineto.SCANNER_ENV)
    where = re.compile(r" \(byte \d+\)| - at `[^`]*`")  # (relative to what was decoded)
    assert where.sub("", errors[0]) == where.sub("", errors[1])


@pytest.mark.parametrize(
    "value",
    [b'"\\ud83d\\ude80"', b"1e-400", b"1" + b"0" * 400, b"-0.0", b'"\xf0\x9f\x9a\x80"'],
)
def test_what_msgspec_takes_the_scanner_reads_alike(value):
    # a surrogate pair, an underflow to 0, an integer of 401 digits, text with a 4-byte
    # character: taken by both, or declined by the scanner, never read differently
    buf = b"[" + ANY + b', "x": ' + value + b', "tid": ' + value + b"}, " + KERNEL + b"]"
    found = kineto._scan_events(buf)
    ref = _tables(kineto._decode_events(kineto._EVENTS.decode(buf)))
    if found is not None:
        tables = _tables(found[0])
        for name, table in tables.items():
            pd.testing.assert_frame_equal(table, ref[name], check_exact=True)


# --- names --------------------------------------------------------------------------------


@pytest.mark.skipif(
    _kscan.MAX_NAMES > 10**6,
    reason="the bound (2^31 - 1 names) is reached only in the sanitizer build, which lowers "
    "it (tests/sanitize/run.sh runs this test there)",
)
def test_distinct_names_past_the_bound_are_declined():
    limit = _kscan.MAX_NAMES

    def events(n: int) -> bytes:
        return b"[" + b",".join(
            b'{"ph": "X", "cat": "kernel", "name": "k%d", "ts": 1}' % i for i in range(n)
        ) + b"]"  # fmt: skip

    at = _scan(events(limit))
    assert _rows(at) == limit and len(at[2]) == limit
    assert _scan(events(limit + 1)) is None
    _same_as_msgspec(events(limit))


def test_the_name_bound_fits_the_name_codes():
    assert 0 < _kscan.MAX_NAMES <= 2**31 - 1  # (codes are int32)


def test_columns_are_read_only_and_live_as_long_as_their_arrays():
    # the columns are the scan's own arrays (no copy): read-only, freed with their last user
    found = _kscan.scan(EVENTS, CATS, MODES)
    start = np.frombuffer(found[1]["start"], dtype=np.int64)
    expected = start.copy()
    assert memoryview(found[1]["start"]).readonly and not start.flags.writeable
    with pytest.raises(ValueError):
        start[0] = 1
    del found
    gc.collect()
    _kscan.scan(EVENTS, CATS, MODES)  # (the allocator may hand freed memory out again)
    assert (start == expected).all() and len(start) == 3
    empty = _kscan.scan(b"[]", CATS, MODES)
    assert empty[0] == 0 and all(bytes(v) == b"" for v in empty[1].values())
