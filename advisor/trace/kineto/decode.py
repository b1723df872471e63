"""Events decoded by msgspec into columns: the reference the compiled scanner (scan.py) is
tested against. Values are read loosely: one of the wrong type is missing (NaN; a time: -1,
which the reader's quality check drops) and counted per (table, field) for a warning. Times
are converted to integer nanoseconds exactly (whole microseconds and the fraction apart)."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import msgspec
import numpy as np

from advisor.trace.kineto.schema import (
    ARGS_OF,
    GEMM_OP,
    OP_CATEGORIES,
    PLAIN_OP,
    TABLE_COLUMNS,
    TABLE_OF,
    XYZ_FIELDS,
    Event,
    OpArgs,
    op_kind,
    op_text,
)


class Chunk(NamedTuple):
    """The rows of a chunk of events, per table: the columns its table is built from (see
    schema.TABLE_COLUMNS), ``name`` as codes into ``labels``; the range texts of ``nvtx``."""

    columns: dict[str, dict[str, np.ndarray]]
    labels: list[str]
    text: list[str]
    bad: Counter = Counter()  # (table, field) -> values of the wrong type (read as missing)


def decode_events(events: list[Event]) -> Chunk:
    """The columns of events decoded by msgspec (the reference the scanner is tested against)."""
    # one pass appends each event to its table's list (a dict lookup per event), in the
    # trace's order; those lists, a fraction of the events, are then filtered
    lists: dict[str, list[Event]] = {table: [] for table in TABLE_COLUMNS}
    get = TABLE_OF.get
    for e in events:
        table = get(e.cat) if isinstance(e.cat, str) else None
        if table is not None:
            if not isinstance(e.name, str):
                e.name = "" if e.name is None else msgspec.json.encode(e.name).decode()
            lists[table].append(e)
    rows = {t: [e for e in b if e.ph == "X" and e.ts is not None] for t, b in lists.items()}
    bad: Counter = Counter()
    ops = [e for e in rows["nvtx"] if e.cat in OP_CATEGORIES]
    rows["cpu_ops"] = [e for e in ops if op_kind(e.cat, e.name) == PLAIN_OP]
    rows["nvtx"] = [e for e in rows["nvtx"]
                    if e.cat not in OP_CATEGORIES
                    or op_kind(e.cat, e.name) != PLAIN_OP]  # fmt: skip
    labels: dict[str, int] = {}
    columns, text = {}, []
    for table, kind in ARGS_OF.items():
        events = rows[table]
        if not events:
            continue
        c = _columns(events, kind, bad, table)
        c["name"] = np.fromiter((labels.setdefault(e.name, len(labels)) for e in events),
                                dtype=np.int64, count=len(events))  # fmt: skip
        columns[table] = {k: c[k] for k in (*TABLE_COLUMNS[table], "name")}
        if table == "nvtx":
            gemm = [e for e in events if op_kind(e.cat, e.name) == GEMM_OP]
            dims = iter([a.shapes if isinstance(a.shapes, list) else None
                         for a in _args(gemm, OpArgs)] if gemm else [])  # fmt: skip
            text = [op_text(e.name, next(dims)) if op_kind(e.cat, e.name) == GEMM_OP
                    else e.name for e in events]  # fmt: skip
    return Chunk(columns, list(labels), text, bad)


def _columns(
    events: list[Event],
    kind: type[msgspec.Struct] | None,
    bad: Counter | None = None,
    table: str = "",
) -> dict[str, np.ndarray]:
    """The scanner's columns for decoded events: times (ns), pid, tid and the fields of
    ``kind``, the struct their ``args`` decode to (grid and block as _x, _y, _z). Values of
    the wrong type are missing (NaN; times: -1, which the reader's quality check drops) and
    counted in ``bad`` per (table, field)."""
    n = len(events)
    bad = Counter() if bad is None else bad
    start, end = _times(events)
    c = {
        "start": start,
        "end": end,
        # (ids Kineto may write as text: "stream 7" for GPU rows of PyTorch 1.8; not damage)
        "pid": _num([e.pid for e in events], n),
        "tid": _num([e.tid for e in events], n),
    }
    if kind is not None:
        args = _args(events, kind)
        for field, name in zip(kind.__struct_fields__, kind.__struct_encode_fields__, strict=True):
            values = [getattr(a, field) for a in args]
            if field in XYZ_FIELDS:
                xyz = _xyz(values, n, bad, (table, name))
                for i, axis in enumerate("xyz"):
                    c[f"{field}_{axis}"] = xyz[:, i]
            else:
                c[field] = _num(values, n, bad, (table, name))
    return c


def _args(events: list[Event], kind: type) -> list:
    """The ``args`` of events decoded as ``kind``, all in one decoder call."""
    blob = b"[" + b",".join(e.args for e in events) + b"]"
    return msgspec.json.decode(blob, type=list[kind])  # type: ignore[valid-type]


def _ns(ts: np.ndarray) -> np.ndarray:
    """Microsecond timestamps with fractions -> exact integer nanoseconds (the whole
    microseconds and the fraction are converted apart: no rounding of the large part)."""
    whole = np.floor(ts)
    return whole.astype(np.int64) * 1000 + np.round((ts - whole) * 1000).astype(np.int64)


# microseconds past which a time is no time a trace holds (2^62 ns, the quality check's
# bound): cast to int64 ns it would overflow
_MAX_US = 2.0**62 / 1000


def _times(events: list[Event]) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) ns; -1 for an event whose ts or dur is not a number or beyond 2^62 ns (a
    missing dur is 0), which the reader's quality check drops and counts."""
    n = len(events)
    ts = _num([e.ts for e in events], n)
    dur = _num([0.0 if e.dur is None else e.dur for e in events], n)
    ok = (np.abs(ts) < _MAX_US) & (np.abs(dur) < _MAX_US)  # (False for NaN)
    if ok.all():
        start = _ns(ts)
        return start, start + np.round(dur * 1000).astype(np.int64)
    start = np.full(n, -1, dtype=np.int64)
    end = np.full(n, -1, dtype=np.int64)
    start[ok] = _ns(ts[ok])
    end[ok] = start[ok] + np.round(dur[ok] * 1000).astype(np.int64)
    return start, end


def _num(values, count: int, bad: Counter | None = None, key=None) -> np.ndarray:
    """A float column from loosely typed values (numbers, numeric strings, None -> NaN);
    all-number columns, the usual case, in one pass. Other values (text, lists, objects,
    booleans, integers past the float range) are NaN, and counted in ``bad[key]``."""
    values = list(values)
    try:
        if not any(isinstance(v, bool) for v in values):
            return np.fromiter(values, dtype=np.float64, count=count)
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.full(count, np.nan)
    wrong = 0
    for i, v in enumerate(values):
        if isinstance(v, int | float) and not isinstance(v, bool):
            try:
                out[i] = v
            except OverflowError:  # (an integer of 309 digits or more)
                wrong += 1
        elif isinstance(v, str):
            try:
                out[i] = float(v)
            except ValueError:
                wrong += 1
        elif v is not None:
            wrong += 1
    if wrong and bad is not None:
        bad[key] += wrong
    return out


def _xyz(lists: list, count: int, bad: Counter | None = None, key=None) -> np.ndarray:
    """(count, 3) floats from [x, y, z] lists (NaN where missing or malformed; malformed
    ones counted in ``bad[key]``)."""
    try:
        out = np.array(lists, dtype=np.float64)
        if out.shape == (count, 3):
            return out
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.full((count, 3), np.nan)
    wrong = 0
    for i, v in enumerate(lists):
        if isinstance(v, list) and 1 <= len(v) <= 3:
            for j, x in enumerate(v):
                try:
                    if isinstance(x, bool) or not isinstance(x, int | float):
                        raise TypeError
                    out[i, j] = x
                except (TypeError, OverflowError):  # (an integer past the float range too)
                    wrong += 1
                    break
        elif v is not None:
            wrong += 1
    if wrong and bad is not None:
        bad[key] += wrong
    return out
