"""Numeric columns of a large SQLite table read from its pages by the compiled scanner
(advisor/trace/_sqlscan.c), several threads at once, when the table's layout allows it.

SQLite decodes a row in its virtual machine and the ADBC driver then builds Arrow batches
that are copied into numpy: on a 1M-kernel Nsight export that is about 2x SQLite's own
decoding time, which is itself several times what reading the records takes. The scanner
walks the table's b-tree and writes each wanted column's values straight into one array.
It reads only what it can read exactly as SQLite would (integer-affinity columns, records on
their page, no generated or hidden columns, a declared default only where no record lacks the
column); for anything else it declines (None) and the caller reads through SQLite.

The columns come out as ``trace.slices.SliceColumns`` gives them for a sliced read: int64
(int32 where asked and every value fits); float64 with NaN where a column holds NULLs or
reals (float32 where asked); a column the table lacks is all NaN.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from advisor.trace import sqlearly
from advisor.trace.sqllayout import _sqlscan, plan_scan, rowids_fit

__all__ = ["available", "fits_int32", "read_columns", "rowids_fit"]

_I32 = np.iinfo(np.int32)  # (the scanner's int32 columns hold NULL as its minimum)
# what a narrowed column held that it cannot hold as SQLite's read gives it (an int32 column:
# reals, values beyond int32, INT32_MIN; a float32 one: integers beyond 2^53, which SQLite's
# read rounds to float64 first where the column has NULLs): read again at 64 bits
_REREAD = (_sqlscan.SEEN_REAL | _sqlscan.SEEN_WIDE | _sqlscan.SEEN_SENTINEL) if _sqlscan else 0
_WIDE = _sqlscan.SEEN_WIDE if _sqlscan else 0


def available() -> bool:
    """Whether the compiled scanner was built."""
    return _sqlscan is not None


def read_columns(
    path: Path,
    conn: sqlite3.Connection,
    table: str,
    columns: dict[str, str | None],
    rowids: tuple[int, int],
    where_in: tuple[str, list[int]] | None = None,
    threads: int = 1,
    int32=(),
    float32=(),
) -> pd.DataFrame | None:
    """``SELECT column AS alias, ... FROM main.table [WHERE where_in[0] IN where_in[1]]`` in
    rowid order (``columns``: alias -> the table's column, None for NULL), ``rowids`` the
    table's smallest and largest rowid; None where the scanner is not built or declines the
    table (sqllayout.plan_scan). Like the reader's connections (opened immutable), it assumes
    that nothing writes the file while it is read. A scan of the same plan started before
    the program loaded (trace/sqlearly.py) is taken instead of scanning again."""
    plan = plan_scan(path, conn, table, columns, rowids, where_in, int32, float32)
    if plan is None:
        return None
    aliases = [a for a, _ in plan.read]
    read = dict(plan.read)
    kinds = plan.kinds

    def scan(indices: tuple[int, ...], kinds: bytes) -> tuple[list, bytes, int] | None:
        try:
            return _sqlscan.scan(
                str(path), plan.root, indices, kinds, plan.filter_column, plan.ids, plan.lo,
                plan.span, max(1, min(threads, 16)),
            )  # fmt: skip
        except _sqlscan.Unsupported:
            return None

    started = sqlearly.take(path, table, plan)
    scanned = started.scanned if started is not None else scan(plan.indices, kinds)
    if scanned is None or scanned[2] == 0:
        return None  # (SQLite's read gives an empty table its own column types)
    arrays, seen, rows = scanned
    out: dict[str, np.ndarray] = {}
    for alias in columns:
        if alias not in read:
            out[alias] = np.full(rows, np.nan, dtype=np.float32 if alias in float32 else np.float64)
            continue
        at = aliases.index(alias)
        kind = chr(kinds[at])
        if (kind == "i" and seen[at] & _REREAD) or (kind == "f" and seen[at] & _WIDE):
            # values the narrow column cannot hold as SQLite's read gives them: 64 bits
            again = scan((read[alias],), b"q")
            if again is None:
                return None
            column = _typed(again[0][0], again[1][0], "q")
            if column is not None and kind == "f":
                column = column.astype(np.float32)  # (via float64 where NULLs made it so)
        else:
            column = _typed(arrays[at], seen[at], kind)
        if column is None:
            return None
        if alias in int32 and column.dtype == np.int64 and fits_int32(column):
            column = column.astype(np.int32)  # (read again for INT32_MIN itself)
        out[alias] = column
        arrays[at] = None  # (the frame holds the column now)
    return pd.DataFrame(out, copy=False)


def _typed(raw: bytearray, seen: int, kind: str) -> np.ndarray | None:
    """One scanned column (stored as ``kind``: see _sqlscan.c) in the dtype a sliced read
    gives it; None for a column that mixes integers with reals, or holds an integer equal to
    the scanner's NULL value."""
    ints, reals, nulls = (bool(seen & f) for f in (_sqlscan.SEEN_INT, _sqlscan.SEEN_REAL,
                                                   _sqlscan.SEEN_NULL))  # fmt: skip
    if (ints and reals) or seen & _sqlscan.SEEN_SENTINEL:
        return None
    if kind == "f":
        return np.frombuffer(raw, dtype=np.float32)  # (NULL is NaN already)
    if kind == "i":
        values = np.frombuffer(raw, dtype=np.int32)
        null = np.int32(_I32.min)
    else:
        values = np.frombuffer(raw, dtype=np.int64)
        null = np.int64(_sqlscan.NULL_BITS)
        if reals or not ints:  # (a real column, or NULL throughout: the NULL bits are a NaN)
            return values.view(np.float64)
    if not nulls:
        return values
    column = values.astype(np.float64)
    column[values == null] = np.nan
    return column


def fits_int32(values: np.ndarray) -> bool:
    """Whether ``values`` (integers, at least one) all fit int32."""
    return bool(len(values)) and _I32.min <= values.min() and values.max() <= _I32.max
