"""Outputs that appear whole or not at all: files are written into a temporary folder
beside their destination, then moved into place (``os.replace``, atomic per file); if a
move fails, the files already moved are removed again."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def staging(parent: Path, prefix: str) -> Iterator[Path]:
    """A temporary folder inside ``parent`` (created if missing), removed afterwards.
    Raises OSError when ``parent`` cannot hold it."""
    parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def place(stage: Path, moves: list[tuple[str, Path]]) -> list[Path]:
    """Move each staged file (a name in ``stage``) to its target, in order; the targets.
    On an OSError the targets moved so far are removed and the error is raised."""
    placed: list[Path] = []
    try:
        for name, target in moves:
            os.replace(stage / name, target)
            placed.append(target)
    except OSError:
        for path in placed:
            path.unlink(missing_ok=True)
        raise
    return placed
