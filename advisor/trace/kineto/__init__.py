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

The reader is reader.py; this package gives its names on first use and loads without numpy
or pandas, so that the console entry can start a large trace's scan while those load
(early.py, chunks.py).
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from typing import Any

# how traces are read (read when a trace is: the tests lower them)
PARALLEL_MIN_BYTES = 192 << 20  # uncompressed traces this large are read by several processes
SPAN_MIN_BYTES = 96 << 20  # at least this much of the file per process
READ_PROCESSES = min(os.cpu_count() or 1, 4)  # default (the many-trace workers pass fewer)
SCAN_CHUNK_BYTES = 64 << 20  # the scanner's chunks of a memory-mapped trace
# ``ADVISOR_KINETO_SCANNER=0``: read with msgspec alone (scan.scanner_enabled, early.py)
SCANNER_ENV = "ADVISOR_KINETO_SCANNER"


__all__ = ["PARALLEL_MIN_BYTES", "READ_PROCESSES", "SCANNER_ENV", "SCAN_CHUNK_BYTES",
           "SPAN_MIN_BYTES"]  # fmt: skip


@functools.cache
def _submodules() -> frozenset[str]:
    return frozenset(m.name for m in pkgutil.iter_modules(__path__))


def __getattr__(name: str) -> Any:
    """The reader's names (reader.py: read_kineto, ...), loaded on first use: the package
    itself loads without numpy or pandas, so that a trace's scan can start while they load
    (early.py). (A submodule not loaded yet is not one of them: the import system asks.)"""
    if name.startswith("__") or name in _submodules():
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.reader"), name)
