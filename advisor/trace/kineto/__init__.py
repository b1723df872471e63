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

Parsing: the document's head is read once (head.py); then an uncompressed trace is
memory-mapped and read by the compiled scanner (_kscan.c, optional; mapped.py, scan.py) in
chunks, one thread per core; without the scanner a large one is read in spans by several
processes, and a gzip or small one is streamed a chunk at a time (stream.py). The scanner
validates the events array and reads the fields of the wanted events into columns, with no
Python object per event; whatever it declines (and everything, without it) msgspec decodes
into typed structs holding only these fields (schema.py, decode.py): the reference, whose
tables or errors the scanner must reproduce; the two agree on one contract (contract.py).
Times are converted to integer nanoseconds exactly (whole microseconds and the fraction
separately). Rows keep the trace's order (tables.py); finish.py and devices.py complete the
Trace. See docs/scaling.md.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import os
from collections import Counter
from pathlib import Path

import msgspec

from advisor.errors import READ_ERRORS, TOO_DEEP, AdvisorInputError, json_problem, read_problem
from advisor.trace.kineto import devices, finish
from advisor.trace.kineto.contract import SCAN_CATEGORIES, SCAN_MODES
from advisor.trace.kineto.decode import _num, _xyz, decode_events
from advisor.trace.kineto.head import CHUNK_BYTES, Head, looks_like_kineto, read_head
from advisor.trace.kineto.mapped import read_mapped
from advisor.trace.kineto.sampled import HostSample, host_sample, thinned_warning
from advisor.trace.kineto.scan import SCANNER_ENV, _kscan, scan_events, scanner_enabled
from advisor.trace.kineto.schema import (
    EVENTS,
    HOST_API,
    ApiArgs,
    CopyArgs,
    DeviceProps,
    Document,
    Event,
    KernelArgs,
    OpArgs,
    Scalar,
)
from advisor.trace.kineto.stream import Read, ReadAhead, read_spans, stream
from advisor.trace.kineto.tables import Collector, Tables
from advisor.trace.model import Trace
from advisor.trace.quality import non_numeric_warning

# how traces are read (read when a trace is: the tests lower them)
PARALLEL_MIN_BYTES = 192 << 20  # uncompressed traces this large are read by several processes
SPAN_MIN_BYTES = 96 << 20  # at least this much of the file per process
READ_PROCESSES = min(os.cpu_count() or 1, 4)  # default (the many-trace workers pass fewer)
SCAN_CHUNK_BYTES = 64 << 20  # the scanner's chunks of a memory-mapped trace

# the reader's parts that the tests reach by these names (tests/trace, tests/sanitize)
_Collector, _ReadAhead, _EVENTS = Collector, ReadAhead, EVENTS
_decode_events, _scan_events = decode_events, scan_events

__all__ = [
    "CHUNK_BYTES", "HOST_API", "PARALLEL_MIN_BYTES", "READ_PROCESSES", "SCANNER_ENV",
    "SCAN_CATEGORIES", "SCAN_CHUNK_BYTES", "SCAN_MODES", "SPAN_MIN_BYTES", "ApiArgs",
    "CopyArgs", "DeviceProps", "Document", "Event", "KernelArgs", "OpArgs", "Scalar",
    "looks_like_kineto", "read_head", "read_kineto", "scanner_enabled", "_kscan", "_num",
    "_xyz",
]  # fmt: skip


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
    try:
        (docs, tables, bad), sample = _read(p, processes)
    except READ_ERRORS as exc:
        raise AdvisorInputError(
            str(p), f"cannot read the Kineto trace: {read_problem(exc)}"
        ) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise AdvisorInputError(str(p), f"not a valid Kineto JSON trace: {json_problem(exc)}"
                                ) from None  # fmt: skip
    except RecursionError:  # (msgspec, where the compiled scanner declines the bytes)
        raise AdvisorInputError(str(p), f"not a valid Kineto JSON trace: it {TOO_DEEP}") from None
    trace = _trace(p, docs, tables, bad)
    trace.host_sample = sample
    if sample is not None:
        trace.warnings.append(thinned_warning(sample))
    return trace


def _read(p: Path, processes: int) -> tuple[Read, HostSample | None]:
    """The document's parts besides its events, the tables of its events and the values of
    the wrong type counted: a gzip trace streamed; an uncompressed one laid out as Kineto
    writes it memory-mapped and scanned (``processes`` threads), or, without the scanner,
    read in spans by ``processes`` processes when large; any other streamed. With it, the
    host-event sample of the document's first bytes (sampled.host_sample, from the head
    every path reads first)."""
    with open(p, "rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    if gz:
        with gzip.open(p, "rb") as inflated, ReadAhead(inflated) as ahead:
            head = Head(ahead)
            sample = host_sample(head.first)
            return stream(ahead, head), sample
    size = p.stat().st_size
    with open(p, "rb") as fh:
        head = Head(fh)
        sample = host_sample(head.first)
        if head.laid_out and scanner_enabled() and p.is_file():
            read = read_mapped(fh, head, processes, SCAN_CHUNK_BYTES)
            if read is not None:
                return read, sample
            fh.seek(0)  # (the events array closed before the last cut: streamed instead)
            head = Head(fh)
        elif head.laid_out and size >= PARALLEL_MIN_BYTES:
            return read_spans(p, fh, head, size, processes, SPAN_MIN_BYTES), sample
        with ReadAhead(fh) as ahead:
            return stream(ahead, head), sample


def _trace(p: Path, docs: list[Document], tables: Tables, bad: Counter) -> Trace:
    """The Trace of a document's parts, its events' tables and the values counted."""
    if not any(d.traceEvents is not None for d in docs):
        raise AdvisorInputError(str(p), "JSON without 'traceEvents': not a PyTorch profiler trace")
    kernels = tables["kernels"]
    if kernels is None:
        raise AdvisorInputError(
            str(p), "Kineto trace without GPU kernels (profile with ProfilerActivity.CUDA)"
        )
    version = next((d.schemaVersion for d in docs if d.schemaVersion is not None), "?")
    trace = Trace(
        path=str(p), format="kineto-json", producer_version=f"PyTorch profiler (Kineto, schema "
        f"{version})", kernels=kernels,
    )  # fmt: skip
    for name in ("api", "memcpy", "memset", "nvtx", "cpu_ops"):
        if tables[name] is not None:
            setattr(trace, name, tables[name])
    for (table, field), n in sorted(bad.items()):
        trace.warnings.append(non_numeric_warning(n, table, field))
    finish.host_pids(trace)
    finish.known_devices(trace)
    if trace.api.empty:
        trace.warnings.append(
            "no CUDA runtime/driver events in the trace: idle gaps cannot be attributed to host "
            "causes and GPU work cannot be matched to ranges"
        )
    finish.tidy(trace)
    props = devices.renumbered([x for d in docs for x in d.deviceProperties], trace)
    trace.gpus = devices.gpus(props, trace.devices)
    finish.workgroups(trace)
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
