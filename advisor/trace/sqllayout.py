"""What the compiled SQLite table scanner (advisor/trace/_sqlscan.c) is asked to read, worked
out from the schema alone: whether a table's layout allows the scan, and the scan's
arguments (``ScanPlan``). Loads neither numpy nor pandas, so that a scan can be planned and
started while they load (trace/sqlearly.py); trace/sqlscan.py types what the scan returns."""

from __future__ import annotations

import os
import re
import sqlite3
from array import array
from dataclasses import dataclass
from pathlib import Path

try:
    from advisor.trace import _sqlscan  # type: ignore[attr-defined]
except ImportError:  # (not built: no C compiler at install time)
    _sqlscan = None

_I64 = (-(2**63), 2**63 - 1)
_WITHOUT_ROWID = re.compile(r"\bWITHOUT\s+ROWID\b", re.IGNORECASE)


@dataclass(frozen=True)
class ScanPlan:
    """One scan's arguments (_sqlscan.c's ``scan``, the thread count aside): ``read``, per
    output alias, its record index (in the order asked); ``kinds``, per alias read, how it
    is stored ('q', 'i', 'f'); the filter column (-1: none) and its sorted distinct ``ids``
    (native int64 bytes); the table's smallest rowid and its rowid span (0: a filtered
    table counted first; see _sqlscan.c)."""

    root: int
    read: tuple[tuple[str, int], ...]
    kinds: bytes
    filter_column: int
    ids: bytes
    lo: int
    span: int

    @property
    def indices(self) -> tuple[int, ...]:
        """The record indices read, in the output's order."""
        return tuple(index for _, index in self.read)


def plan_scan(
    path: Path,
    conn: sqlite3.Connection,
    table: str,
    columns: dict[str, str | None],
    rowids: tuple[int, int],
    where_in: tuple[str, list[int]] | None = None,
    int32=(),
    float32=(),
) -> ScanPlan | None:
    """The ScanPlan of ``SELECT column AS alias, ... FROM main.table [WHERE where_in[0] IN
    where_in[1]]`` (``columns``: alias -> the table's column, None for NULL; ``rowids``: the
    table's smallest and largest rowid); None where the scanner is not built or declines the
    table (trace/sqlscan.py's read_columns says which)."""
    if _sqlscan is None or rowids[0] is None or conn.in_transaction or has_wal(path):
        return None  # (a transaction open on ``conn`` may hold changes the file lacks)
    found = layout(conn, table)
    if found is None:
        return None
    root, index = found
    wanted = [c for c in columns.values() if c is not None]
    if where_in is not None:
        wanted.append(where_in[0])
    if any(fold(c) not in index for c in wanted):
        return None
    read = {a: index[fold(c)] for a, c in columns.items() if c is not None}
    filter_column, ids = -1, b""
    if where_in is not None:
        filter_column = index[fold(where_in[0])]
        if not all(type(i) is int and _I64[0] <= i <= _I64[1] for i in where_in[1]):
            return None  # (an id SQL's IN compares as a number of another kind)
        ids = array("q", sorted(set(where_in[1]))).tobytes()
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
    kinds = "".join("f" if a in float32 else "i" if a in int32 else "q" for a in read).encode()
    return ScanPlan(root, tuple(read.items()), kinds, filter_column, ids, lo, span)


def present_columns(columns: dict[str, str], have: set[str], optional=()) -> dict[str, str | None]:
    """``columns`` (alias -> the table's column) with each ``optional`` one the table lacks
    (not in ``have``) as None (read as NULL): what a reader selects, and so what a scan of
    the table is planned for."""
    return {a: (None if a in optional and c not in have else c) for a, c in columns.items()}


def rowid_bounds(conn: sqlite3.Connection, table: str) -> tuple[int, int] | None:
    """The table's smallest and largest rowid (None when it is empty): two subqueries,
    each one b-tree lookup."""
    lo, hi = conn.execute(
        f"SELECT (SELECT MIN(rowid) FROM {table}), (SELECT MAX(rowid) FROM {table})"
    ).fetchone()
    return None if lo is None else (lo, hi)


def rowids_fit(path: Path, lo: int, hi: int) -> bool:
    """Whether a table whose rowids run from ``lo`` to ``hi`` can hold a row at each of them
    (4 B at least a row in the file): else its rowids have holes (a damaged or edited
    database), and an array per rowid would be larger than the file allows."""
    return hi - lo + 1 <= os.path.getsize(path) // 4


def fold(name: str) -> bytes:
    """A column name as SQLite matches it: ASCII letters in either case, nothing else folded
    (``"Ä"`` and ``"ä"`` are two columns)."""
    return name.encode("utf-8", "surrogatepass").lower()


def has_wal(path: Path) -> bool:
    """Whether a write-ahead log with content lies beside the database (its pages may be
    newer than the file's: SQLite reads the table then), where SQLite keeps it: beside the
    file a symbolic link points to."""
    try:
        return os.path.getsize(f"{Path(path).resolve()}-wal") > 0
    except OSError:
        return False


def layout(conn: sqlite3.Connection, table: str) -> tuple[int, dict[bytes, int]] | None:
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
    index = {fold(name): cid for cid, name, kind, default, pk, _ in info
             if b"INT" in fold(kind).upper() and default is None and not pk}  # fmt: skip
    if len({fold(name) for _, name, *_ in info}) < len(info):
        return None  # (two names SQLite would tell apart but this folding would not)
    return row[0], index


def ro_uri(path: Path) -> str:
    """The SQLite URI that opens ``path`` read-only, with no journal, lock or file beside it."""
    return Path(path).resolve().as_uri() + "?mode=ro&immutable=1"
