"""A large uncompressed Kineto trace's scan, started while the program loads.

``advisor analyze trace.json`` spends its first half second importing pandas and the rest
of advisor on one core, while the compiled scanner (which releases the GIL) could already
be reading the trace on the others. The console entry (launch.py) calls ``start`` with its
command line before it imports anything else; when that names exactly one large JSON file
to analyze, a thread reads the file's head and, for a laid-out uncompressed document,
starts the scanner's pass over its events (chunks.ChunkScans: this package, the head and
the scanner load without numpy or pandas). The Kineto reader then ``take``s that pass when
it reads the same, unchanged file with the same scanner, and makes the tables from it as
from its own; in every other case it reads as usual and the pass is dropped. The tables are
the same either way: only when the chunks are scanned moves. Measured in docs/scaling.md
("Issue 33, fourth pass")."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.trace.kineto.chunks import ChunkScans

# the smallest trace whose scan is started early (below it the gain is a few milliseconds)
EARLY_MIN_BYTES = 32 << 20

_lock = threading.Lock()
_started: dict[tuple, ChunkScans] = {}  # file identity -> its scans
_starters: list[threading.Thread] = []


def trace_argument(argv: list[str], min_bytes: int = EARLY_MIN_BYTES) -> Path | None:
    """The one trace of an ``analyze`` command line (``argv`` without the program) worth
    starting early: the only argument that is an existing file named ``*.json`` of at
    least ``min_bytes``; None for other commands, for several such files or none."""
    if not argv or argv[0] != "analyze":
        return None
    found = []
    for arg in argv[1:]:
        if arg.startswith("-") or not arg.lower().endswith(".json"):
            continue
        try:
            if os.path.isfile(arg) and os.stat(arg).st_size >= min_bytes:
                found.append(Path(arg))
        except (OSError, ValueError):
            continue
    return found[0] if len(found) == 1 else None


def start(argv: list[str], min_bytes: int = EARLY_MIN_BYTES) -> None:
    """Start the scan of the trace that ``trace_argument`` finds in ``argv``, if any, on a
    background thread; returns at once."""
    path = trace_argument(argv, min_bytes)
    if path is None:
        return
    thread = threading.Thread(target=_begin, args=(path,), name="advisor-early-scan",
                              daemon=True)  # fmt: skip
    _starters.append(thread)
    thread.start()


def _identity(path: Path, st: os.stat_result) -> tuple:
    """What must not change between the start and the read: the file and its contents'
    size and time."""
    return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _begin(path: Path) -> None:
    """Start the scans of ``path``'s events: a laid-out uncompressed document, the scanner
    built and not switched off (no scans otherwise, or on any failure: the reader then
    reads as usual and says what is wrong)."""
    try:
        from advisor.trace import kineto
        from advisor.trace.kineto.chunks import ChunkScans
        from advisor.trace.kineto.head import Head, looks_like_kineto

        if os.environ.get(kineto.SCANNER_ENV, "1") == "0":
            return
        from advisor.trace import _kscan  # type: ignore[attr-defined]

        with open(path, "rb") as fh:
            key = _identity(path, os.fstat(fh.fileno()))
            first = fh.read(65536)
            if first[:2] == b"\x1f\x8b" or not looks_like_kineto(first):
                return  # (gzip, or another tool's JSON: its head is not read further)
            fh.seek(0)
            head = Head(fh)
            if not head.laid_out:
                return
            # (one thread fewer than the reader's: one core is left to the imports)
            threads = max(kineto.READ_PROCESSES - 1, 1)
            scans = ChunkScans(fh, head.bracket, threads, kineto.SCAN_CHUNK_BYTES, _kscan,
                               background=True)  # fmt: skip
        with _lock:
            _started[key] = scans
    except Exception:  # noqa: BLE001 (any failure: the usual read reports what is wrong)
        return


def take(path: Path, fh) -> ChunkScans | None:
    """The scans started early for the file ``fh`` (open at ``path``), if they were started
    for that same file, unchanged since; None otherwise. Waits for the start (a head read),
    not for the scans; scans are taken once, and those of any other file are dropped."""
    for thread in _starters:
        thread.join()
    try:
        key = _identity(path, os.fstat(fh.fileno()))
    except OSError:
        key = None
    with _lock:
        found = _started.pop(key, None) if key is not None else None
        stale = list(_started.values())
        _started.clear()
    for scans in stale:
        scans.close()
    return found
