"""Events read by the compiled scanner (advisor/trace/_kscan.c, optional): it validates a
JSON array of events and reads the fields of the wanted events into columns, with no Python
object per event. It is an accelerator, not a second reader: whatever it declines, msgspec
decodes (decode.py), whose tables or errors it must reproduce."""

from __future__ import annotations

import os
from types import ModuleType

import msgspec
import numpy as np

from advisor.trace.kineto import SCANNER_ENV
from advisor.trace.kineto.chunks import raw_scan
from advisor.trace.kineto.contract import COLUMN_TYPES, DIGEST, SCAN_CATEGORIES
from advisor.trace.kineto.decode import Chunk
from advisor.trace.kineto.schema import (
    CATEGORIES_OF,
    GEMM_OP,
    OP_ARGS,
    OP_CATEGORIES,
    PLAIN_OP,
    STR,
    TABLE_COLUMNS,
    op_kind,
    op_text,
)

_kscan: ModuleType | None = None  # the optional compiled scanner (setup.py)
try:
    from advisor.trace import _kscan as _built  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover (built wherever the tests run); msgspec decodes all
    pass
else:
    if getattr(_built, "CONTRACT", None) == DIGEST:  # (a build of another contract: stale)
        _kscan = _built


def scanner_enabled() -> bool:
    """True when the compiled scanner is built and not switched off (``ADVISOR_KINETO_SCANNER=0``
    reads with msgspec alone: the reference the scanner is tested against)."""
    return _kscan is not None and os.environ.get(SCANNER_ENV, "1") != "0"


def scan_events(buf, start: int = 0, stop: int = -1) -> tuple[Chunk, int] | None:
    """(the columns, the offset after the array's closing ``]`` or -1) of the events in
    ``buf[start:stop]`` (see _kscan.c), from the compiled scanner; None where it declines
    the bytes (or a name or a GEMM op's args do not decode): then msgspec decodes them."""
    assert _kscan is not None  # (scanner_enabled)
    found = raw_scan(_kscan, buf, start, stop)
    return None if found is None else chunk_of(buf, found)


def chunk_of(buf, found) -> tuple[Chunk, int] | None:
    """scan_events from the scanner's result ``found`` for ``buf`` (chunks.raw_scan)."""
    rows, raw, raw_names, closed = found
    try:  # (distinct raw names may decode alike: the collector's codes merge them)
        labels = [STR.decode(b'"' + x + b'"') for x in raw_names]
    except msgspec.DecodeError:
        return None
    c = {k: np.frombuffer(v, dtype=COLUMN_TYPES[k]) for k, v in raw.items()}
    codes, cat = c.pop("name"), c.pop("cat")
    c["end"] = c["start"] + c.pop("dur")
    # CPU ops: GEMM ops and Operator range names join the ranges, the others are cpu_ops
    is_op = np.isin(cat, [SCAN_CATEGORIES.index(x) for x in OP_CATEGORIES])
    kind = np.full(len(cat), -1, dtype=np.int8)
    if is_op.any():
        per_label = {x: np.array([op_kind(x, name) for name in labels] or [0], dtype=np.int8)
                     for x in OP_CATEGORIES}  # fmt: skip
        for x, of_label in per_label.items():
            mine = cat == SCAN_CATEGORIES.index(x)
            kind[mine] = of_label[codes[mine]]
    columns, text = {}, []
    for table, cats in (*CATEGORIES_OF.items(), ("cpu_ops", OP_CATEGORIES)):
        at = np.isin(cat, [SCAN_CATEGORIES.index(x) for x in cats])
        if table == "nvtx":
            at &= ~is_op | (kind != PLAIN_OP)
        elif table == "cpu_ops":
            at &= kind == PLAIN_OP
        rows_at = np.flatnonzero(at)
        if not len(rows_at):
            continue
        columns[table] = {k: c[k][rows_at] for k in TABLE_COLUMNS[table]}
        columns[table]["name"] = codes[rows_at]
        if table == "nvtx":
            names = np.asarray(labels, dtype=object)[codes[rows_at]]
            gemm = np.flatnonzero(kind[rows_at] == GEMM_OP)
            try:
                for i in gemm:
                    off, n = c["args_off"][rows_at[i]], c["args_len"][rows_at[i]]
                    dims = OP_ARGS.decode(buf[off : off + n]).shapes if n else None
                    names[i] = op_text(names[i], dims)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return None
            text = names.tolist()
    return Chunk(columns, labels, text), closed
