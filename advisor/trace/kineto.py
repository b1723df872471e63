"""PyTorch profiler (Kineto) JSON traces (``.json``, ``.json.gz``, ``.pt.trace.json``) ->
Trace, read-only.

Kineto writes a Chrome-trace document: ``traceEvents`` (``ph: X`` complete events with
``ts``/``dur`` in microseconds with fractions), ``deviceProperties`` (GPU facts) and, for
distributed runs, ``distributedInfo`` (rank, world size). Categories read:

  kernel                      GPU kernels: device, stream, correlation, grid, block,
                              registers per thread, shared memory (static + dynamic)
  cuda_runtime, cuda_driver   host calls (cudaLaunchKernel, cuLaunchKernel, syncs, copies;
                              hipLaunchKernel ... on ROCm), joined to GPU work by correlation
  gpu_memcpy, gpu_memset      copies (direction and host memory from the event name) and sets
  user_annotation             record_function ranges (ProfilerStep#N, the user's own): NVTX-like
  cpu_op                      CPU ops: matrix-multiply ops (aten::mm/addmm/bmm/linear/...) as
                              NVTX-like ranges whose text carries their Input Dims (GEMM
                              evidence and shapes, as emit_nvtx(record_shapes=True) gives
                              them); the others into ``cpu_ops`` (what the host was doing)

PyTorch 1.8-1.10 wrote capitalised categories: ``Kernel``, ``Runtime``, ``Memcpy``,
``Memset`` are read as kernel, cuda_runtime, gpu_memcpy, gpu_memset; ``Operator`` holds both
the ops (names with ``::`` and autograd nodes such as ``CudnnConvolutionBackward``, read as
cpu_op) and the record_function ranges (ProfilerStep#N, ``enumerate(DataLoader)#...``: read
as user_annotation); ``Input dims`` is ``Input Dims``; thread ids were strings.

Parsing: the compiled scanner (_kscan.c, optional) validates the events array and reads the
fields of the wanted events into columns, with no Python object per event; an uncompressed
trace is memory-mapped and scanned in chunks by one thread per core. Whatever it declines
(and everything, without it) msgspec decodes into typed structs holding only these fields:
the reference, whose tables or errors the scanner must reproduce. Times are converted to
integer nanoseconds exactly (whole microseconds and the fraction separately). Rows keep the
trace's order. See docs/scaling.md.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import gzip
import mmap
import os
import queue
import re
import threading
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from advisor.data import regex
from advisor.errors import READ_ERRORS, TOO_DEEP, AdvisorInputError, json_problem, read_problem
from advisor.trace.gpus import match_gpu
from advisor.trace.model import GpuSpec, Trace
from advisor.trace.quality import non_numeric_warning

try:  # the optional compiled scanner (setup.py); without it msgspec decodes every event
    from advisor.trace import _kscan
except ImportError:  # pragma: no cover (built wherever the tests run)
    _kscan = None

# fields read loosely (any JSON value): a value of the wrong type is treated as missing and
# counted (_num, _xyz), so one damaged event does not reject the trace
Scalar = Any


class Event(msgspec.Struct, gc=False):
    """One trace event; ``args`` stays raw JSON until its category is known to matter."""

    ph: Scalar = ""
    cat: Scalar = ""
    name: Scalar = ""
    pid: Scalar = None
    tid: Scalar = None
    ts: Scalar = None
    dur: Scalar = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


class KernelArgs(msgspec.Struct, gc=False):
    device: Scalar = None
    stream: Scalar = None
    correlation: Scalar = None
    grid: Scalar = None
    block: Scalar = None
    registers: Scalar = msgspec.field(default=None, name="registers per thread")
    smem: Scalar = msgspec.field(default=None, name="shared memory")
    graph_node: Scalar = msgspec.field(default=None, name="graph node id")


class CopyArgs(msgspec.Struct, gc=False):
    device: Scalar = None
    stream: Scalar = None
    correlation: Scalar = None
    bytes: Scalar = None


class ApiArgs(msgspec.Struct, gc=False):
    correlation: Scalar = None


class OpArgs(msgspec.Struct, gc=False):
    dims: Scalar = msgspec.field(default=None, name="Input Dims")
    dims_v1: Scalar = msgspec.field(default=None, name="Input dims")  # PyTorch <= 1.10

    @property
    def shapes(self) -> list | None:
        return self.dims if self.dims is not None else self.dims_v1


class DeviceProps(msgspec.Struct):
    id: int = 0
    name: str = ""
    computeMajor: int | None = None  # noqa: N815 (Kineto's key)
    computeMinor: int | None = None  # noqa: N815
    numSms: int | None = None  # noqa: N815
    warpSize: int | None = None  # noqa: N815
    maxThreadsPerMultiprocessor: int | None = None  # noqa: N815
    regsPerMultiprocessor: int | None = None  # noqa: N815
    sharedMemPerMultiprocessor: int | None = None  # noqa: N815
    sharedMemPerBlockOptin: int | None = None  # noqa: N815
    sharedMemPerBlock: int | None = None  # noqa: N815 (ROCm builds write these two)
    maxSharedMemoryPerMultiProcessor: int | None = None  # noqa: N815
    gcnArchName: str | None = None  # noqa: N815 (ROCm builds)


class Document(msgspec.Struct):
    traceEvents: list[Event] | None = None  # noqa: N815
    deviceProperties: list[DeviceProps] = []  # noqa: N815
    distributedInfo: dict | None = None  # noqa: N815
    schemaVersion: Scalar = None  # noqa: N815
    baseTimeNanoseconds: Scalar = None  # noqa: N815  (epoch ns of ts 0, PyTorch >= 2.1)


_DOCUMENT = msgspec.json.Decoder(Document)
_EVENTS = msgspec.json.Decoder(list[Event])
_STR = msgspec.json.Decoder(str)
_OP_ARGS = msgspec.json.Decoder(OpArgs)
HOST_API = ("cuda_runtime", "cuda_driver", "Runtime")
# the scanner's categories and what it does with their args: 'k', 'c', 'a' read the
# fields of KernelArgs, CopyArgs, ApiArgs; 'r' returns the raw args (decoded as OpArgs for
# GEMM ops); '-' ignores them. The capitalised ones are PyTorch 1.8-1.10's names.
SCAN_CATEGORIES = ("kernel", "cuda_runtime", "cuda_driver", "gpu_memcpy", "gpu_memset",
                   "user_annotation", "cpu_op", "Kernel", "Runtime", "Memcpy", "Memset",
                   "Operator")  # fmt: skip
SCAN_MODES = "kaacc-rkaccr"
# categories of CPU ops (routed by name: GEMM ops and, for Operator, range-like names to
# the NVTX-like table, the rest to cpu_ops)
_OP_CATEGORIES = ("cpu_op", "Operator")
_SCAN_TYPES = {"cat": np.int8, "name": np.int32, "start": np.int64, "dur": np.int64,
               "args_off": np.int64, "args_len": np.int64}  # fmt: skip
SCANNER_ENV = "ADVISOR_KINETO_SCANNER"
# the columns each table is built from (both readers: scanner and msgspec)
_TABLE_COLUMNS = {
    "kernels": ("start", "end", "pid", "device", "stream", "grid_x", "grid_y", "grid_z",
                "block_x", "block_y", "block_z", "registers", "smem", "correlation",
                "graph_node"),
    "api": ("start", "end", "pid", "tid", "correlation"),
    "memcpy": ("start", "end", "pid", "device", "stream", "bytes", "correlation"),
    "memset": ("start", "end", "pid", "device", "stream", "bytes", "correlation"),
    "nvtx": ("start", "end", "pid", "tid"),
    "cpu_ops": ("start", "end", "pid", "tid"),
}  # fmt: skip
# the tables and the event categories they hold (rows in the trace's order)
_CATEGORIES_OF = {"kernels": ("kernel", "Kernel"), "api": HOST_API,
                  "memcpy": ("gpu_memcpy", "Memcpy"), "memset": ("gpu_memset", "Memset"),
                  "nvtx": ("user_annotation", *_OP_CATEGORIES)}  # fmt: skip
_TABLE_OF = {cat: table for table, cats in _CATEGORIES_OF.items() for cat in cats}
_COPY = re.compile(r"Memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.IGNORECASE)
CHUNK_BYTES = 32 << 20  # events are decoded a chunk at a time: memory stays bounded
_KEY = b'"traceEvents"'
_BOUNDARY = b",\n  {"  # Kineto writes each event from a line that starts with two spaces


def looks_like_kineto(head: bytes) -> bool:
    """True when the first bytes of a (decompressed) JSON document are Kineto's."""
    return _KEY in head or (b'"schemaVersion"' in head and b'"deviceProperties"' in head)


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


def read_kineto(path: str | Path, processes: int | None = None) -> Trace:
    """Read one Kineto JSON trace (optionally gzip) into a Trace; ``processes``: how many
    processes a large uncompressed trace may be read by (default READ_PROCESSES)."""
    p = Path(path)
    with _no_gc():  # (millions of short-lived objects, none in a cycle: no collections)
        return _read_kineto(p, processes or READ_PROCESSES)


@contextlib.contextmanager
def _no_gc():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _read_kineto(p: Path, processes: int) -> Trace:
    collect = _Collector()
    try:
        with open(p, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
        size = p.stat().st_size
        if not gz and scanner_enabled() and p.is_file():
            read = _read_mapped(p, processes)
        elif not gz and size >= PARALLEL_MIN_BYTES:
            read = _read_parallel(p, size, processes)
        else:
            read = None
        if read is None:
            with gzip.open(p, "rb") if gz else open(p, "rb") as fh, _ReadAhead(fh) as ahead:
                docs = _stream(ahead, collect)
            tables, bad = collect.tables(), collect.bad
        else:
            docs, tables, bad = read
    except READ_ERRORS as exc:
        raise AdvisorInputError(
            str(p), f"cannot read the Kineto trace: {read_problem(exc)}"
        ) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise AdvisorInputError(str(p), f"not a valid Kineto JSON trace: {json_problem(exc)}"
                                ) from None  # fmt: skip
    except RecursionError:  # (msgspec, where the compiled scanner declines the bytes)
        raise AdvisorInputError(str(p), f"not a valid Kineto JSON trace: it {TOO_DEEP}") from None
    if not any(d.traceEvents is not None for d in docs):
        raise AdvisorInputError(str(p), "JSON without 'traceEvents': not a PyTorch profiler trace")
    if tables["kernels"] is None:
        raise AdvisorInputError(
            str(p), "Kineto trace without GPU kernels (profile with ProfilerActivity.CUDA)"
        )
    version = next((d.schemaVersion for d in docs if d.schemaVersion is not None), "?")
    trace = Trace(
        path=str(p), format="kineto-json", producer_version=f"PyTorch profiler (Kineto, schema "
        f"{version})", kernels=tables["kernels"],
    )  # fmt: skip
    for name in ("api", "memcpy", "memset", "nvtx", "cpu_ops"):
        if tables[name] is not None:
            setattr(trace, name, tables[name])
    for (table, field), n in sorted(bad.items()):
        trace.warnings.append(non_numeric_warning(n, table, field))
    _host_pids(trace)
    _known_devices(trace)
    if trace.api.empty:
        trace.warnings.append(
            "no CUDA runtime/driver events in the trace: idle gaps cannot be attributed to host "
            "causes and GPU work cannot be matched to ranges"
        )
    _tidy(trace)
    props = [x for d in docs for x in d.deviceProperties]
    props = _renumbered(props, trace)
    trace.gpus = _gpus(props, trace.devices)
    _workgroups(trace)
    info = next((d.distributedInfo for d in docs if d.distributedInfo), None) or {}
    if isinstance(info.get("rank"), int):
        trace.rank = int(info["rank"])
        trace.sources.append(f"distributedInfo: rank {info['rank']} of {info.get('world_size')}")
    if isinstance(info.get("world_size"), int):
        trace.world_size = int(info["world_size"])
    base = next((d.baseTimeNanoseconds for d in docs if d.baseTimeNanoseconds is not None), None)
    if isinstance(base, int) and base > 0:
        trace.epoch_offset_ns = base  # (ts counts from the host's boot; base is its epoch time)
    return trace


class _ReadAhead:
    """A file's next blocks read by a thread while the current one is decoded (for a gzip
    trace the inflating, which releases the GIL, runs beside the scanning); at most
    ``ahead`` blocks wait, so memory stays bounded."""

    def __init__(self, fh, block: int = CHUNK_BYTES, ahead: int = 2) -> None:
        self._blocks: queue.Queue = queue.Queue(maxsize=ahead)
        self._pending = b""
        self._eof = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, args=(fh, block), daemon=True)

    def __enter__(self) -> _ReadAhead:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        while self._thread.is_alive():  # (unblock a producer waiting on a full queue)
            with contextlib.suppress(queue.Empty):
                self._blocks.get(timeout=0.05)
        self._thread.join()

    def _fill(self, fh, block: int) -> None:
        try:
            while not self._stop.is_set():
                data = fh.read(block)
                self._blocks.put(data)
                if not data:
                    return
        except BaseException as exc:  # (raised again in the reader's thread)
            self._blocks.put(exc)

    def _next(self) -> bytes:
        item = self._blocks.get()
        if isinstance(item, BaseException):
            raise item
        self._eof = not item
        return item

    def read(self, n: int = -1) -> bytes:
        if not self._pending and not self._eof and n >= 0:
            block = self._next()
            if len(block) <= n:
                return block
            self._pending = block
        parts, have = [self._pending], len(self._pending)
        while (n < 0 or have < n) and not self._eof:
            block = self._next()
            parts.append(block)
            have += len(block)
        data = b"".join(parts)
        if n < 0:
            self._pending = b""
            return data
        self._pending = data[n:]
        return data[:n]


def _head(fh) -> tuple[bytes, int, int]:
    """(first bytes of the document, offset of the ``"traceEvents"`` key or -1, offset of
    its array's ``[`` or -1); the key comes after a few small keys."""
    first = fh.read(CHUNK_BYTES)
    at = first.find(_KEY)
    while at < 0 and len(first) < 4 * CHUNK_BYTES:
        more = fh.read(CHUNK_BYTES)
        if not more:
            break
        first += more
        at = first.find(_KEY)
    bracket = first.find(b"[", at) if at >= 0 else -1
    return first, at, bracket


def _stream(fh, collect: _Collector) -> list[Document]:
    """Feed the events of the document in ``fh`` to ``collect`` a chunk at a time; returns
    the document's other parts (head and tail, decoded with no events or the last ones).

    Kineto starts every event on a line of its own, two spaces in: the chunks are cut at
    ``,\n  {``, which JSON can only hold between tokens (a string never holds a raw newline).
    One buffer is reused: the cut comma becomes the chunk's closing ``]`` and the next
    chunk's opening ``[``, so no chunk is copied to be decoded. A document written otherwise
    (minified, another indent) is decoded whole."""
    first, at, bracket = _head(fh)
    if bracket < 0 or _BOUNDARY not in first[bracket:]:
        whole = _DOCUMENT.decode(first + fh.read())
        collect.add(whole.traceEvents or [])
        return [whole]
    head = _DOCUMENT.decode(first[:at] + b'"traceEvents": []}')
    buf = bytearray(first[bracket:])  # starts with the array's '['
    del first
    return [head, _feed(fh, buf, collect, None)]


def _feed(fh, buf: bytearray, collect: _Collector, remaining: int | None) -> Document | None:
    """Decode events chunk by chunk from ``buf`` (starting with ``[``) and the next bytes of
    ``fh``: at most ``remaining`` more bytes, whose end is a cut between two events (then
    None is returned), or, with ``remaining=None``, up to the end of the document (then its
    tail, decoded with the last events, is returned)."""
    eof = False
    while True:
        cut = buf.rfind(_BOUNDARY)
        if (cut <= 0 or len(buf) < CHUNK_BYTES) and not eof:
            n = CHUNK_BYTES if remaining is None else min(CHUNK_BYTES, remaining)
            more = fh.read(n) if n > 0 else b""
            if remaining is not None:
                remaining -= len(more)
            if more:
                buf += more
            else:
                eof = True
            continue
        if cut <= 0:
            if remaining is None:  # the last events and the rest of the document
                tail = _DOCUMENT.decode(b'{"traceEvents": ' + bytes(buf))
                collect.add(tail.traceEvents or [])
                return tail
            if len(buf) > 1:  # a span's last events
                buf += b"]"
                collect.add_json(buf)
            return None
        buf[cut] = ord("]")
        with memoryview(buf) as view:
            collect.add_json(view[: cut + 1])
        del buf[:cut]  # the rest starts at the cut: its comma becomes the next '['
        buf[0] = ord("[")


PARALLEL_MIN_BYTES = 192 << 20  # uncompressed traces this large are read by several processes
SPAN_MIN_BYTES = 96 << 20  # at least this much of the file per process
READ_PROCESSES = min(os.cpu_count() or 1, 4)  # default (the many-trace workers pass fewer)


def _next_cut(fh, offset: int) -> int | None:
    """File offset of the first ``,\n  {`` cut between events at or after ``offset``."""
    fh.seek(offset)
    tail = b""
    while True:
        block = fh.read(1 << 20)
        if not block:
            return None
        found = (tail + block).find(_BOUNDARY)
        if found >= 0:
            return offset - len(tail) + found
        offset += len(block)
        tail = block[-(len(_BOUNDARY) - 1) :]


def _read_span(path: str, start: int, stop: int | None) -> tuple[dict, Document | None, Counter]:
    """The tables of the events between two cuts (``start``: the offset of a cut's comma or
    of the array's ``[``; ``stop``: the next span's start, None: the end of the document)."""
    collect = _Collector()
    with open(path, "rb") as fh:
        fh.seek(start + 1)
        remaining = None if stop is None else stop - start - 1
        tail = _feed(fh, bytearray(b"["), collect, remaining)
    if tail is not None and tail.traceEvents:
        tail.traceEvents = []  # (read into the tables already: not sent back)
    return collect.tables(), tail, collect.bad


def _read_parallel(
    p: Path, size: int, processes: int
) -> tuple[list[Document], dict, Counter] | None:
    """Read an uncompressed Kineto trace in spans cut between events, one process per span
    (events are decoded where they are read; only the tables travel back). None when the
    document is not laid out as Kineto writes it (then it is read in one process)."""
    with open(p, "rb") as fh:
        first, at, bracket = _head(fh)
        if bracket < 0 or _BOUNDARY not in first[bracket:]:
            return None
        head = _DOCUMENT.decode(first[:at] + b'"traceEvents": []}')
        workers = max(1, min(processes, size // SPAN_MIN_BYTES))
        starts = [bracket]
        for i in range(1, workers):
            cut = _next_cut(fh, max(size * i // workers, starts[-1] + 1))
            if cut is None:
                break
            starts.append(cut)
    stops = [*starts[1:], None]
    if len(starts) == 1:
        parts = [_read_span(str(p), starts[0], None)]
    else:
        with ProcessPoolExecutor(max_workers=len(starts)) as pool:
            parts = list(pool.map(_read_span, [str(p)] * len(starts), starts, stops))
    tables = {
        name: _concat([t[name] for t, _, _ in parts if t[name] is not None])
        for name in ("kernels", "api", "memcpy", "memset", "nvtx", "cpu_ops")
    }
    tail = parts[-1][1]
    bad = sum((b for _, _, b in parts), Counter())
    return [head, tail] if tail is not None else [head], tables, bad


SCAN_CHUNK_BYTES = 64 << 20  # the scanner's chunks of a memory-mapped trace


def _read_mapped(p: Path, threads: int) -> tuple[list[Document], dict, Counter] | None:
    """Read an uncompressed Kineto trace through a read-only memory map: the compiled scanner
    reads it in place, in chunks cut between events, ``threads`` chunks at a time (it
    releases the GIL); each chunk's pages are given back when it is done, so the map never
    holds the whole file. None when the document is not laid out as Kineto writes it (then
    it is streamed)."""
    with open(p, "rb") as fh:
        first, at, bracket = _head(fh)
        if bracket < 0 or _BOUNDARY not in first[bracket:]:
            return None
        head = _DOCUMENT.decode(first[:at] + b'"traceEvents": []}')
        del first
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            starts = [bracket]
            while (cut := mm.find(_BOUNDARY, starts[-1] + SCAN_CHUNK_BYTES)) >= 0:
                starts.append(cut)
            stops = [*starts[1:], -1]
            scan = partial(_scan_chunk, mm)
            if len(starts) == 1 or threads <= 1:
                parts = list(map(scan, starts, stops))
            else:
                with ThreadPoolExecutor(min(threads, len(starts))) as pool:
                    parts = list(pool.map(scan, starts, stops))
    if any(tail is not None for _, tail in parts[:-1]) or parts[-1][1] is None:
        return None  # the events array closed before the last cut: streamed instead
    collect = _Collector()
    for chunk, _ in parts:
        collect.append(chunk)
    return [head, parts[-1][1]], collect.tables(), collect.bad


def _scan_chunk(mm: mmap.mmap, start: int, stop: int) -> tuple[_Chunk, Document | None]:
    """The columns of the events of ``mm[start:stop]`` (``start``: the array's ``[`` or a
    cut's comma; ``stop``: the next cut, -1: the array's end) and, for the last chunk, the
    rest of the document; decoded by msgspec where the scanner declines the bytes."""
    found = _scan_events(mm, start, stop)
    if found is not None:
        chunk, closed = found
        tail = _DOCUMENT.decode(b'{"traceEvents": []' + mm[closed:]) if closed >= 0 else None
    elif stop >= 0:
        chunk, tail = _decode_events(_EVENTS.decode(b"[" + mm[start + 1 : stop] + b"]")), None
    else:
        tail = _DOCUMENT.decode(b'{"traceEvents": [' + mm[start + 1 :])
        chunk = _decode_events(tail.traceEvents or [])
        tail.traceEvents = []
    if hasattr(mmap, "MADV_DONTNEED"):  # (Linux) the pages read go back to the page cache
        page = start - start % mmap.PAGESIZE
        mm.madvise(mmap.MADV_DONTNEED, page, (stop if stop >= 0 else len(mm)) - page)
    return chunk, tail


class _Chunk(NamedTuple):
    """The rows of a chunk of events, per table: the columns its table is built from (see
    _TABLE_COLUMNS), ``name`` as codes into ``labels``; the range texts of ``nvtx``."""

    columns: dict[str, dict[str, np.ndarray]]
    labels: list[str]
    text: list[str]
    bad: Counter = Counter()  # (table, field) -> values of the wrong type (read as missing)


class _Collector:
    """The chunks' columns, in the trace's order, made into the tables once at the end (names
    categorical: a trace repeats a few thousand kernel names millions of times)."""

    def __init__(self) -> None:
        self.pieces: dict[str, list[dict[str, np.ndarray]]] = {t: [] for t in _TABLE_COLUMNS}
        self.text: list[str] = []
        self.bad: Counter = Counter()  # (table, field) -> values of the wrong type
        self._code: dict[str, int] = {}  # name -> code, in order of first appearance
        self.scanner = scanner_enabled()

    def add_json(self, buf) -> None:
        """The events of ``buf``, the bytes of one JSON array of events: scanned into columns
        by the compiled scanner where it is built and takes them, else decoded by msgspec
        (the reference: the same columns, or the error)."""
        found = _scan_events(buf) if self.scanner else None
        if found is None or found[1] != len(buf):
            self.add(_EVENTS.decode(buf))
        else:
            self.append(found[0])

    def add(self, events: list[Event]) -> None:
        """Events decoded by msgspec."""
        self.append(_decode_events(events))

    def append(self, chunk: _Chunk) -> None:
        code = self._code
        lut = np.fromiter((code.setdefault(x, len(code)) for x in chunk.labels), dtype=np.int64,
                          count=len(chunk.labels))  # fmt: skip
        for table, c in chunk.columns.items():
            self.pieces[table].append({**c, "name": lut[c["name"]]})
        self.text += chunk.text
        self.bad.update(chunk.bad)

    def tables(self) -> dict[str, pd.DataFrame | None]:
        labels = np.array(list(self._code), dtype=object)
        out: dict[str, pd.DataFrame | None] = {}
        for table, pieces in self.pieces.items():
            if not pieces:
                out[table] = None
                continue
            c = {k: np.concatenate([x[k] for x in pieces]) for k in pieces[0]}
            names = _categorical(labels, c.pop("name"))
            out[table] = (
                _range_table(c, self.text) if table == "nvtx"
                else _set_table(c) if table == "memset"
                else _BUILDERS[table](c, names)
            )  # fmt: skip
            if table == "nvtx" and len(self.text) != len(c["start"]):
                raise RuntimeError("range texts and rows disagree")
        return out


def _decode_events(events: list[Event]) -> _Chunk:
    """The columns of events decoded by msgspec (the reference the scanner is tested against)."""
    # one pass appends each event to its table's list (a dict lookup per event), in the
    # trace's order; those lists, a fraction of the events, are then filtered
    lists: dict[str, list[Event]] = {table: [] for table in _TABLE_COLUMNS}
    get = _TABLE_OF.get
    for e in events:
        table = get(e.cat) if isinstance(e.cat, str) else None
        if table is not None:
            if not isinstance(e.name, str):
                e.name = "" if e.name is None else msgspec.json.encode(e.name).decode()
            lists[table].append(e)
    rows = {t: [e for e in b if e.ph == "X" and e.ts is not None] for t, b in lists.items()}
    bad: Counter = Counter()
    ops = [e for e in rows["nvtx"] if e.cat in _OP_CATEGORIES]
    rows["cpu_ops"] = [e for e in ops if _op_kind(e.cat, e.name) == _PLAIN_OP]
    rows["nvtx"] = [e for e in rows["nvtx"]
                    if e.cat not in _OP_CATEGORIES
                    or _op_kind(e.cat, e.name) != _PLAIN_OP]  # fmt: skip
    labels: dict[str, int] = {}
    columns, text = {}, []
    for table, kind in _ARGS_OF.items():
        events = rows[table]
        if not events:
            continue
        c = _columns(events, kind, bad, table)
        c["name"] = np.fromiter((labels.setdefault(e.name, len(labels)) for e in events),
                                dtype=np.int64, count=len(events))  # fmt: skip
        columns[table] = {k: c[k] for k in (*_TABLE_COLUMNS[table], "name")}
        if table == "nvtx":
            gemm = [e for e in events if _op_kind(e.cat, e.name) == _GEMM_OP]
            dims = iter([a.shapes if isinstance(a.shapes, list) else None
                         for a in _args(gemm, OpArgs)] if gemm else [])  # fmt: skip
            text = [_op_text(e.name, next(dims)) if _op_kind(e.cat, e.name) == _GEMM_OP
                    else e.name for e in events]  # fmt: skip
    return _Chunk(columns, list(labels), text, bad)


def _scan_events(buf, start: int = 0, stop: int = -1) -> tuple[_Chunk, int] | None:
    """(the columns, the offset after the array's closing ``]`` or -1) of the events in
    ``buf[start:stop]`` (see _kscan.c), from the compiled scanner; None where it declines
    the bytes (or a name or a GEMM op's args do not decode): then msgspec decodes them."""
    found = _kscan.scan(buf, SCAN_CATEGORIES, SCAN_MODES, start, stop, None)
    if found is None:
        return None
    rows, raw, raw_names, closed = found
    try:  # (distinct raw names may decode alike: the collector's codes merge them)
        labels = [_STR.decode(b'"' + x + b'"') for x in raw_names]
    except msgspec.DecodeError:
        return None
    c = {k: np.frombuffer(v, dtype=_SCAN_TYPES.get(k, np.float64)) for k, v in raw.items()}
    codes, cat = c.pop("name"), c.pop("cat")
    c["end"] = c["start"] + c.pop("dur")
    # CPU ops: GEMM ops and Operator range names join the ranges, the others are cpu_ops
    is_op = np.isin(cat, [SCAN_CATEGORIES.index(x) for x in _OP_CATEGORIES])
    kind = np.full(len(cat), -1, dtype=np.int8)
    if is_op.any():
        per_label = {x: np.array([_op_kind(x, name) for name in labels] or [0], dtype=np.int8)
                     for x in _OP_CATEGORIES}  # fmt: skip
        for x, table in per_label.items():
            mine = cat == SCAN_CATEGORIES.index(x)
            kind[mine] = table[codes[mine]]
    columns, text = {}, []
    for table, cats in (*_CATEGORIES_OF.items(), ("cpu_ops", _OP_CATEGORIES)):
        at = np.isin(cat, [SCAN_CATEGORIES.index(x) for x in cats])
        if table == "nvtx":
            at &= ~is_op | (kind != _PLAIN_OP)
        elif table == "cpu_ops":
            at &= kind == _PLAIN_OP
        at = np.flatnonzero(at)
        if not len(at):
            continue
        columns[table] = {k: c[k][at] for k in _TABLE_COLUMNS[table]}
        columns[table]["name"] = codes[at]
        if table == "nvtx":
            names = np.asarray(labels, dtype=object)[codes[at]]
            gemm = np.flatnonzero(kind[at] == _GEMM_OP)
            try:
                for i in gemm:
                    off, n = c["args_off"][at[i]], c["args_len"][at[i]]
                    dims = _OP_ARGS.decode(buf[off : off + n]).shapes if n else None
                    names[i] = _op_text(names[i], dims)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return None
            text = names.tolist()
    return _Chunk(columns, labels, text), closed


_PLAIN_OP, _GEMM_OP, _RANGE_OP = 0, 1, 2  # what a CPU op is (_op_kind)


@functools.cache
def _op_kind(category: str, name: str) -> int:
    """A CPU op event as the tables take it: a matrix-multiply op (a range with its shapes),
    a PyTorch 1.8-1.10 ``Operator`` that is a record_function range (no ``::`` in its name:
    ProfilerStep#3, enumerate(DataLoader)#...), or a plain op (cpu_ops)."""
    if _is_gemm_op(name):
        return _GEMM_OP
    if category == "Operator" and "::" not in name and not _AUTOGRAD_NODE.search(name):
        return _RANGE_OP
    return _PLAIN_OP


_AUTOGRAD_NODE = re.compile(r"^\w*Backward\d*$")  # CudnnConvolutionBackward (1.8: Operator)


@functools.cache
def _is_gemm_op(name: str) -> bool:
    """A cpu_op name of a matrix-multiply op (the data's gemm_op pattern)."""
    return regex("gemm_op").match(name) is not None


def scanner_enabled() -> bool:
    """True when the compiled scanner is built and not switched off (``ADVISOR_KINETO_SCANNER=0``
    reads with msgspec alone: the reference the scanner is tested against)."""
    return _kscan is not None and os.environ.get(SCANNER_ENV, "1") != "0"


def _categorical(labels: np.ndarray, codes: np.ndarray) -> pd.Categorical:
    """Rows' names from codes into ``labels`` (distinct) as pandas builds a categorical from
    the strings: the categories are the sorted names present."""
    used = np.flatnonzero(np.bincount(codes, minlength=len(labels)))
    names = labels[used]
    order = np.argsort(names, kind="stable")
    rank = np.zeros(len(labels), dtype=np.int64)
    rank[used[order]] = np.arange(len(order))
    return pd.Categorical.from_codes(rank[codes], categories=pd.Index(names[order].tolist()))


def _columns(
    events: list[Event], kind: type | None, bad: Counter | None = None, table: str = ""
) -> dict[str, np.ndarray]:
    """The scanner's columns for decoded events: times (ns), pid, tid and the fields of
    ``kind``, the struct their ``args`` decode to (grid and block as _x, _y, _z). Values of
    the wrong type are missing (NaN; times: -1, which the reader's quality check drops) and
    counted in ``bad`` per (table, field)."""
    n = len(events)
    bad = Counter() if bad is None else bad
    start, end = _times(events)
    c = {
        "start": start,
        "end": end,
        # (ids Kineto may write as text: "stream 7" for GPU rows of PyTorch 1.8; not damage)
        "pid": _num([e.pid for e in events], n),
        "tid": _num([e.tid for e in events], n),
    }
    if kind is not None:
        args = _args(events, kind)
        for field in kind.__struct_fields__:
            values = [getattr(a, field) for a in args]
            name = kind.__struct_encode_fields__[kind.__struct_fields__.index(field)]
            if field in ("grid", "block"):
                xyz = _xyz(values, n, bad, (table, name))
                for i, axis in enumerate("xyz"):
                    c[f"{field}_{axis}"] = xyz[:, i]
            else:
                c[field] = _num(values, n, bad, (table, name))
    return c


def _device(c: dict[str, np.ndarray]) -> np.ndarray:
    """A GPU event's device: ``args.device``, else its pid (Kineto gives GPU events the
    device as their pid)."""
    return np.where(np.isnan(c["device"]), c["pid"], c["device"])


def _kernel_table(c: dict[str, np.ndarray], names: pd.Categorical) -> pd.DataFrame:
    n = len(names)
    nan = np.full(n, np.nan)
    return pd.DataFrame(
        {
            "device": _device(c),
            "stream": c["stream"], "start": c["start"], "end": c["end"],
            "name": names, "demangled": names,
            "grid_x": c["grid_x"], "grid_y": c["grid_y"], "grid_z": c["grid_z"],
            "block_x": c["block_x"], "block_y": c["block_y"], "block_z": c["block_z"],
            "registers": c["registers"],
            "static_smem": c["smem"],  # Kineto: static + dynamic
            "dynamic_smem": np.zeros(n), "smem_executed": nan,
            "cluster_x": nan, "cluster_y": nan, "cluster_z": nan,
            "correlation": c["correlation"],
            "pid": np.zeros(n),  # the launching process, from the calls (_host_pids)
            "graph_node": c["graph_node"],
        },
        copy=False,  # (no block consolidation: a second copy of millions of rows)
    )  # fmt: skip


def _api_table(c: dict[str, np.ndarray], names: pd.Categorical) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "start": c["start"],
            "end": c["end"],
            "name": names,
            "tid": c["tid"],
            "pid": c["pid"],
            "correlation": c["correlation"],
        },
        copy=False,
    )


def _set_table(c: dict[str, np.ndarray]) -> pd.DataFrame:
    """Sets (and the columns copies share): device, stream, times, bytes, correlation."""
    return pd.DataFrame(
        {
            "device": _device(c),
            "stream": c["stream"],
            "start": c["start"],
            "end": c["end"],
            "bytes": c["bytes"],
            "correlation": c["correlation"],
            "pid": np.zeros(len(c["start"])),
        },
        copy=False,
    )


def _copy_table(c: dict[str, np.ndarray], names: pd.Categorical) -> pd.DataFrame:
    """Copies: the memset columns plus the direction and the two sides' memory kinds, read
    from the event name ("Memcpy HtoD (Pageable -> Device)"), once per distinct name."""
    out = _set_table(c)
    parsed = []
    for name in names.categories:
        m = _COPY.search(name)
        parsed.append((
            m.group(1) if m else "Unknown",
            m.group(2).lower() if m and m.group(2) else "unknown",
            m.group(3).lower() if m and m.group(3) else "unknown",
        ))  # fmt: skip
    at = out.columns.get_loc("bytes") + 1
    for i, col in enumerate(("kind", "src_memory", "dst_memory")):
        out.insert(at + i, col, [parsed[code][i] for code in names.codes])
    return out


def _op_text(name: str, dims: list | None) -> str:
    """A matrix-multiply op as a range text with its shapes, in emit_nvtx's form."""
    return f"{name}, sizes = {msgspec.json.encode(dims).decode()}" if dims else name


def _range_table(c: dict[str, np.ndarray], text: list[str]) -> pd.DataFrame:
    """record_function ranges and matrix-multiply ops (with their shapes in the text, in
    emit_nvtx's ``sizes = [...]`` form) as NVTX-like ranges."""
    return pd.DataFrame(
        {
            "start": c["start"],
            "end": c["end"],
            "text": text,
            "tid": c["tid"],
            "pid": c["pid"],
            "domain": [""] * len(text),
        },
        copy=False,
    )


def _op_table(c: dict[str, np.ndarray], names: pd.Categorical) -> pd.DataFrame:
    """CPU ops (start, end, pid, tid, name): what the host threads were doing."""
    return pd.DataFrame({"start": c["start"], "end": c["end"], "pid": c["pid"], "tid": c["tid"],
                         "name": names}, copy=False)  # fmt: skip


# the struct each table's events' args decode to
_ARGS_OF = {"kernels": KernelArgs, "api": ApiArgs, "memcpy": CopyArgs, "memset": CopyArgs,
            "nvtx": None, "cpu_ops": None}  # fmt: skip
_BUILDERS = {"kernels": _kernel_table, "api": _api_table, "memcpy": _copy_table,
             "cpu_ops": _op_table}  # fmt: skip


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame | None:
    """Chunks' (or spans') tables as one; categorical columns stay categorical (their
    categories united) instead of becoming a column of strings."""
    if not parts:
        return None
    out = pd.concat(parts, ignore_index=True)
    for col in parts[0].columns:
        if isinstance(parts[0][col].dtype, pd.CategoricalDtype) and len(parts) > 1:
            out[col] = union_categoricals(
                [x[col] for x in parts], ignore_order=True, sort_categories=True
            )  # (sorted: the same categories however the trace was cut into chunks)
    return out


def _args(events: list[Event], kind: type) -> list:
    """The ``args`` of events decoded as ``kind``, all in one decoder call."""
    blob = b"[" + b",".join(e.args for e in events) + b"]"
    return msgspec.json.decode(blob, type=list[kind])


def _known_devices(trace: Trace) -> None:
    """GPU events with neither ``args.device`` nor a numeric pid: counted on device 0, and
    the trace says so."""
    for name in ("kernels", "memcpy", "memset"):
        table = getattr(trace, name)
        missing = table["device"].isna() if len(table) else pd.Series(dtype=bool)
        if missing.any():
            table.loc[missing, "device"] = 0.0
            trace.warnings.append(
                f"{int(missing.sum())} {name} events without a device (no args.device, no "
                "numeric pid): counted on device 0"
            )


def _host_pids(trace: Trace) -> None:
    """GPU events carry the device as their pid: give them their launching process (by
    correlation id, the first call holding it; the trace's one process when a launch call is
    missing)."""
    api = trace.api
    pids = api["pid"].dropna().unique() if len(api) else np.array([])
    fallback = float(pids[0]) if len(pids) == 1 else np.nan
    corr = api["correlation"].to_numpy(dtype=np.float64) if len(api) else np.zeros(0)
    known = ~np.isnan(corr)
    keys, first = np.unique(corr[known], return_index=True)
    by_corr = api["pid"].to_numpy(dtype=np.float64)[np.flatnonzero(known)[first]]
    for name in ("kernels", "memcpy", "memset"):
        table = getattr(trace, name)
        if len(table):
            c = table["correlation"].to_numpy(dtype=np.float64)
            pid = np.full(len(c), fallback)
            if len(keys):
                at = np.minimum(np.searchsorted(keys, c), len(keys) - 1)
                found = keys[at] == c
                pid[found] = by_corr[at[found]]
            pid = np.where(np.isnan(pid), fallback, pid)  # (a call without a pid)
            table["pid"] = np.where(np.isnan(pid), 0.0, pid)


# integer columns as the Nsight reader types them (kept float where a value is missing)
_INT_COLUMNS = {
    "kernels": {"device": "int32", "stream": "int32", "grid_x": "int32", "grid_y": "int32",
                "grid_z": "int32", "block_x": "int32", "block_y": "int32", "block_z": "int32",
                "registers": "int32", "static_smem": "int32", "dynamic_smem": "int32",
                "correlation": "int64", "pid": "int32"},
    "api": {"tid": "int64", "pid": "int32", "correlation": "int64"},
    "memcpy": {"device": "int32", "stream": "int32", "correlation": "int64", "pid": "int32"},
    "memset": {"device": "int32", "stream": "int32", "correlation": "int64", "pid": "int32"},
    "nvtx": {"tid": "int64", "pid": "int32"},
    "cpu_ops": {"tid": "int64", "pid": "int32"},
}  # fmt: skip


def _tidy(trace: Trace) -> None:
    """Integer columns as integers (where no value is missing), like the Nsight reader's, so
    that nothing downstream sees the difference (names are categorical already: _names)."""
    for name, cols in _INT_COLUMNS.items():
        table = getattr(trace, name)
        for col, dtype in cols.items():
            if col in table and len(table) and _fits(table[col], np.dtype(dtype)):
                table[col] = table[col].astype(dtype)


def _fits(col: pd.Series, dtype: np.dtype) -> bool:
    """Whether every value of ``col`` is an integer that ``dtype`` holds (the conversion
    loses nothing: a fractional or out-of-range value keeps the column as it is, for the
    quality check to see)."""
    if not pd.api.types.is_numeric_dtype(col) or col.isna().any():
        return False
    v = col.to_numpy()
    if v.dtype.kind == "f" and not (v == np.floor(v)).all():
        return False
    info = np.iinfo(dtype)
    return bool(len(v) == 0 or (v.min() >= info.min and v.max() <= info.max))


def _ns(ts: np.ndarray) -> np.ndarray:
    """Microsecond timestamps with fractions -> exact integer nanoseconds (the whole
    microseconds and the fraction are converted apart: no rounding of the large part)."""
    whole = np.floor(ts)
    return whole.astype(np.int64) * 1000 + np.round((ts - whole) * 1000).astype(np.int64)


def _times(events: list[Event]) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) ns; -1 for an event whose ts or dur is not a number (a missing dur is
    0), which the reader's quality check drops and counts."""
    n = len(events)
    ts = _num([e.ts for e in events], n)
    dur = _num([0.0 if e.dur is None else e.dur for e in events], n)
    ok = np.isfinite(ts) & np.isfinite(dur)
    if ok.all():
        start = _ns(ts)
        return start, start + np.round(dur * 1000).astype(np.int64)
    start = np.full(n, -1, dtype=np.int64)
    end = np.full(n, -1, dtype=np.int64)
    start[ok] = _ns(ts[ok])
    end[ok] = start[ok] + np.round(dur[ok] * 1000).astype(np.int64)
    return start, end


def _num(values, count: int, bad: Counter | None = None, key=None) -> np.ndarray:
    """A float column from loosely typed values (numbers, numeric strings, None -> NaN);
    all-number columns, the usual case, in one pass. Other values (text, lists, objects,
    booleans, integers past the float range) are NaN, and counted in ``bad[key]``."""
    values = list(values)
    try:
        if not any(isinstance(v, bool) for v in values):
            return np.fromiter(values, dtype=np.float64, count=count)
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.full(count, np.nan)
    wrong = 0
    for i, v in enumerate(values):
        if isinstance(v, int | float) and not isinstance(v, bool):
            try:
                out[i] = v
            except OverflowError:  # (an integer of 309 digits or more)
                wrong += 1
        elif isinstance(v, str):
            try:
                out[i] = float(v)
            except ValueError:
                wrong += 1
        elif v is not None:
            wrong += 1
    if wrong and bad is not None:
        bad[key] += wrong
    return out


def _xyz(lists: list, count: int, bad: Counter | None = None, key=None) -> np.ndarray:
    """(count, 3) floats from [x, y, z] lists (NaN where missing or malformed; malformed
    ones counted in ``bad[key]``)."""
    try:
        out = np.array(lists, dtype=np.float64)
        if out.shape == (count, 3):
            return out
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.full((count, 3), np.nan)
    wrong = 0
    for i, v in enumerate(lists):
        if isinstance(v, list) and 1 <= len(v) <= 3:
            for j, x in enumerate(v):
                try:
                    if isinstance(x, bool) or not isinstance(x, int | float):
                        raise TypeError
                    out[i, j] = x
                except (TypeError, OverflowError):  # (an integer past the float range too)
                    wrong += 1
                    break
        elif v is not None:
            wrong += 1
    if wrong and bad is not None:
        bad[key] += wrong
    return out


def _renumbered(props: list[DeviceProps], trace: Trace) -> list[DeviceProps]:
    """``deviceProperties`` for the trace's devices: a trace of one device whose one entry
    has another id (ROCm numbers the visible device by HIP_VISIBLE_DEVICES: kernels on device
    2, the entry id 0) takes that entry for its device, and says so."""
    devices = trace.devices
    ids = {p.id for p in props}
    if len(props) == 1 and len(devices) == 1 and devices[0] not in ids:
        trace.sources.append(
            f"deviceProperties: the one entry (id {props[0].id}, {props[0].name}) describes "
            f"device {devices[0]}, the trace's only device"
        )
        return [msgspec.structs.replace(props[0], id=devices[0])]
    return props


# ROCm launch calls whose grid is the global work size (work-items), not workgroups
_WORK_ITEM_GRID_CALLS = ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")


def _workgroups(trace: Trace) -> None:
    """Grids of kernels launched by hipExtModuleLaunchKernel (Tensile/hipBLASLt GEMMs) count
    work-items, as the call's arguments do: converted to workgroups (ceil(grid / block) per
    dimension), as every other kernel's grid counts them."""
    api, k = trace.api, trace.kernels
    if api.empty or k.empty or "correlation" not in api:
        return
    calls = api[api["name"].isin(_WORK_ITEM_GRID_CALLS)]
    if calls.empty:
        return
    rows = np.flatnonzero(k["correlation"].isin(set(calls["correlation"].dropna())).to_numpy())
    if rows.size == 0:
        return
    for axis in "xyz":
        grid = k[f"grid_{axis}"].to_numpy(np.float64)[rows]
        block = k[f"block_{axis}"].to_numpy(np.float64)[rows]
        col = k[f"grid_{axis}"].to_numpy(np.float64).copy()
        col[rows] = np.where(block >= 1, np.ceil(grid / np.maximum(block, 1)), grid)
        k[f"grid_{axis}"] = col.astype(k[f"grid_{axis}"].dtype) if np.isfinite(col).all() else col
    trace.sources.append(
        f"{rows.size:,} kernels launched by hipExtModuleLaunchKernel: their grid (work-items, "
        "as that call takes it) converted to workgroups"
    )


def _gpus(props: list[DeviceProps], devices: list[int]) -> dict[int, GpuSpec]:
    """GPU facts from ``deviceProperties`` (per-SM limits the document lacks, such as the
    resident-block limit, come from the built-in entry of the same model or compute
    capability)."""
    out = {}
    for d in props:
        if d.id not in devices or not d.numSms:
            continue
        amd = bool(d.gcnArchName) or "AMD" in d.name or "Instinct" in d.name
        known = match_gpu(d.name) or (match_gpu(d.gcnArchName) if d.gcnArchName else None)
        if amd:  # (a gfx target, never a CUDA compute capability: 9.4 is gfx94x, not Hopper)
            cc = (d.gcnArchName.split(":")[0] if d.gcnArchName
                  else known.compute_capability if known and known.vendor == "amd"
                  else f"gfx{d.computeMajor}{d.computeMinor}?")  # fmt: skip
        else:
            cc = f"{d.computeMajor}.{d.computeMinor}" if d.computeMajor is not None else "?"
        warp = d.warpSize or (64 if amd else 32)
        base = known.to_dict() if known else {}
        smem_sm = d.sharedMemPerMultiprocessor or d.maxSharedMemoryPerMultiProcessor
        out[d.id] = GpuSpec(
            name=d.name or (known.name if known else "unknown GPU"),
            vendor="amd" if amd else "nvidia",
            sm_count=int(d.numSms),
            compute_capability=cc,
            warp_size=warp,
            max_warps_per_sm=(d.maxThreadsPerMultiprocessor // warp if d.maxThreadsPerMultiprocessor
                              else base.get("max_warps_per_sm", 64)),
            max_blocks_per_sm=base.get("max_blocks_per_sm", 32),
            registers_per_sm=(d.regsPerMultiprocessor or base.get("registers_per_sm", 65536))
            if not amd else base.get("registers_per_sm", 512),
            shared_mem_per_sm=smem_sm or base.get("shared_mem_per_sm", 0),
            max_shared_mem_per_block=d.sharedMemPerBlockOptin
            or (d.sharedMemPerBlock if amd else None)
            or base.get("max_shared_mem_per_block", smem_sm or 0),
            reserved_shared_mem_per_block=base.get(
                "reserved_shared_mem_per_block", 1024 if (d.computeMajor or 0) >= 8 and not amd
                else 0
            ),
            clock_mhz=base.get("clock_mhz"),
            memory_bandwidth_gbs=base.get("memory_bandwidth_gbs"),
            dense_fp16_tflops=base.get("dense_fp16_tflops"),
            source="trace (deviceProperties)",
        )  # fmt: skip
    return out
