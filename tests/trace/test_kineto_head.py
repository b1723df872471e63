"""The head of a Kineto document (advisor/trace/kineto/head.py): where the events begin, and
whether they are laid out as Kineto writes them, however far into the file that is."""

from __future__ import annotations

import io

from advisor.trace.kineto import head as kineto_head
from advisor.trace.kineto.sampled import limits


def _document(before_events: bytes, first_event: bytes) -> bytes:
    return (b'{\n  "schemaVersion": 1,' + before_events + b'\n  "traceEvents": [\n  '
            + first_event + b',\n  {"ph": "X", "name": "b"}\n]}')  # fmt: skip


def test_the_head_samples_what_the_thinned_check_reads():
    assert limits()["sample_bytes"] <= kineto_head.HEAD_BYTES


def test_the_events_array_and_its_layout_are_found_past_the_first_read(monkeypatch):
    monkeypatch.setattr(kineto_head, "HEAD_BYTES", 64)
    monkeypatch.setattr(kineto_head, "CHUNK_BYTES", 256)
    # the key 300 bytes in: found in the chunks after the first read
    padding = b' "pad": "' + b"x" * 280 + b'",'
    doc = _document(padding, b'{"ph": "X", "name": "a"}')
    h = kineto_head.Head(io.BytesIO(doc))
    assert h.at == doc.index(b'"traceEvents"') and doc[h.bracket : h.bracket + 1] == b"["
    assert h.laid_out
    # a first event longer than the head's first read: the boundary after it is still found
    # while within one chunk of bytes
    long_event = b'{"ph": "X", "name": "' + b"a" * 150 + b'"}'
    assert kineto_head.Head(io.BytesIO(_document(b"", long_event))).laid_out
    # a first event longer than a chunk: not laid out (decoded whole), as before
    longer = b'{"ph": "X", "name": "' + b"a" * 400 + b'"}'
    assert not kineto_head.Head(io.BytesIO(_document(b"", longer))).laid_out
    # and a document that is not laid out at all
    flat = doc.replace(b",\n  {", b",{")
    assert not kineto_head.Head(io.BytesIO(flat)).laid_out
