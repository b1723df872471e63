"""The Kineto document as the reader takes it: msgspec structs holding only the fields read,
and the one table of event categories: the Trace table each fills and the struct its events'
``args`` decode to. The compiled scanner's contract (contract.py) is derived from both."""

from __future__ import annotations

import functools
import re
from typing import Any

import msgspec

from advisor.data import regex

# fields read loosely (any JSON value): a value of the wrong type is treated as missing and
# counted (decode._num, decode._xyz), so one damaged event does not reject the trace
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


# args fields holding [x, y, z] lists (read as three columns, FIELD_x, FIELD_y, FIELD_z)
XYZ_FIELDS = ("grid", "block")


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


DOCUMENT = msgspec.json.Decoder(Document)
EVENTS = msgspec.json.Decoder(list[Event])
STR = msgspec.json.Decoder(str)
OP_ARGS = msgspec.json.Decoder(OpArgs)

# The one table: the categories read -> (the table their ``ph: X`` events fill, the struct
# their args decode to: None, not read). CPU ops (OpArgs) are routed by name (op_kind):
# matrix-multiply ops and, for Operator, range-like names to the NVTX-like ranges (GEMM ops
# with their shapes from the args), the other ops to ``cpu_ops``. The capitalised categories
# are PyTorch 1.8-1.10's names.
CATEGORIES: dict[str, tuple[str, type[msgspec.Struct] | None]] = {
    "kernel": ("kernels", KernelArgs),
    "cuda_runtime": ("api", ApiArgs),
    "cuda_driver": ("api", ApiArgs),
    "gpu_memcpy": ("memcpy", CopyArgs),
    "gpu_memset": ("memset", CopyArgs),
    "user_annotation": ("nvtx", None),
    "cpu_op": ("nvtx", OpArgs),
    "Kernel": ("kernels", KernelArgs),
    "Runtime": ("api", ApiArgs),
    "Memcpy": ("memcpy", CopyArgs),
    "Memset": ("memset", CopyArgs),
    "Operator": ("nvtx", OpArgs),
}
# the categories of CPU ops (routed by name between the ranges and cpu_ops)
OP_CATEGORIES = tuple(cat for cat, (_, args) in CATEGORIES.items() if args is OpArgs)
# the tables and the event categories they hold (rows in the trace's order)
CATEGORIES_OF = {table: tuple(c for c, (t, _) in CATEGORIES.items() if t == table)
                 for table, _ in CATEGORIES.values()}  # fmt: skip
TABLE_OF = {cat: table for cat, (table, _) in CATEGORIES.items()}
HOST_API = CATEGORIES_OF["api"]
# the tables and the struct msgspec decodes their events' args to (the CPU ops' args are
# decoded apart, for the GEMM ops among the ranges only)
ARGS_OF = {table: None if args is OpArgs else args for table, args in CATEGORIES.values()} | {
    "cpu_ops": None
}
# the columns each table is built from (both decoders: the scanner and msgspec)
TABLE_COLUMNS = {
    "kernels": ("start", "end", "pid", "device", "stream", "grid_x", "grid_y", "grid_z",
                "block_x", "block_y", "block_z", "registers", "smem", "correlation",
                "graph_node"),
    "api": ("start", "end", "pid", "tid", "correlation"),
    "memcpy": ("start", "end", "pid", "device", "stream", "bytes", "correlation"),
    "memset": ("start", "end", "pid", "device", "stream", "bytes", "correlation"),
    "nvtx": ("start", "end", "pid", "tid"),
    "cpu_ops": ("start", "end", "pid", "tid"),
}  # fmt: skip
TABLES = tuple(TABLE_COLUMNS)

PLAIN_OP, GEMM_OP, RANGE_OP = 0, 1, 2  # what a CPU op is (op_kind)
_AUTOGRAD_NODE = re.compile(r"^\w*Backward\d*$")  # CudnnConvolutionBackward (1.8: Operator)


@functools.cache
def op_kind(category: str, name: str) -> int:
    """A CPU op event as the tables take it: a matrix-multiply op (a range with its shapes),
    a PyTorch 1.8-1.10 ``Operator`` that is a record_function range (no ``::`` in its name:
    ProfilerStep#3, enumerate(DataLoader)#...), or a plain op (cpu_ops)."""
    if _is_gemm_op(name):
        return GEMM_OP
    if category == "Operator" and "::" not in name and not _AUTOGRAD_NODE.search(name):
        return RANGE_OP
    return PLAIN_OP


@functools.cache
def _is_gemm_op(name: str) -> bool:
    """A cpu_op name of a matrix-multiply op (the data's gemm_op pattern)."""
    return regex("gemm_op").match(name) is not None


def op_text(name: str, dims: list | None) -> str:
    """A matrix-multiply op as a range text with its shapes, in emit_nvtx's form."""
    return f"{name}, sizes = {msgspec.json.encode(dims).decode()}" if dims else name
