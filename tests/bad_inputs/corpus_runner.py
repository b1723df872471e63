"""Run one corpus case through the CLI entry point in this process and report what the
guarantees need: exit code, stdout, stderr, and the state of every file it touched."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sqlite3
import sys
from pathlib import Path

from advisor.cli import main


def fingerprint(folder: Path) -> dict[str, str]:
    """name -> sha256 (or the kind of entry) for everything directly in ``folder``."""
    out = {}
    for p in sorted(folder.iterdir(), key=lambda x: x.name):
        if p.is_symlink():
            out[p.name] = "symlink -> " + os.readlink(p)
        elif p.is_fifo():
            out[p.name] = "fifo"
        elif p.is_dir():
            out[p.name] = "dir: " + ",".join(sorted(x.name for x in p.iterdir()))
        else:
            try:
                out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
            except PermissionError:
                out[p.name] = "unreadable"
    return out


def run(case) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``advisor <case.args>`` (``{f}`` -> case.path)."""
    args = [str(case.path) if a == "{f}" else a for a in case.args]
    out, err = io.StringIO(), io.StringIO()
    lock = None
    if case.hold == "lock":  # another writer holds the database's write lock meanwhile
        lock = sqlite3.connect(case.path, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
    old_argv = sys.argv
    sys.argv = ["advisor", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old_argv
        if lock is not None:
            lock.execute("ROLLBACK")
            lock.close()
    return code, out.getvalue(), err.getvalue()
