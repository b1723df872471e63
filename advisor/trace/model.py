"""The format-free Trace model every reader produces and every metric consumes.

All times are integer nanoseconds on one clock per trace. Each table is a pandas DataFrame
with the columns listed in ``COLUMNS`` (extra columns are allowed, missing optional values
are NaN/None). Nothing downstream of a reader knows which profiler wrote the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from advisor.data import gpu_facts

# Column contracts, one per table: name -> meaning (units).
COLUMNS: dict[str, dict[str, str]] = {
    "kernels": {
        "device": "device id as the profiler numbers it",
        "stream": "stream id",
        "start": "ns",
        "end": "ns",
        "name": "short kernel name",
        "demangled": "full demangled name",
        "grid_x": "blocks",
        "grid_y": "blocks",
        "grid_z": "blocks",
        "block_x": "threads",
        "block_y": "threads",
        "block_z": "threads",
        "registers": "registers per thread",
        "static_smem": "static shared memory per block (B)",
        "dynamic_smem": "dynamic shared memory per block (B)",
        "smem_executed": "shared-memory carve-out the driver used (B), NaN if unknown",
        "cluster_x": "cluster dims (blocks), NaN if unknown; not read for an analysis (lean)",
        "cluster_y": "",
        "cluster_z": "",
        "correlation": "id joining the launch API call",
        "pid": "process id",
        "graph_node": "graph node id when launched by a CUDA graph, else NaN",
    },
    "api": {
        "start": "ns",
        "end": "ns",
        "name": "API name without version suffix",
        "tid": "thread id (profiler global thread id)",
        "pid": "process id",
        "correlation": "id joining GPU work",
    },
    "memcpy": {
        "device": "",
        "stream": "",
        "start": "ns",
        "end": "ns",
        "bytes": "B",
        "kind": "HtoD, DtoH, DtoD, PtoP, ...",
        "correlation": "",
        "pid": "",
    },
    "memset": {
        "device": "",
        "stream": "",
        "start": "ns",
        "end": "ns",
        "bytes": "B",
        "correlation": "",
        "pid": "",
    },
    "graphs": {
        "device": "",
        "stream": "",
        "start": "ns, whole-graph execution (graph-level tracing)",
        "end": "ns",
        "graph_id": "",
        "correlation": "",
        "pid": "",
    },
    "sync": {
        "device": "",
        "stream": "",
        "start": "ns",
        "end": "ns",
        "kind": "event / stream / context synchronize, stream wait event",
        "correlation": "",
        "pid": "",
    },
    "cpu_ops": {
        "start": "ns",
        "end": "ns",
        "name": "CPU op name (aten::add, ...): what the host thread was doing",
        "tid": "thread id (same numbering as api.tid)",
        "pid": "",
    },
    "nvtx": {
        "start": "ns",
        "end": "ns",
        "text": "range text",
        "tid": "thread id (same numbering as api.tid)",
        "pid": "",
        "domain": "NVTX domain name ('' for the default domain)",
    },
}


_DEFAULTS = gpu_facts("defaults")


@dataclass(frozen=True)
class GpuSpec:
    """Facts about one device that occupancy and wave metrics need.

    ``registers_per_sm`` is 32-bit registers per SM (CUDA) or VGPRs per SIMD lane (AMD);
    ``max_warps_per_sm`` counts warps (CUDA) or wavefronts per CU (AMD).
    """

    name: str
    vendor: str
    sm_count: int
    compute_capability: str
    # facts nobody gave: gpus.yaml's "defaults" (Hopper's per-SM limits)
    warp_size: int = _DEFAULTS["warp_size"]
    max_warps_per_sm: int = _DEFAULTS["max_warps_per_sm"]
    max_blocks_per_sm: int = _DEFAULTS["max_blocks_per_sm"]
    registers_per_sm: int = _DEFAULTS["registers_per_sm"]
    shared_mem_per_sm: int = _DEFAULTS["shared_mem_per_sm"]
    max_shared_mem_per_block: int = _DEFAULTS["max_shared_mem_per_block"]
    reserved_shared_mem_per_block: int = _DEFAULTS["reserved_shared_mem_per_block"]
    clock_mhz: float | None = None
    memory_bandwidth_gbs: float | None = None
    dense_fp16_tflops: float | None = None  # datasheet, dense FP16/BF16 matrix rate
    source: str = "trace"  # "trace", "built-in table (matched 'NAME')", "--gpu NAME"
    simds_per_cu: int | None = None  # AMD: SIMDs per CU when the trace says (else gpus.yaml)

    @property
    def cc_major(self) -> int | None:
        """Major compute capability (CUDA), None for AMD gfx targets."""
        head = self.compute_capability.split(".")[0]
        return int(head) if head.isdigit() else None

    def to_dict(self) -> dict:
        """Every fact; ``simds_per_cu`` only where known (AMD agents)."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        if out["simds_per_cu"] is None:
            del out["simds_per_cu"]
        return out


def empty_table(table: str) -> pd.DataFrame:
    """An empty DataFrame with the contract's columns for ``table`` (float64; built from
    arrays: a Series per column costs 5-10x as much, and readers build several per trace)."""
    return pd.DataFrame({c: np.empty(0) for c in COLUMNS[table]})


@dataclass
class Trace:
    """One profiler trace, normalized. ``gpus`` maps the device ids used in the tables."""

    path: str
    format: str
    producer_version: str
    kernels: pd.DataFrame
    api: pd.DataFrame = field(default_factory=lambda: empty_table("api"))
    memcpy: pd.DataFrame = field(default_factory=lambda: empty_table("memcpy"))
    memset: pd.DataFrame = field(default_factory=lambda: empty_table("memset"))
    graphs: pd.DataFrame = field(default_factory=lambda: empty_table("graphs"))
    sync: pd.DataFrame = field(default_factory=lambda: empty_table("sync"))
    nvtx: pd.DataFrame = field(default_factory=lambda: empty_table("nvtx"))
    # CPU ops that are not ranges (Kineto cpu_op events): named host activity
    cpu_ops: pd.DataFrame = field(default_factory=lambda: empty_table("cpu_ops"))
    gpus: dict[int, GpuSpec] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # companion files read with the trace
    rank: int | None = None  # the job rank the trace says it is (Kineto distributedInfo)
    world_size: int | None = None  # the job's rank count, where the trace says it
    # a job read as one (several traces, one per rank): each trace's path, in rank order
    # (``path`` then joins them); empty for a single trace
    paths: list[str] = field(default_factory=list)
    # what added to a timestamp gives UTC ns since the epoch (the session start for nsys,
    # baseTimeNanoseconds for Kineto, 0 for epoch clocks); None: the trace does not say
    epoch_offset_ns: int | None = None
    # the devices of a job merged from rank summaries (parts.py), which holds no GPU ops
    device_ids: list[int] | None = None
    # hardware counters per profiled launch (advisor/data/counters.yaml names the columns):
    # ``launch`` (the row position in ``kernels`` it belongs to, -1 when it joined none),
    # ``profiled`` (its position in the counters file), name, grid_*, block_*, then one
    # column per counter; empty without counters
    counters: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the counter tool's own rule results per profiled launch (Nsight Compute's details
    # page): profiled, section, rule, type, speedup (%), speedup_type, description
    counter_rules: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the warnings (also in ``warnings``) about the counters themselves (counters the file
    # lacks and what that limits): carried into a timeline's warnings when joined to it
    counter_notes: list[str] = field(default_factory=list)
    # False when the launches were serialized and replayed by a counter profiler (Nsight
    # Compute): their times are back to back, so there are no gaps, host calls or ranges
    timeline: bool = True
    # a reader's finding that the host events were thinned after capture (a sampled trace):
    # (host events found, the span of their numbering, the share of neighbours with numbers
    # missing between them); idle causes are then not attributed (metrics/gaps.py)
    host_sample: tuple[int, int, float] | None = None

    @property
    def inputs(self) -> list[str]:
        """The paths of the traces read: a job's, else the one trace's."""
        return self.paths or [self.path]

    def title(self) -> str:
        """What a report is of: the trace's path; for a job of several traces their count,
        the folder they share (if one) and the first and last (every one where three or
        fewer: the job's Ranks table lists them all)."""
        if len(self.paths) < 2:
            return self.path
        folders = {str(Path(p).parent) for p in self.paths}
        one_folder = len(folders) == 1
        names = [Path(p).name for p in self.paths] if one_folder else self.paths
        listed = ", ".join(names) if len(names) <= 3 else f"{names[0]} ... {names[-1]}"
        where = f" in {folders.pop()}" if one_folder else ""
        return f"{len(names)} traces{where} ({listed})"

    def short_name(self) -> str:
        """A short name for a report's heading: the trace's file name; for a job of several
        traces the folder they share (if one) and their count."""
        if len(self.paths) < 2:
            return Path(self.path).name
        folders = {Path(p).parent for p in self.paths}
        folder = f"{folders.pop().name}, " if len(folders) == 1 else ""
        return f"{folder}{len(self.paths)} traces"

    @property
    def devices(self) -> list[int]:
        """Device ids that ran any GPU work, ascending (in a damaged trace not yet cleaned by
        trace.quality, values that cannot be a device id are left out: missing, text,
        negative, fractional, 2^31 or more)."""
        if self.device_ids is not None:
            return list(self.device_ids)
        ids: set[int] = set()
        for table in (self.kernels, self.memcpy, self.memset, self.graphs):
            if len(table):
                v = pd.to_numeric(pd.Series(table["device"].unique()), errors="coerce")
                v = v.to_numpy(np.float64)
                ids.update(int(d) for d in v[(v >= 0) & (v < 2**31) & (v == np.floor(v))])
        return sorted(ids)
