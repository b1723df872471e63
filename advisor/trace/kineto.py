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
import gzip
import re
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from advisor.errors import AdvisorInputError
from advisor.metrics.gemm import _OP
from advisor.trace.gpus import match_gpu
from advisor.trace.model import GpuSpec, Trace

Scalar = int | float | str | None


class Args(msgspec.Struct):
    device: Scalar = None
    stream: Scalar = None
    correlation: Scalar = None
    grid: list | None = None
    block: list | None = None
    registers: Scalar = msgspec.field(default=None, name="registers per thread")
    smem: Scalar = msgspec.field(default=None, name="shared memory")
    bytes: Scalar = None
    dims: list | None = msgspec.field(default=None, name="Input Dims")
    graph_node: Scalar = msgspec.field(default=None, name="graph node id")


class Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Scalar = None
    tid: Scalar = None
    ts: float | None = None
    dur: float | None = None
    args: Args | None = None


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
    gcnArchName: str | None = None  # noqa: N815 (ROCm builds)


class Document(msgspec.Struct):
    traceEvents: list[Event] | None = None  # noqa: N815
    deviceProperties: list[DeviceProps] = []  # noqa: N815
    distributedInfo: dict | None = None  # noqa: N815
    schemaVersion: Scalar = None  # noqa: N815


_DECODER = msgspec.json.Decoder(Document)
HOST_API = ("cuda_runtime", "cuda_driver")
_COPY = re.compile(r"Memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.IGNORECASE)


def looks_like_kineto(head: bytes) -> bool:
    """True when the first bytes of a (decompressed) JSON document are Kineto's."""
    return b'"traceEvents"' in head or (
        b'"schemaVersion"' in head and b'"deviceProperties"' in head
    )


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


def read_kineto(path: str | Path) -> Trace:
    """Read one Kineto JSON trace (optionally gzip) into a Trace."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            data = fh.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        doc = _DECODER.decode(data)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise AdvisorInputError(str(p), f"cannot read the Kineto trace: {exc}") from None
    except msgspec.DecodeError as exc:
        raise AdvisorInputError(str(p), f"not a valid Kineto JSON trace: {exc}") from None
    del data
    if doc.traceEvents is None:
        raise AdvisorInputError(str(p), "JSON without 'traceEvents': not a PyTorch profiler trace")
    events = doc.traceEvents
    by_cat: dict[str, list[Event]] = {}
    for e in events:
        if e.ph == "X" and e.ts is not None:
            by_cat.setdefault(e.cat, []).append(e)
    kernels = by_cat.get("kernel", [])
    if not kernels:
        raise AdvisorInputError(
            str(p), "Kineto trace without GPU kernels (profile with ProfilerActivity.CUDA)"
        )
    version = f"schema {doc.schemaVersion}" if doc.schemaVersion is not None else "schema ?"
    trace = Trace(
        path=str(p), format="kineto-json", producer_version=f"PyTorch profiler (Kineto, {version})",
        kernels=_kernels(kernels),
    )  # fmt: skip
    api = [e for cat in HOST_API for e in by_cat.get(cat, [])]
    if api:
        trace.api = _api(api)
    if by_cat.get("gpu_memcpy"):
        trace.memcpy = _copies(by_cat["gpu_memcpy"])
    if by_cat.get("gpu_memset"):
        trace.memset = _sets(by_cat["gpu_memset"])
    _host_pids(trace)
    if trace.api.empty:
        trace.warnings.append(
            "no CUDA runtime/driver events in the trace: idle gaps cannot be attributed to host "
            "causes and GPU work cannot be matched to ranges"
        )
    ranges = by_cat.get("user_annotation", []) + [
        e for e in by_cat.get("cpu_op", []) if _OP.match(e.name)
    ]
    if ranges:
        trace.nvtx = _ranges(ranges)
    _tidy(trace)
    trace.gpus = _gpus(doc.deviceProperties, trace.devices)
    info = doc.distributedInfo or {}
    if isinstance(info.get("rank"), int):
        trace.rank = int(info["rank"])
        trace.sources.append(f"distributedInfo: rank {info['rank']} of {info.get('world_size')}")
    return trace


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
    """Integer columns as integers (where no value is missing) and names as categoricals,
    like the Nsight reader's, so that nothing downstream sees the difference."""
    for name, cols in _INT_COLUMNS.items():
        table = getattr(trace, name)
        for col, dtype in cols.items():
            if col in table and len(table) and table[col].notna().all():
                table[col] = table[col].astype(dtype)
    for col in ("name", "demangled"):
        trace.kernels[col] = trace.kernels[col].astype("category")
    if len(trace.api):
        trace.api["name"] = trace.api["name"].astype("category")


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
    """A float column from loosely typed values (numbers, numeric strings, None -> NaN)."""
    out = np.full(count, np.nan)
    for i, v in enumerate(values):
        if isinstance(v, int | float):
            out[i] = v
        elif isinstance(v, str):
            with contextlib.suppress(ValueError):
                out[i] = float(v)
    return out


def _xyz(lists: list, count: int) -> np.ndarray:
    out = np.full((count, 3), np.nan)
    for i, v in enumerate(lists):
        if isinstance(v, list):
            for j, x in enumerate(v[:3]):
                if isinstance(x, int | float):
                    out[i, j] = x
    return out


def _kernels(events: list[Event]) -> pd.DataFrame:
    n = len(events)
    args = [e.args or Args() for e in events]
    start, end = _times(events)
    grid, block = _xyz([a.grid for a in args], n), _xyz([a.block for a in args], n)
    device = _num([a.device if a.device is not None else e.pid
                   for a, e in zip(args, events, strict=True)], n)  # fmt: skip
    names = [e.name for e in events]
    return pd.DataFrame(
        {
            "device": device,
            "stream": _num([a.stream for a in args], n),
            "start": start,
            "end": end,
            "name": names,
            "demangled": names,
            "grid_x": grid[:, 0], "grid_y": grid[:, 1], "grid_z": grid[:, 2],
            "block_x": block[:, 0], "block_y": block[:, 1], "block_z": block[:, 2],
            "registers": _num([a.registers for a in args], n),
            "static_smem": _num([a.smem for a in args], n),  # Kineto: static + dynamic
            "dynamic_smem": np.zeros(n),
            "smem_executed": np.full(n, np.nan),
            "cluster_x": np.full(n, np.nan), "cluster_y": np.full(n, np.nan),
            "cluster_z": np.full(n, np.nan),
            "correlation": _num([a.correlation for a in args], n),
            "pid": np.zeros(n),  # filled from the launch calls (host process) below
            "graph_node": _num([a.graph_node for a in args], n),
        }
    )  # fmt: skip


def _api(events: list[Event]) -> pd.DataFrame:
    n = len(events)
    start, end = _times(events)
    return pd.DataFrame(
        {
            "start": start,
            "end": end,
            "name": [e.name for e in events],
            "tid": _num([e.tid for e in events], n),
            "pid": _num([e.pid for e in events], n),
            "correlation": _num([(e.args or Args()).correlation for e in events], n),
        }
    )


def _copies(events: list[Event]) -> pd.DataFrame:
    n = len(events)
    args = [e.args or Args() for e in events]
    start, end = _times(events)
    kind, src, dst = [], [], []
    for e in events:
        m = _COPY.search(e.name)
        kind.append(m.group(1) if m else "Unknown")
        src.append(m.group(2).lower() if m and m.group(2) else "unknown")
        dst.append(m.group(3).lower() if m and m.group(3) else "unknown")
    return pd.DataFrame(
        {
            "device": _num([a.device for a in args], n),
            "stream": _num([a.stream for a in args], n),
            "start": start,
            "end": end,
            "bytes": _num([a.bytes for a in args], n),
            "kind": kind,
            "src_memory": src,
            "dst_memory": dst,
            "correlation": _num([a.correlation for a in args], n),
            "pid": np.zeros(n),
        }
    )


def _sets(events: list[Event]) -> pd.DataFrame:
    n = len(events)
    args = [e.args or Args() for e in events]
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
    text = []
    for e in events:
        dims = (e.args or Args()).dims if e.cat == "cpu_op" else None
        text.append(f"{e.name}, sizes = {msgspec.json.encode(dims).decode()}" if dims else e.name)
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
            shared_mem_per_sm=d.sharedMemPerMultiprocessor or base.get("shared_mem_per_sm", 0),
            max_shared_mem_per_block=d.sharedMemPerBlockOptin
            or base.get("max_shared_mem_per_block", d.sharedMemPerMultiprocessor or 0),
            reserved_shared_mem_per_block=base.get(
                "reserved_shared_mem_per_block", 1024 if (d.computeMajor or 0) >= 8 else 0
            ),
            clock_mhz=base.get("clock_mhz"),
            memory_bandwidth_gbs=base.get("memory_bandwidth_gbs"),
            dense_fp16_tflops=base.get("dense_fp16_tflops"),
            source="trace (deviceProperties)",
        )  # fmt: skip
    return out
