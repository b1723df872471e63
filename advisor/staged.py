"""Outputs that appear whole or not at all: files are written into a temporary folder
beside their destination, then moved into place (``os.replace``, atomic per file); if a
move fails, the files already moved are removed again. An output made in pieces for a
stream (stdout) is spooled to a temporary file first."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO


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


# bytes a spooled output keeps in memory before it moves to a temporary file
SPOOL_IN_MEMORY = 4 * 2**20


@contextmanager
def spooled(pieces: Iterable[bytes], in_memory: int | None = None) -> Iterator[IO[bytes]]:
    """Every piece of an output written, in order, to one temporary file (in memory up to
    ``in_memory`` bytes, default SPOOL_IN_MEMORY, then in the temporary folder,
    tempfile.gettempdir(), never beside an input), rewound: an output made in pieces is
    whole before any of it is written elsewhere, without holding all of its bytes. The
    file is deleted afterwards. An error making a piece is raised as it is; one writing
    the file (a full disk) names the temporary folder."""
    limit = SPOOL_IN_MEMORY if in_memory is None else in_memory
    spool = tempfile.SpooledTemporaryFile(max_size=limit)  # noqa: SIM115 (closed below)
    try:
        try:
            for piece in pieces:
                spool.write(piece)
            spool.seek(0)  # (flushes what is buffered: a full disk fails here at the latest)
        except OSError as exc:
            if exc.filename is None:
                exc.filename = f"{tempfile.gettempdir()} (a temporary copy of the output)"
            raise
        yield spool
    finally:
        with suppress(OSError):  # (after a full disk, closing fails to flush the same bytes)
            spool.close()
