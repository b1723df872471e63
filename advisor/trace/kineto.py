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
  cpu_op                      only matrix-multiply ops (aten::mm/addmm/bmm/linear/...), as
                              ranges whose text carries their Input Dims (GEMM evidence and
                              shapes, as emit_nvtx(record_shapes=True) gives them)

Parsing: msgspec decodes the document into typed structs that hold only these fields, so the
many other keys (stacks, flows, python functions) never become Python objects. Times are
converted to integer nanoseconds exactly (whole microseconds and the fraction separately).
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import os
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from advisor.data import regex
from advisor.errors import AdvisorInputError
from advisor.trace.gpus import match_gpu
from advisor.trace.model import GpuSpec, Trace

Scalar = int | float | str | None


class Event(msgspec.Struct, gc=False):
    """One trace event; ``args`` stays raw JSON until its category is known to matter."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Scalar = None
    tid: Scalar = None
    ts: float | None = None
    dur: float | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


class KernelArgs(msgspec.Struct, gc=False):
    device: Scalar = None
    stream: Scalar = None
    correlation: Scalar = None
    grid: list | None = None
    block: list | None = None
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
    dims: list | None = msgspec.field(default=None, name="Input Dims")


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


_DOCUMENT = msgspec.json.Decoder(Document)
_EVENTS = msgspec.json.Decoder(list[Event])
HOST_API = ("cuda_runtime", "cuda_driver")
WANTED = {"kernel", "gpu_memcpy", "gpu_memset", "user_annotation", "cpu_op", *HOST_API}
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
    except (OSError, EOFError) as exc:
        raise AdvisorInputError(str(path), f"cannot read: {exc}") from None


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
        big = not gz and size >= PARALLEL_MIN_BYTES
        read = _read_parallel(p, size, processes) if big else None
        if read is None:
            with gzip.open(p, "rb") if gz else open(p, "rb") as fh:
                docs = _stream(fh, collect)
            tables = collect.tables()
        else:
            docs, tables = read
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise AdvisorInputError(str(p), f"cannot read the Kineto trace: {exc}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise AdvisorInputError(str(p), f"not a valid Kineto JSON trace: {exc}") from None
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
    for name in ("api", "memcpy", "memset", "nvtx"):
        if tables[name] is not None:
            setattr(trace, name, tables[name])
    _host_pids(trace)
    if trace.api.empty:
        trace.warnings.append(
            "no CUDA runtime/driver events in the trace: idle gaps cannot be attributed to host "
            "causes and GPU work cannot be matched to ranges"
        )
    _tidy(trace)
    props = [x for d in docs for x in d.deviceProperties]
    trace.gpus = _gpus(props, trace.devices)
    info = next((d.distributedInfo for d in docs if d.distributedInfo), None) or {}
    if isinstance(info.get("rank"), int):
        trace.rank = int(info["rank"])
        trace.sources.append(f"distributedInfo: rank {info['rank']} of {info.get('world_size')}")
    return trace


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
                collect.add(_EVENTS.decode(buf))
            return None
        buf[cut] = ord("]")
        with memoryview(buf) as view:
            collect.add(_EVENTS.decode(view[: cut + 1]))
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


def _read_span(path: str, start: int, stop: int | None) -> tuple[dict, Document | None]:
    """The tables of the events between two cuts (``start``: the offset of a cut's comma or
    of the array's ``[``; ``stop``: the next span's start, None: the end of the document)."""
    collect = _Collector()
    with open(path, "rb") as fh:
        fh.seek(start + 1)
        remaining = None if stop is None else stop - start - 1
        tail = _feed(fh, bytearray(b"["), collect, remaining)
    if tail is not None and tail.traceEvents:
        tail.traceEvents = []  # (read into the tables already: not sent back)
    return collect.tables(), tail


def _read_parallel(p: Path, size: int, processes: int) -> tuple[list[Document], dict] | None:
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
        name: _concat([t[name] for t, _ in parts if t[name] is not None])
        for name in ("kernels", "api", "memcpy", "memset", "nvtx")
    }
    tail = parts[-1][1]
    return [head, tail] if tail is not None else [head], tables


class _Collector:
    """Columns of the events that matter, built chunk by chunk (names categorical: a trace
    repeats a few thousand kernel names millions of times)."""

    def __init__(self) -> None:
        self.parts: dict[str, list[pd.DataFrame]] = {
            t: [] for t in ("kernels", "api", "memcpy", "memset", "nvtx")
        }
        self._is_gemm_op: dict[str, bool] = {}  # cpu_op name -> a matrix-multiply op

    def add(self, events: list[Event]) -> None:
        # one pass appends each event to its category's list (a dict lookup per event);
        # those lists, a fraction of the events, are then filtered; the GEMM-op pattern
        # runs once per distinct cpu_op name
        lists: dict[str, list[Event]] = {cat: [] for cat in WANTED}
        get = lists.get
        for e in events:
            bucket = get(e.cat)
            if bucket is not None:
                bucket.append(e)
        ops = lists.pop("cpu_op")
        gemm = self._is_gemm_op
        for name in {e.name for e in ops}.difference(gemm):
            gemm[name] = regex("gemm_op").match(name) is not None
        lists["cpu_op"] = [e for e in ops if gemm[e.name]]
        by_cat = {
            cat: [e for e in bucket if e.ph == "X" and e.ts is not None]
            for cat, bucket in lists.items()
        }
        if by_cat["kernel"]:
            self.parts["kernels"].append(self._kernels(by_cat["kernel"]))
        api = [e for cat in HOST_API for e in by_cat[cat]]
        if api:
            self.parts["api"].append(self._api(api))
        if by_cat["gpu_memcpy"]:
            self.parts["memcpy"].append(_copies(by_cat["gpu_memcpy"]))
        if by_cat["gpu_memset"]:
            self.parts["memset"].append(_sets(by_cat["gpu_memset"]))
        ranges = by_cat["user_annotation"] + by_cat["cpu_op"]
        if ranges:
            self.parts["nvtx"].append(_ranges(ranges))

    def tables(self) -> dict[str, pd.DataFrame | None]:
        return {name: _concat(parts) for name, parts in self.parts.items()}

    def _kernels(self, events: list[Event]) -> pd.DataFrame:
        n = len(events)
        args = _args(events, KernelArgs)
        start, end = _times(events)
        grid, block = _xyz([a.grid for a in args], n), _xyz([a.block for a in args], n)
        device = _num([a.device if a.device is not None else e.pid
                       for a, e in zip(args, events, strict=True)], n)  # fmt: skip
        names = _names(events)
        nan = np.full(n, np.nan)
        return pd.DataFrame(
            {
                "device": device, "stream": _num([a.stream for a in args], n),
                "start": start, "end": end, "name": names, "demangled": names,
                "grid_x": grid[:, 0], "grid_y": grid[:, 1], "grid_z": grid[:, 2],
                "block_x": block[:, 0], "block_y": block[:, 1], "block_z": block[:, 2],
                "registers": _num([a.registers for a in args], n),
                "static_smem": _num([a.smem for a in args], n),  # Kineto: static + dynamic
                "dynamic_smem": np.zeros(n), "smem_executed": nan,
                "cluster_x": nan, "cluster_y": nan, "cluster_z": nan,
                "correlation": _num([a.correlation for a in args], n),
                "pid": np.zeros(n),  # the launching process, from the calls (_host_pids)
                "graph_node": _num([a.graph_node for a in args], n),
            }
        )  # fmt: skip

    def _api(self, events: list[Event]) -> pd.DataFrame:
        n = len(events)
        start, end = _times(events)
        return pd.DataFrame(
            {
                "start": start,
                "end": end,
                "name": _names(events),
                "tid": _num([e.tid for e in events], n),
                "pid": _num([e.pid for e in events], n),
                "correlation": _num([a.correlation for a in _args(events, ApiArgs)], n),
            }
        )


def _names(events: list[Event]) -> pd.Categorical:
    """The events' names as a categorical (a few thousand distinct names, millions of rows:
    the rows hold small codes, not strings, from the first chunk on)."""
    return pd.Categorical([e.name for e in events])


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame | None:
    """Chunks' (or spans') tables as one; categorical columns stay categorical (their
    categories united) instead of becoming a column of strings."""
    if not parts:
        return None
    out = pd.concat(parts, ignore_index=True)
    for col in parts[0].columns:
        if isinstance(parts[0][col].dtype, pd.CategoricalDtype) and len(parts) > 1:
            out[col] = union_categoricals([x[col] for x in parts], ignore_order=True)
    return out


def _args(events: list[Event], kind: type) -> list:
    """The ``args`` of events decoded as ``kind``, all in one decoder call."""
    blob = b"[" + b",".join(e.args for e in events) + b"]"
    return msgspec.json.decode(blob, type=list[kind])


def _host_pids(trace: Trace) -> None:
    """GPU events carry the device as their pid: give them their launching process (by
    correlation id; the trace's one process when a launch call is missing)."""
    api = trace.api
    pids = api["pid"].dropna().unique() if len(api) else np.array([])
    fallback = float(pids[0]) if len(pids) == 1 else np.nan
    by_corr = api.dropna(subset=["correlation"]).drop_duplicates("correlation")
    by_corr = by_corr.set_index("correlation")["pid"] if len(by_corr) else pd.Series(dtype=float)
    for name in ("kernels", "memcpy", "memset"):
        table = getattr(trace, name)
        if len(table):
            pid = table["correlation"].map(by_corr) if len(by_corr) else pd.Series(np.nan)
            table["pid"] = pid.fillna(fallback).fillna(0).to_numpy()


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
}  # fmt: skip


def _tidy(trace: Trace) -> None:
    """Integer columns as integers (where no value is missing), like the Nsight reader's, so
    that nothing downstream sees the difference (names are categorical already: _names)."""
    for name, cols in _INT_COLUMNS.items():
        table = getattr(trace, name)
        for col, dtype in cols.items():
            if col in table and len(table) and table[col].notna().all():
                table[col] = table[col].astype(dtype)


def _ns(ts: np.ndarray) -> np.ndarray:
    """Microsecond timestamps with fractions -> exact integer nanoseconds (the whole
    microseconds and the fraction are converted apart: no rounding of the large part)."""
    whole = np.floor(ts)
    return whole.astype(np.int64) * 1000 + np.round((ts - whole) * 1000).astype(np.int64)


def _times(events: list[Event]) -> tuple[np.ndarray, np.ndarray]:
    ts = np.fromiter((e.ts for e in events), dtype=np.float64, count=len(events))
    dur = np.fromiter((e.dur or 0.0 for e in events), dtype=np.float64, count=len(events))
    start = _ns(ts)
    return start, start + np.round(dur * 1000).astype(np.int64)


def _num(values, count: int) -> np.ndarray:
    """A float column from loosely typed values (numbers, numeric strings, None -> NaN);
    all-number columns, the usual case, in one pass."""
    values = list(values)
    try:
        return np.fromiter(values, dtype=np.float64, count=count)
    except (TypeError, ValueError):
        pass
    out = np.full(count, np.nan)
    for i, v in enumerate(values):
        if isinstance(v, int | float):
            out[i] = v
        elif isinstance(v, str):
            with contextlib.suppress(ValueError):
                out[i] = float(v)
    return out


def _xyz(lists: list, count: int) -> np.ndarray:
    """(count, 3) floats from [x, y, z] lists (NaN where missing or malformed)."""
    try:
        out = np.array(lists, dtype=np.float64)
        if out.shape == (count, 3):
            return out
    except (TypeError, ValueError):
        pass
    out = np.full((count, 3), np.nan)
    for i, v in enumerate(lists):
        if isinstance(v, list):
            for j, x in enumerate(v[:3]):
                if isinstance(x, int | float):
                    out[i, j] = x
    return out


def _copies(events: list[Event]) -> pd.DataFrame:
    """Copies: the memset columns plus the direction and the two sides' memory kinds, read
    from the event name ("Memcpy HtoD (Pageable -> Device)")."""
    out = _sets(events)
    kind, src, dst = [], [], []
    for e in events:
        m = _COPY.search(e.name)
        kind.append(m.group(1) if m else "Unknown")
        src.append(m.group(2).lower() if m and m.group(2) else "unknown")
        dst.append(m.group(3).lower() if m and m.group(3) else "unknown")
    at = out.columns.get_loc("bytes") + 1
    for offset, (col, values) in enumerate((("kind", kind), ("src_memory", src),
                                            ("dst_memory", dst))):  # fmt: skip
        out.insert(at + offset, col, values)
    return out


def _sets(events: list[Event]) -> pd.DataFrame:
    """Sets (and the columns copies share): device, stream, times, bytes, correlation."""
    n = len(events)
    args = _args(events, CopyArgs)
    start, end = _times(events)
    return pd.DataFrame(
        {
            "device": _num([a.device for a in args], n),
            "stream": _num([a.stream for a in args], n),
            "start": start,
            "end": end,
            "bytes": _num([a.bytes for a in args], n),
            "correlation": _num([a.correlation for a in args], n),
            "pid": np.zeros(n),
        }
    )


def _ranges(events: list[Event]) -> pd.DataFrame:
    """record_function ranges and matrix-multiply ops (with their shapes in the text, in
    emit_nvtx's ``sizes = [...]`` form) as NVTX-like ranges."""
    n = len(events)
    start, end = _times(events)
    ops = [e for e in events if e.cat == "cpu_op"]
    dims = iter(a.dims for a in _args(ops, OpArgs)) if ops else iter(())
    text = []
    for e in events:
        d = next(dims) if e.cat == "cpu_op" else None
        text.append(f"{e.name}, sizes = {msgspec.json.encode(d).decode()}" if d else e.name)
    return pd.DataFrame(
        {
            "start": start,
            "end": end,
            "text": text,
            "tid": _num([e.tid for e in events], n),
            "pid": _num([e.pid for e in events], n),
            "domain": [""] * n,
        }
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
        cc = d.gcnArchName.split(":")[0] if amd and d.gcnArchName else (
            f"{d.computeMajor}.{d.computeMinor}" if d.computeMajor is not None else "?"
        )  # fmt: skip
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
