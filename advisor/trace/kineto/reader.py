"""Reading a Kineto trace into a Trace (the package's doc says how); its tunables are the
package's (advisor/trace/kineto/__init__.py), read when a trace is read."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import msgspec

from advisor.errors import READ_ERRORS, TOO_DEEP, AdvisorInputError, json_problem, read_problem
from advisor.memory import paused_gc
from advisor.trace import kineto as package
from advisor.trace.kineto import devices, early, finish
from advisor.trace.kineto.contract import SCAN_CATEGORIES, SCAN_MODES
from advisor.trace.kineto.decode import _num, _xyz, decode_events
from advisor.trace.kineto.head import CHUNK_BYTES, Head, looks_like_kineto, read_head
from advisor.trace.kineto.mapped import read_mapped
from advisor.trace.kineto.sampled import HostSample, host_sample, thinned_warning
from advisor.trace.kineto.scan import _kscan, scan_events, scanner_enabled
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

# the reader's parts that the tests reach by these names (tests/trace, tests/sanitize)
_Collector, _ReadAhead, _EVENTS = Collector, ReadAhead, EVENTS
_decode_events, _scan_events = decode_events, scan_events

# what the package gives by name (advisor/trace/kineto/__init__.py loads this on first use)
__all__ = [
    "CHUNK_BYTES", "HOST_API", "SCAN_CATEGORIES", "SCAN_MODES", "ApiArgs",
    "CopyArgs", "DeviceProps", "Document", "Event", "KernelArgs", "OpArgs", "Scalar",
    "looks_like_kineto", "read_head", "read_kineto", "scanner_enabled", "_kscan", "_num",
    "_xyz", "_Collector", "_ReadAhead", "_EVENTS", "_decode_events", "_scan_events",
]  # fmt: skip


def read_kineto(path: str | Path, processes: int | None = None) -> Trace:
    """Read one Kineto JSON trace (optionally gzip) into a Trace; ``processes``: how many
    processes a large uncompressed trace may be read by (default READ_PROCESSES)."""
    p = Path(path)
    with paused_gc():  # (millions of short-lived objects, none in a cycle: no collections)
        return _read_kineto(p, processes or package.READ_PROCESSES)


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
        scans = early.take(p, fh)  # (this file's scan, started while the program loaded)
        head = Head(fh)
        sample = host_sample(head.first)
        mapped = head.laid_out and scanner_enabled() and p.is_file()
        if scans is not None and not (mapped and scans.kscan is _kscan
                                      and scans.bracket == head.bracket):  # fmt: skip
            scans.close()  # (not read so, scanned by another build, or not this array)
            scans = None
        if mapped:
            read = read_mapped(fh, head, processes, package.SCAN_CHUNK_BYTES, scans)
            if read is not None:
                return read, sample
            fh.seek(0)  # (the events array closed before the last cut: streamed instead)
            head = Head(fh)
        elif head.laid_out and size >= package.PARALLEL_MIN_BYTES:
            return read_spans(p, fh, head, size, processes, package.SPAN_MIN_BYTES), sample
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
