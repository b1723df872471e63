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
# The head's first read: thresholds.yaml's thinned_host_events.sample_bytes (8 MiB) of it are
# sampled (sampled.host_sample); a whole chunk read and copied cost ~45 ms per read (100K
# kernels, 308 MB).
HEAD_BYTES = 8 << 20
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
    """The first bytes of a document (``first``: HEAD_BYTES read from the start of the file,
    then whole chunks until the ``"traceEvents"`` key is among them or 4 chunks are), the
    offsets of that key (``at``) and of its array's ``[`` (``bracket``), -1 where not found.
    The key comes after a few small keys.

    ``laid_out``: the document is written as Kineto writes it (an event starts a line,
    two spaces in, after the array's ``[``; looked for in the first chunk's bytes): its
    events can be read in chunks cut between events. Otherwise it is decoded whole."""

    __slots__ = ("at", "bracket", "first", "laid_out")

    def __init__(self, fh) -> None:
        first = fh.read(HEAD_BYTES)
        at = first.find(KEY)
        while at < 0 and len(first) < 4 * CHUNK_BYTES:
            more = fh.read(CHUNK_BYTES)
            if not more:
                break
            first += more
            at = first.find(KEY)
        bracket = first.find(b"[", at) if at >= 0 else -1
        boundary = first.find(BOUNDARY, bracket) if bracket >= 0 else -1
        while bracket >= 0 and boundary < 0 and len(first) < CHUNK_BYTES:
            more = fh.read(CHUNK_BYTES - len(first))  # (a first event longer than the head)
            if not more:
                break
            first += more
            boundary = first.find(BOUNDARY, bracket)
        self.first: bytes = first
        self.at = at
        self.bracket = bracket
        self.laid_out = boundary >= 0

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
