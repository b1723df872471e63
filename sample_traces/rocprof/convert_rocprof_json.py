"""Convert a rocprofv3 JSON trace (--output-format json) to rocprofv3's CSV files.

    python convert_rocprof_json.py RESULTS.json[.gz] OUTDIR

Writes OUTDIR/<pid>_kernel_trace.csv.gz in the 22-column layout of rocprofv3 (ROCm 7:
"Agent N" ids, LDS_Block_Size, VGPR/Accum_VGPR/SGPR counts) and OUTDIR/<pid>_agent_info.csv
with the agent columns advisor reads. Independent of advisor's own readers on purpose, so
tests can compare the two paths. Used to derive sample_traces/rocprof/ from
tests/data/public/rocprof/v3_json/tracelens__908_results.json.gz (8x MI350X training,
rank 0: 43,915 dispatches including 1,310 RCCL ncclDevKernel_Generic_1 kernels).
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from pathlib import Path

KERNEL_COLUMNS = [
    "Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id",
    "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size",
    "Scratch_Size", "VGPR_Count", "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X",
    "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z",
]  # fmt: skip
AGENT_COLUMNS = {
    "Node_Id": "node_id", "Logical_Node_Id": "logical_node_id", "Agent_Type": "type",
    "Cpu_Cores_Count": "cpu_cores_count", "Simd_Count": "simd_count",
    "Max_Waves_Per_Simd": "max_waves_per_simd", "Lds_Size_In_Kb": "lds_size_in_kb",
    "Wave_Front_Size": "wave_front_size", "Num_Xcc": "num_xcc", "Cu_Count": "cu_count",
    "Simd_Per_Cu": "simd_per_cu", "Gfx_Target_Version": "gfx_target_version",
    "Max_Waves_Per_Cu": "max_waves_per_cu", "Name": "name", "Vendor_Name": "vendor_name",
    "Product_Name": "product_name",
}  # fmt: skip


def main(src: str, out_dir: str) -> None:
    with gzip.open(src, "rt") if src.endswith(".gz") else open(src) as fh:
        tool = json.load(fh)["rocprofiler-sdk-tool"][0]
    pid = tool["metadata"]["pid"]
    agents = {a["id"]["handle"]: a for a in tool["agents"]}
    symbols = {s["kernel_id"]: s for s in tool["kernel_symbols"]}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(out / f"{pid}_kernel_trace.csv.gz", "wt", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        w.writerow(KERNEL_COLUMNS)
        for r in tool["buffer_records"]["kernel_dispatch"]:
            info = r["dispatch_info"]
            sym = symbols[info["kernel_id"]]
            agent = agents[info["agent_id"]["handle"]]
            w.writerow([
                "KERNEL_DISPATCH", f"Agent {agent['logical_node_id']}",
                info["queue_id"]["handle"], r["stream_id"]["handle"], r["thread_id"],
                info["dispatch_id"], info["kernel_id"], sym["truncated_kernel_name"],
                r["correlation_id"]["internal"], r["start_timestamp"], r["end_timestamp"],
                info["group_segment_size"], info["private_segment_size"],
                sym["arch_vgpr_count"], sym["accum_vgpr_count"], sym["sgpr_count"],
                info["workgroup_size"]["x"], info["workgroup_size"]["y"],
                info["workgroup_size"]["z"], info["grid_size"]["x"], info["grid_size"]["y"],
                info["grid_size"]["z"],
            ])  # fmt: skip
    with open(out / f"{pid}_agent_info.csv", "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        w.writerow(list(AGENT_COLUMNS))
        for a in agents.values():
            row = [a.get(key, 0) for key in AGENT_COLUMNS.values()]
            row[2] = {1: "CPU", 2: "GPU"}.get(a["type"], "UNKNOWN")
            w.writerow(row)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
