"""A large Nsight Systems export's kernel table scanned while the program loads.

``advisor analyze trace.sqlite`` spends its first half second importing pandas and the rest
of advisor on one core; the compiled table scanner (trace/_sqlscan.c: it releases the GIL
and needs neither numpy nor pandas) could already be reading the export's largest table on
the other. The console entry (launch.py, through trace/early.py) calls ``start`` with its
command line before it imports anything else; when that names exactly one large SQLite file
to analyze, a thread plans the kernel table's scan as the Nsight reader will plan it
(sqllayout.plan_scan, the reader's columns from nsys_schema.py) and runs it. The reader's
scan (sqlscan.read_columns) then ``take``s it when it asks for the same plan of the same,
unchanged file; in every other case it scans as usual and the early scan is dropped. The
table is the same either way: only when it is scanned moves (measured in docs/scaling.md,
"Issue 33, thirtieth pass")."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from advisor.trace.nsys_schema import (
    KERNEL,
    KERNEL_FLOAT32,
    KERNEL_INT32,
    KERNEL_OPTIONAL,
    READ_THREADS,
    kernel_columns,
)

if TYPE_CHECKING:  # (sqlite3 and the planner load on the scan's thread, for an export only)
    import sqlite3

    from advisor.trace.sqllayout import ScanPlan

# the smallest export whose kernel table is scanned early (below it the gain is a few ms)
EARLY_MIN_BYTES = 32 << 20
_SQLITE_MAGIC = b"SQLite format 3\x00"


class Started(NamedTuple):
    """An early scan's outcome: _sqlscan.scan's (arrays, seen, rows), or None where the
    scanner declined the table (Unsupported: the reader then reads it through SQLite)."""

    scanned: tuple | None


_lock = threading.Lock()
_started: dict[tuple, Started] = {}  # (file identity, plan) -> its scan
_starters: list[threading.Thread] = []
_released = False  # (the reader is past its kernel table: a scan ending now is not kept)


def trace_argument(argv: list[str], min_bytes: int = EARLY_MIN_BYTES) -> Path | None:
    """The one export of an ``analyze`` command line (``argv`` without the program) worth
    scanning early: the only argument that is an existing SQLite file (by its header) of at
    least ``min_bytes``; None for other commands, for several such files or none."""
    if not argv or argv[0] != "analyze":
        return None
    found = []
    for arg in argv[1:]:
        if arg.startswith("-"):
            continue
        try:
            if os.path.isfile(arg) and os.stat(arg).st_size >= min_bytes:
                with open(arg, "rb") as fh:
                    if fh.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC:
                        found.append(Path(arg))
        except (OSError, ValueError):
            continue
    return found[0] if len(found) == 1 else None


def start(argv: list[str], min_bytes: int = EARLY_MIN_BYTES) -> None:
    """Start the kernel table's scan of the export that ``trace_argument`` finds in
    ``argv``, if any, on a background thread; returns at once."""
    global _released
    path = trace_argument(argv, min_bytes)
    if path is None:
        return
    with _lock:
        _released = False
    thread = threading.Thread(target=_begin, args=(path,), name="advisor-early-sqlscan",
                              daemon=True)  # fmt: skip
    _starters.append(thread)
    thread.start()


def _identity(path: Path) -> tuple:
    """What must not change between the start and the read: the file and its contents'
    size and time."""
    st = os.stat(path)
    return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def kernel_plan(path: Path, conn: sqlite3.Connection) -> ScanPlan | None:
    """The kernel table's ScanPlan as the Nsight reader makes it for an analysis
    (nsys._read_kernels, lean: its columns, the optional ones the table lacks read as
    NULL); None without the table or where the scanner would decline it."""
    from advisor.trace.sqllayout import plan_scan, present_columns, rowid_bounds

    have = {row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (KERNEL,))}
    if not have:
        return None
    present = present_columns(kernel_columns(lean=True), have, KERNEL_OPTIONAL)
    rowids = rowid_bounds(conn, KERNEL)
    if rowids is None:
        return None
    return plan_scan(path, conn, KERNEL, present, rowids, None, KERNEL_INT32, KERNEL_FLOAT32)


def _begin(path: Path) -> None:
    """Plan and run the kernel table's scan of ``path`` (nothing on any failure: the reader
    then reads as usual and says what is wrong)."""
    try:
        import sqlite3
        from contextlib import closing

        from advisor.trace.sqllayout import _sqlscan, ro_uri

        key = _identity(path)
        with closing(sqlite3.connect(ro_uri(path), uri=True)) as conn:
            plan = kernel_plan(path, conn)
        if plan is None:  # (no kernel table, a layout the scanner declines, or no scanner)
            return
        # (one thread fewer than the reader's: one core is left to the imports)
        threads = max(min(READ_THREADS, os.cpu_count() or 1) - 1, 1)
        try:
            scanned = _sqlscan.scan(str(path), plan.root, plan.indices, plan.kinds,
                                    plan.filter_column, plan.ids, plan.lo, plan.span,
                                    threads)  # fmt: skip
        except _sqlscan.Unsupported:
            scanned = None
        with _lock:
            if not _released:
                _started[(key, plan)] = Started(scanned)
    except Exception:  # noqa: BLE001 (any failure: the usual read reports what is wrong)
        return


def take(path: Path, table: str, plan: ScanPlan) -> Started | None:
    """The scan started early for ``plan`` of ``table`` in the file at ``path``, if it was
    started for that same file, unchanged since; None otherwise (at once for any other
    table: another table's read never waits for it). Waits for the scan; a scan is taken
    once, and those of any other file or plan are dropped."""
    if table != KERNEL:
        return None
    with _lock:
        starters = list(_starters)
        _starters.clear()
    if not starters:
        return None
    for thread in starters:
        thread.join()
    try:
        key = (_identity(path), plan)
    except OSError:
        key = None
    with _lock:
        found = _started.pop(key, None) if key is not None else None
        _started.clear()
    return found


def release() -> None:
    """Drop what was started and not taken (the reader has read its kernel table another
    way: through SQLite, or a plan of its own); a scan still running is not kept when it
    ends. Waits for nothing."""
    global _released
    with _lock:
        _released = True
        _started.clear()
        _starters.clear()
