"""Build rocpd databases for tests, laid out like rocprofv3's (ROCm >= 7.0): every table
carries a uuid suffix and a guid column, times live in a timestamp table, names in a string
table, and views without the suffix sit on top (``views=False`` leaves them out, as a merged
or hand-made database may). Only the columns advisor reads plus the NOT NULL ones of the
schema are written; the layout follows rocprofiler-sdk's rocpd_tables.sql (schema 3).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

# table -> columns (every table also has id INTEGER PRIMARY KEY and guid TEXT)
SCHEMA = {
    "rocpd_metadata": "tag TEXT NOT NULL, value TEXT NOT NULL",
    "rocpd_string": "string TEXT NOT NULL",
    "rocpd_info_node": "hash BIGINT, machine_id TEXT, hostname TEXT",
    "rocpd_info_process": "nid INTEGER, ppid INTEGER, pid INTEGER NOT NULL, command TEXT",
    "rocpd_info_agent": (
        "nid INTEGER, pid INTEGER, type TEXT, absolute_index INTEGER, logical_index INTEGER, "
        "type_index INTEGER, uuid INTEGER, name TEXT, generic_name TEXT, model_name TEXT, "
        "vendor_name TEXT, product_name TEXT, extdata JSONB DEFAULT '{}' NOT NULL"
    ),
    "rocpd_info_kernel_symbol": (
        "nid INTEGER, pid INTEGER, code_object_id INTEGER, kernel_name TEXT, display_name "
        "TEXT, group_segment_size INTEGER, private_segment_size INTEGER, sgpr_count INTEGER, "
        "arch_vgpr_count INTEGER, accum_vgpr_count INTEGER"
    ),
    "rocpd_track": (
        "nid INTEGER, pid INTEGER, tid INTEGER, agent_id INTEGER, queue_id INTEGER, "
        "stream_id INTEGER, name_id INTEGER"
    ),
    "rocpd_timestamp": "value BIGINT NOT NULL, phase INTEGER, track_id INTEGER",
    "rocpd_event": "category_id INTEGER, stack_id INTEGER, correlation_id INTEGER",
    "rocpd_region": (
        "track_id INTEGER NOT NULL, name_id INTEGER NOT NULL, start_id INTEGER NOT NULL, "
        "end_id INTEGER NOT NULL, event_id INTEGER"
    ),
    "rocpd_kernel_dispatch": (
        "track_id INTEGER NOT NULL, kernel_id INTEGER NOT NULL, dispatch_id INTEGER NOT NULL, "
        "start_id INTEGER NOT NULL, end_id INTEGER NOT NULL, private_segment_size INTEGER, "
        "group_segment_size INTEGER, workgroup_size_x INTEGER NOT NULL, workgroup_size_y "
        "INTEGER NOT NULL, workgroup_size_z INTEGER NOT NULL, grid_size_x INTEGER NOT NULL, "
        "grid_size_y INTEGER NOT NULL, grid_size_z INTEGER NOT NULL, region_name_id INTEGER, "
        "event_id INTEGER"
    ),
    "rocpd_memory_copy": (
        "track_id INTEGER NOT NULL, start_id INTEGER NOT NULL, end_id INTEGER NOT NULL, "
        "name_id INTEGER NOT NULL, dst_agent_id INTEGER, src_agent_id INTEGER, "
        "size INTEGER NOT NULL, event_id INTEGER"
    ),
    # hardware counters (rocprofv3 --pmc): a description per counter (and instance), a value
    # per dispatch event and counter
    "rocpd_info_pmc": (
        "nid INTEGER, pid INTEGER, agent_id INTEGER, target_arch TEXT, instance_id INTEGER, "
        "name TEXT NOT NULL, symbol TEXT NOT NULL, description TEXT, block TEXT"
    ),
    "rocpd_pmc_event": "event_id INTEGER, pmc_id INTEGER NOT NULL, value REAL DEFAULT 0.0",
}


class RocpdWriter:
    """Rows of one profiled process (one uuid/guid) in a rocpd database."""

    def __init__(self, conn: sqlite3.Connection, uuid: str, views: bool = True) -> None:
        self.conn, self.uuid, self.guid = conn, uuid, uuid.replace("_", "-")
        self.strings: dict[str, int] = {}
        for table, cols in SCHEMA.items():
            conn.execute(
                f'CREATE TABLE "{table}_{uuid}" (id INTEGER PRIMARY KEY AUTOINCREMENT, '
                f"guid TEXT NOT NULL, {cols})"
            )
            if views:
                conn.execute(
                    f'CREATE VIEW IF NOT EXISTS "{table}" AS SELECT * FROM "{table}_{uuid}"'
                )
        self.row("rocpd_metadata", tag="schema_version", value="3")

    def row(self, table: str, **values) -> int:
        cols = ["guid", *values]
        cur = self.conn.execute(
            f'INSERT INTO "{table}_{self.uuid}" ({", ".join(cols)}) '
            f"VALUES ({', '.join('?' * len(cols))})",
            [self.guid, *values.values()],
        )
        return int(cur.lastrowid)

    def string(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = self.row("rocpd_string", string=text)
        return self.strings[text]

    def times(self, start: int, end: int) -> tuple[int, int]:
        return (self.row("rocpd_timestamp", value=start, phase=1),
                self.row("rocpd_timestamp", value=end, phase=2))  # fmt: skip

    def event(self, category: str, correlation: int | None) -> int:
        return self.row("rocpd_event", category_id=self.string(category),
                        correlation_id=correlation)  # fmt: skip

    def agent(self, kind: str, logical: int, type_index: int, product: str = "",
              facts: dict | None = None) -> int:  # fmt: skip
        return self.row(
            "rocpd_info_agent", type=kind, absolute_index=logical, logical_index=logical,
            type_index=type_index, name=(facts or {}).get("name", ""), product_name=product,
            extdata=json.dumps(facts or {}),
        )  # fmt: skip

    def track(self, pid: int, tid: int | None = None, agent: int | None = None,
              queue: int | None = None, stream: int | None = None) -> int:  # fmt: skip
        return self.row("rocpd_track", pid=pid, tid=tid, agent_id=agent, queue_id=queue,
                        stream_id=stream)  # fmt: skip

    def symbol(self, name: str, vgpr: int, accum: int = 0, sgpr: int = 16, lds: int = 0,
               display: str | None = None) -> int:  # fmt: skip
        return self.row(
            "rocpd_info_kernel_symbol", kernel_name=name + ".kd", display_name=display or name,
            arch_vgpr_count=vgpr, accum_vgpr_count=accum, sgpr_count=sgpr, group_segment_size=lds,
        )  # fmt: skip

    def dispatch(self, track: int, symbol: int, dispatch_id: int, start: int, end: int,
                 grid: tuple[int, int, int], wg: tuple[int, int, int], lds: int = 0,
                 correlation: int | None = None) -> int:  # fmt: skip
        s, e = self.times(start, end)
        return self.row(
            "rocpd_kernel_dispatch", track_id=track, kernel_id=symbol, dispatch_id=dispatch_id,
            start_id=s, end_id=e, group_segment_size=lds, private_segment_size=0,
            workgroup_size_x=wg[0], workgroup_size_y=wg[1], workgroup_size_z=wg[2],
            grid_size_x=grid[0], grid_size_y=grid[1], grid_size_z=grid[2],
            event_id=self.event("KERNEL_DISPATCH", correlation),
        )  # fmt: skip

    def pmc(self, name: str, instance: int = 0, agent: int | None = None) -> int:
        """A counter's description row (one per instance, as rocprofv3 writes them)."""
        return self.row("rocpd_info_pmc", name=name, symbol=name, instance_id=instance,
                        agent_id=agent, target_arch="GPU")  # fmt: skip

    def pmc_value(self, dispatch: int, pmc: int, value: float) -> int:
        """A counter value of the dispatch (row id) ``dispatch``: on the dispatch's event."""
        (event,) = self.conn.execute(
            f'SELECT event_id FROM "rocpd_kernel_dispatch_{self.uuid}" WHERE id = ?', (dispatch,)
        ).fetchone()
        return self.row("rocpd_pmc_event", event_id=event, pmc_id=pmc, value=value)

    def region(self, track: int, category: str, name: str, start: int, end: int,
               correlation: int | None = None) -> int:  # fmt: skip
        s, e = self.times(start, end)
        return self.row("rocpd_region", track_id=track, name_id=self.string(name), start_id=s,
                        end_id=e, event_id=self.event(category, correlation))  # fmt: skip

    def copy(self, track: int, src_agent: int, dst_agent: int, size: int, start: int,
             end: int, correlation: int | None = None) -> int:  # fmt: skip
        s, e = self.times(start, end)
        return self.row(
            "rocpd_memory_copy", track_id=track, start_id=s, end_id=e,
            name_id=self.string("MEMORY_COPY_HOST_TO_DEVICE"), src_agent_id=src_agent,
            dst_agent_id=dst_agent, size=size, event_id=self.event("MEMORY_COPY", correlation),
        )  # fmt: skip


T0 = 1_000_000_000  # ns
MI300X = {"cu_count": 304, "simd_per_cu": 4, "max_waves_per_simd": 8, "wave_front_size": 64,
          "lds_size_in_kb": 64, "gfx_target_version": 90402, "name": "gfx942"}  # fmt: skip
GEMM = "Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI32x32x8x1_SN_1LDSB1"
POINTWISE = "void at::native::elementwise_kernel<128, 4>(int)"


def write_hand(w: RocpdWriter, pid: int = 4242, t0: int = T0) -> None:
    """One process on one MI300X (logical agent 2; the CPU is agent 0): a roctx 'step' range,
    an 8 MiB host-to-device copy, a GEMM launched twice and a pointwise kernel, a stream
    synchronize. Times in ns from t0:

        copy      [0, 20_000]           hipMemcpyAsync [-5_000, -1_000] (correlation 1)
        GEMM      [40_000, 140_000]     hipLaunchKernel [30_000, 35_000] (2)
        pointwise [140_000, 150_000]    hipLaunchKernel [36_000, 38_000] (3)
        sync                            hipStreamSynchronize [39_000, 150_500] (4)
        GEMM      [210_000, 310_000]    hipLaunchKernel [200_000, 202_000] (5)
        step      [0, 400_000]          roctx range (MARKER_CORE_API)
    """
    cpu = w.agent("CPU", 0, 0, "AMD EPYC 9654")
    gpu = w.agent("GPU", 2, 0, "AMD Instinct MI300X", MI300X)
    host = w.track(pid, pid)
    queue = w.track(pid, pid, agent=gpu, queue=1)  # no stream id: the queue is the stream
    gemm = w.symbol(GEMM, vgpr=128, accum=128, sgpr=96, lds=65536)
    pointwise = w.symbol(POINTWISE, vgpr=16)
    w.region(host, "MARKER_CORE_API", "step", t0, t0 + 400_000)
    w.region(host, "HIP_RUNTIME_API_EXT", "hipMemcpyAsync", t0 - 5_000, t0 - 1_000, 1)
    w.copy(queue, cpu, gpu, 8 << 20, t0, t0 + 20_000, 1)
    w.region(host, "HIP_RUNTIME_API_EXT", "hipLaunchKernel", t0 + 30_000, t0 + 35_000, 2)
    # 320 x 256 work-items in workgroups of 256: 320 workgroups
    w.dispatch(queue, gemm, 1, t0 + 40_000, t0 + 140_000, (320 * 256, 1, 1), (256, 1, 1),
               lds=65536, correlation=2)  # fmt: skip
    w.region(host, "HIP_RUNTIME_API_EXT", "hipLaunchKernel", t0 + 36_000, t0 + 38_000, 3)
    w.dispatch(queue, pointwise, 2, t0 + 140_000, t0 + 150_000, (4096, 1, 1), (128, 1, 1),
               correlation=3)  # fmt: skip
    w.region(host, "HIP_RUNTIME_API_EXT", "hipStreamSynchronize", t0 + 39_000, t0 + 150_500, 4)
    w.region(host, "HIP_RUNTIME_API_EXT", "hipLaunchKernel", t0 + 200_000, t0 + 202_000, 5)
    # 1000 x 3 work-items in workgroups of 256 x 2: ceil(1000/256) x ceil(3/2) = 4 x 2
    w.dispatch(queue, gemm, 3, t0 + 210_000, t0 + 310_000, (1000, 3, 1), (256, 2, 1),
               lds=65536, correlation=5)  # fmt: skip


def write_gemm(w: RocpdWriter, counters: dict | None = None, pid: int = 4242) -> list[int]:
    """One MI300X (logical agent 2) running the Tensile GEMM three times, each launch
    hipLaunchKernel'd 5 us before it: 320 workgroups of 256 work-items (320 x 256 x 1
    work-items), 128 + 128 VGPRs, 64 KiB LDS (one workgroup per CU: 304 slots), 100 us each,
    200 us apart from T0. ``counters``: name -> value, or a list of values (one per
    instance), written to the PMC tables for every launch (rocprofv3 --pmc). Returns the
    dispatches' row ids."""
    w.agent("CPU", 0, 0, "AMD EPYC 9654")
    gpu = w.agent("GPU", 2, 0, "AMD Instinct MI300X", MI300X)
    host = w.track(pid, pid)
    queue = w.track(pid, pid, agent=gpu, queue=1)
    gemm = w.symbol(GEMM, vgpr=128, accum=128, sgpr=96, lds=65536)
    rows = []
    for i in range(3):
        t = T0 + i * 200_000
        w.region(host, "HIP_RUNTIME_API_EXT", "hipLaunchKernel", t - 5_000, t - 3_000, i + 1)
        rows.append(w.dispatch(queue, gemm, i + 1, t, t + 100_000, (320 * 256, 1, 1),
                               (256, 1, 1), lds=65536, correlation=i + 1))  # fmt: skip
    pmc: dict[tuple[str, int], int] = {}
    for row in rows:
        for name, value in (counters or {}).items():
            for instance, v in enumerate(value if isinstance(value, list) else [value]):
                if (name, instance) not in pmc:
                    pmc[(name, instance)] = w.pmc(name, instance, gpu)
                w.pmc_value(row, pmc[(name, instance)], v)
    return rows


def open_db(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path)


def from_rocprofv3_json(doc: dict, path: Path) -> Path:
    """Write the kernel dispatches and agents of a rocprofv3 JSON document (--output-format
    json) into a rocpd database at ``path``: the same run in the other container."""
    tool = doc["rocprofiler-sdk-tool"][0]
    pid = int(tool["metadata"]["pid"])
    with open_db(path) as conn:
        w = RocpdWriter(conn, "0000ddb5_8903_7903_b269_cd8d3745bb8a")
        agents = {}
        for a in tool["agents"]:
            kind = "GPU" if a["type"] == 2 else "CPU"
            facts = {k: v for k, v in a.items() if not isinstance(v, (list, dict))}
            agents[a["id"]["handle"]] = w.agent(kind, a["logical_node_id"],
                                                 a["logical_node_type_id"],
                                                 a.get("product_name", ""), facts)  # fmt: skip
        symbols = {
            s["kernel_id"]: w.symbol(
                s["truncated_kernel_name"],
                s["arch_vgpr_count"],
                s["accum_vgpr_count"],
                s["sgpr_count"],
                s["group_segment_size"],
            )  # fmt: skip
            for s in tool["kernel_symbols"]
        }
        tracks: dict[tuple, int] = {}
        for r in tool["buffer_records"]["kernel_dispatch"]:
            info = r["dispatch_info"]
            key = (r["thread_id"], info["agent_id"]["handle"], info["queue_id"]["handle"],
                   r["stream_id"]["handle"])  # fmt: skip
            if key not in tracks:
                tracks[key] = w.track(pid, key[0], agents[key[1]], key[2], key[3])
            w.dispatch(
                tracks[key], symbols[info["kernel_id"]], info["dispatch_id"],
                r["start_timestamp"], r["end_timestamp"],
                tuple(info["grid_size"][a] for a in "xyz"),
                tuple(info["workgroup_size"][a] for a in "xyz"),
                lds=info["group_segment_size"], correlation=r["correlation_id"]["internal"],
            )  # fmt: skip
    return path
