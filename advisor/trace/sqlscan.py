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

import os
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

try:
    from advisor.trace import _sqlscan  # type: ignore[attr-defined]
except ImportError:  # (not built: no C compiler at install time)
    _sqlscan = None

_I32 = np.iinfo(np.int32)  # (the scanner's int32 columns hold NULL as its minimum)
_I64 = np.iinfo(np.int64)
# what a narrowed column held that it cannot hold as SQLite's read gives it (an int32 column:
# reals, values beyond int32, INT32_MIN; a float32 one: integers beyond 2^53, which SQLite's
# read rounds to float64 first where the column has NULLs): read again at 64 bits
_REREAD = (_sqlscan.SEEN_REAL | _sqlscan.SEEN_WIDE | _sqlscan.SEEN_SENTINEL) if _sqlscan else 0
_WIDE = _sqlscan.SEEN_WIDE if _sqlscan else 0
_WITHOUT_ROWID = re.compile(r"\bWITHOUT\s+ROWID\b", re.IGNORECASE)


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
    table. Like the reader's connections (opened immutable), it assumes that nothing writes
    the file while it is read."""
    if _sqlscan is None or rowids[0] is None or conn.in_transaction or _has_wal(path):
        return None  # (a transaction open on ``conn`` may hold changes the file lacks)
    layout = _layout(conn, table)
    if layout is None:
        return None
    root, index = layout
    wanted = [c for c in columns.values() if c is not None]
    if where_in is not None:
        wanted.append(where_in[0])
    if any(_fold(c) not in index for c in wanted):
        return None
    read = {a: index[_fold(c)] for a, c in columns.items() if c is not None}
    filter_column, ids = -1, b""
    if where_in is not None:
        filter_column = index[_fold(where_in[0])]
        if not all(type(i) is int and _I64.min <= i <= _I64.max for i in where_in[1]):
            return None  # (an id SQL's IN compares as a number of another kind)
        ids = np.unique(np.asarray(where_in[1], dtype=np.int64)).tobytes()
    if not read or len(read) > _sqlscan.MAX_COLUMNS or len(set(read.values())) < len(read):
        return None  # (none, too many, or one column under two aliases)
    if max(*read.values(), filter_column) > _sqlscan.MAX_INDEX:
        return None  # (a column further into the record than the scanner reads)
    lo, hi = rowids
    # (arrays of one slot per rowid: with a filter, the kept rows are written in one pass
    # and the arrays cut to them, their untouched slots never resident; two passes where the
    # rowids span more than the file could hold)
    span = hi - lo + 1 if rowids_fit(path, lo, hi) else 0
    if where_in is None and not span:
        return None
    aliases = list(read)
    kinds = "".join("f" if a in float32 else "i" if a in int32 else "q" for a in aliases).encode()

    def scan(indices: tuple[int, ...], kinds: bytes) -> tuple[list, bytes, int] | None:
        try:
            return _sqlscan.scan(
                str(path), root, indices, kinds, filter_column, ids, lo, span,
                max(1, min(threads, 16)),
            )  # fmt: skip
        except _sqlscan.Unsupported:
            return None

    scanned = scan(tuple(read.values()), kinds)
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


def rowids_fit(path: Path, lo: int, hi: int) -> bool:
    """Whether a table whose rowids run from ``lo`` to ``hi`` can hold a row at each of them
    (4 B at least a row in the file): else its rowids have holes (a damaged or edited
    database), and an array per rowid would be larger than the file allows."""
    return hi - lo + 1 <= os.path.getsize(path) // 4


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


def _fold(name: str) -> bytes:
    """A column name as SQLite matches it: ASCII letters in either case, nothing else folded
    (``"Ä"`` and ``"ä"`` are two columns)."""
    return name.encode("utf-8", "surrogatepass").lower()


def _has_wal(path: Path) -> bool:
    """Whether a write-ahead log with content lies beside the database (its pages may be
    newer than the file's: SQLite reads the table then), where SQLite keeps it: beside the
    file a symbolic link points to."""
    try:
        return os.path.getsize(f"{Path(path).resolve()}-wal") > 0
    except OSError:
        return False


def _layout(conn: sqlite3.Connection, table: str) -> tuple[int, dict[bytes, int]] | None:
    """(root page, column name (lower case) -> index in the record) of a rowid table, for
    its columns whose records hold them as SQLite returns them: integer affinity, no declared
    default (records older than the column lack it), not part of the primary key (an INTEGER
    PRIMARY KEY is the rowid, and the record holds NULL for it); None for any other table."""
    if conn.execute("SELECT 1 FROM temp.sqlite_master WHERE name = ?", (table,)).fetchone():
        return None  # (a temporary table of that name is the one SQL would read)
    row = conn.execute(
        "SELECT rootpage, sql FROM main.sqlite_master WHERE type = 'table' AND name = ?",
        (table,),
    ).fetchone()
    if row is None or not isinstance(row[0], int) or row[0] < 1 or not isinstance(row[1], str):
        return None
    if _WITHOUT_ROWID.search(row[1]):
        return None
    info = conn.execute(
        "SELECT cid, name, type, dflt_value, pk, hidden FROM pragma_table_xinfo(?, 'main')",
        (table,),
    ).fetchall()
    if any(hidden for *_, hidden in info):
        return None  # (generated or hidden columns: not every column is in the record)
    # (affinity as SQLite finds it: "INT" in the declared type, ASCII letters in any case)
    index = {_fold(name): cid for cid, name, kind, default, pk, _ in info
             if b"INT" in _fold(kind).upper() and default is None and not pk}  # fmt: skip
    if len({_fold(name) for _, name, *_ in info}) < len(info):
        return None  # (two names SQLite would tell apart but this folding would not)
    return row[0], index
