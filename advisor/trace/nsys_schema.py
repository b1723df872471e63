"""The Nsight Systems export's kernel table as the reader reads it (trace/nsys.py): its
columns, their storage, and the reader's threads. Loads neither numpy nor pandas: the kernel
table's early scan (trace/sqlearly.py) plans the same read before they load."""

from __future__ import annotations

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
# Large tables are read in this many concurrent rowid slices (at most one per core);
# many-trace workers set it to 1, since they already use every core.
READ_THREADS = 4
# Kernel columns stored as int32 (launch dimensions, resources, ids that fit 32 bits):
# half the memory of int64 on million-launch traces. Products of them (grid blocks,
# threads, registers per block) are computed in int64 by the metrics.
KERNEL_INT32 = ("device", "stream", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                "block_z", "registers", "static_smem", "dynamic_smem", "pid", "name_id",
                "demangled_id")  # fmt: skip
KERNEL_FLOAT32 = ("smem_executed", "cluster_x", "cluster_y", "cluster_z")
# alias -> the export's column (KERNEL_OPTIONAL: absent from some Nsight versions' exports)
KERNEL_COLUMNS = {
    "device": "deviceId", "stream": "streamId", "start": "start", "end": "end",
    "name_id": "shortName", "demangled_id": "demangledName", "grid_x": "gridX",
    "grid_y": "gridY", "grid_z": "gridZ", "block_x": "blockX", "block_y": "blockY",
    "block_z": "blockZ", "registers": "registersPerThread", "static_smem": "staticSharedMemory",
    "dynamic_smem": "dynamicSharedMemory", "smem_executed": "sharedMemoryExecuted",
    "cluster_x": "clusterX", "cluster_y": "clusterY", "cluster_z": "clusterZ",
    "correlation": "correlationId", "global_pid": "globalPid", "graph_node": "graphNodeId",
}  # fmt: skip
KERNEL_OPTIONAL = ("smem_executed", "cluster_x", "cluster_y", "cluster_z", "correlation",
                   "global_pid", "graph_node")  # fmt: skip
# kernel columns no metric reads: a read for an analysis (``lean``: nsys.read_nsys, and the
# early scan, which only ``analyze`` starts) leaves them out (10M kernels: 120 MB, three
# columns fewer to decode)
KERNEL_UNREAD_BY_ANALYSIS = ("cluster_x", "cluster_y", "cluster_z")


def kernel_columns(lean: bool) -> dict[str, str]:
    """KERNEL_COLUMNS; ``lean``: without KERNEL_UNREAD_BY_ANALYSIS."""
    if not lean:
        return KERNEL_COLUMNS
    return {a: c for a, c in KERNEL_COLUMNS.items() if a not in KERNEL_UNREAD_BY_ANALYSIS}
