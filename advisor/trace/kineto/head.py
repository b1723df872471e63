"""The start of a Kineto document: whether a file is one (load.py asks), and where its events
array begins, found once per read for whichever path then reads the events."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import READ_ERRORS, AdvisorInputError, read_problem

if TYPE_CHECKING:  # (schema loads numpy and pandas: the early scan reads heads before them)
    from advisor.trace.kineto.schema import Document

CHUNK_BYTES = 32 << 20  # events are decoded a chunk at a time: memory stays bounded
KEY = b'"traceEvents"'
BOUNDARY = b",\n  {"  # Kineto writes each event from a line that starts with two spaces


def looks_like_kineto(head: bytes) -> bool:
    """True when the first bytes of a (decompressed) JSON document are Kineto's."""
    return KEY in head or (b'"schemaVersion"' in head and b'"deviceProperties"' in head)


def read_head(path: Path, size: int = 65536) -> bytes:
    """The first ``size`` bytes of a file, decompressed when it is gzip."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    try:
        with opener(path, "rb") as fh:
            return fh.read(size)
    except READ_ERRORS as exc:
        raise AdvisorInputError(str(path), f"cannot read: {read_problem(exc)}") from None


class Head:
    """The first bytes of a document (``first``: read from the start of the file, whole
    chunks, until the ``"traceEvents"`` key is among them or 4 chunks are), the offsets of
    that key (``at``) and of its array's ``[`` (``bracket``), -1 where not found. The key
    comes after a few small keys.

    ``laid_out``: the document is written as Kineto writes it (an event starts a line,
    two spaces in, after the array's ``[``): its events can be read in chunks cut between
    events. Otherwise it is decoded whole."""

    __slots__ = ("at", "bracket", "first", "laid_out")

    def __init__(self, fh) -> None:
        first = fh.read(CHUNK_BYTES)
        at = first.find(KEY)
        while at < 0 and len(first) < 4 * CHUNK_BYTES:
            more = fh.read(CHUNK_BYTES)
            if not more:
                break
            first += more
            at = first.find(KEY)
        self.first: bytes = first
        self.at = at
        self.bracket = first.find(b"[", at) if at >= 0 else -1
        self.laid_out = self.bracket >= 0 and BOUNDARY in first[self.bracket :]

    def document(self) -> Document:
        """The document's keys before its events (a laid-out document's)."""
        from advisor.trace.kineto.schema import DOCUMENT

        return DOCUMENT.decode(self.first[: self.at] + b'"traceEvents": []}')

    def events(self) -> bytearray:
        """The first bytes of the events array, from its ``[`` (a laid-out document's), to
        be read on from; the head's own copy is let go (memory stays bounded)."""
        out = bytearray(self.first[self.bracket :])
        self.release()
        return out

    def release(self) -> None:
        """Let the first bytes go (the events are read from the file itself)."""
        self.first = b""
