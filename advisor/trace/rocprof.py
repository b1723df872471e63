"""AMD rocprof outputs -> Trace: v1 results.csv, rocprofv2 results, rocprofv3 CSV (kernel,
HIP API, RCCL API, memory copy traces, agent_info) and rocprofv3 JSON.

The layout of a CSV is recognized from its header (never from its file name): each known
layout names the columns it must have; other columns are allowed. Grid sizes are counted in
work-items in every rocprof version: workgroups = prod ceil(grid_d / wg_d).
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisor.errors import READ_ERRORS, TOO_DEEP, AdvisorInputError, not_a_trace, read_problem
from advisor.trace.gpus import agent_spec, cdna_spec, device_index
from advisor.trace.model import GpuSpec, Trace, empty_table

# normalized column -> header names used by the rocprof versions (first present wins)
ALIASES = {
    "dispatch": ["Dispatch_Id", "Dispatch_ID", "Index"],
    "name": ["Kernel_Name", "KernelName"],
    "device": ["Agent_Id", "GPU_ID", "gpu-id"],
    "queue": ["Queue_Id", "Queue_ID", "queue-id"],
    "stream": ["Stream_Id"],
    "pid": ["Process_Id", "PID", "pid"],
    "tid": ["Thread_Id", "TID", "tid"],
    "correlation": ["Correlation_Id", "Correlation_ID"],
    "start": ["Start_Timestamp", "BeginNs"],
    "end": ["End_Timestamp", "EndNs"],
    "grid_x": ["Grid_Size_X", "Grid_Size", "grd"],
    "grid_y": ["Grid_Size_Y"],
    "grid_z": ["Grid_Size_Z"],
    "wg_x": ["Workgroup_Size_X", "Workgroup_Size", "wgr"],
    "wg_y": ["Workgroup_Size_Y"],
    "wg_z": ["Workgroup_Size_Z"],
    "lds": ["LDS_Block_Size", "Group_Segment_Size", "LDS_Per_Workgroup", "lds"],
    "arch_vgpr": ["VGPR_Count", "Arch_VGPR", "arch_vgpr", "vgpr"],
    "accum_vgpr": ["Accum_VGPR_Count", "Accum_VGPR", "accum_vgpr"],
    "sgpr": ["SGPR_Count", "SGPR", "sgpr"],
    "wave_size": ["Wave_Size", "wave_size"],
    "function": ["Function"],
    "domain": ["Domain"],
    "direction": ["Direction"],
    "src": ["Source_Agent_Id"],
    "dst": ["Destination_Agent_Id"],
}


@dataclass(frozen=True)
class Layout:
    """A recognized CSV layout: its name, the kind of table, the headers that identify it."""

    name: str
    kind: str  # dispatches | counters (per dispatch, amd_counters.py) | api | copies | agents |
    # stats | other
    needs: frozenset[str]
    timed: bool = True


LAYOUTS = [
    Layout("rocprofv3 kernel_trace (22 columns)", "dispatches", frozenset(
        {"Kind", "Agent_Id", "Stream_Id", "Kernel_Name", "Start_Timestamp", "LDS_Block_Size",
         "VGPR_Count", "Accum_VGPR_Count", "SGPR_Count", "Grid_Size_X", "Workgroup_Size_X"})),
    Layout("rocprofv3 kernel_trace (18 columns)", "dispatches", frozenset(
        {"Kind", "Agent_Id", "Thread_Id", "Dispatch_Id", "Kernel_Name", "Start_Timestamp",
         "Group_Segment_Size", "Grid_Size_X", "Workgroup_Size_X"})),
    Layout("rocprofv3 kernel_trace (16 columns)", "dispatches", frozenset(
        {"Kind", "Agent_Id", "Kernel_Id", "Kernel_Name", "Start_Timestamp",
         "Group_Segment_Size", "Grid_Size_X", "Workgroup_Size_X"})),
    Layout("rocprofv3 counter_collection", "counters", frozenset(
        {"Counter_Name", "Counter_Value", "Dispatch_Id", "Kernel_Name", "Grid_Size",
         "Workgroup_Size", "Start_Timestamp"})),
    Layout("rocprofv3 counter_collection (no timestamps)", "counters", frozenset(
        {"Counter_Name", "Counter_Value", "Dispatch_Id", "Kernel_Name", "Grid_Size",
         "Workgroup_Size"}), timed=False),
    Layout("rocprof v1 results (ROCm <= 5.2: vgpr, sgpr, fbar)", "dispatches", frozenset(
        {"Index", "KernelName", "gpu-id", "grd", "wgr", "lds", "vgpr", "sgpr", "fbar",
         "BeginNs", "EndNs"})),
    Layout("rocprof v1 results", "dispatches", frozenset(
        {"Index", "KernelName", "gpu-id", "grd", "wgr", "lds", "arch_vgpr", "accum_vgpr",
         "sgpr", "BeginNs", "EndNs"})),
    Layout("rocprof v1 results (renamed by Omniperf)", "dispatches", frozenset(
        {"Dispatch_ID", "Kernel_Name", "GPU_ID", "queue-id", "Grid_Size", "Workgroup_Size",
         "Arch_VGPR", "Start_Timestamp", "End_Timestamp"})),
    Layout("rocprofv2 results", "dispatches", frozenset(
        {"Dispatch_ID", "GPU_ID", "Queue_ID", "Grid_Size", "Workgroup_Size", "Arch_VGPR",
         "Kernel_Name", "Start_Timestamp", "End_Timestamp"})),
    Layout("rocprof-compute pmc_perf", "counters", frozenset(
        {"Dispatch_ID", "GPU_ID", "Grid_Size", "Workgroup_Size", "Arch_VGPR", "Kernel_Name"}),
        timed=False),  # (Start/End_Timestamp where rocprof-compute wrote them)
    Layout("rocprofv3 API trace", "api", frozenset(
        {"Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id", "Start_Timestamp",
         "End_Timestamp"})),
    Layout("rocprofv3 memory_copy_trace", "copies", frozenset(
        {"Kind", "Direction", "Source_Agent_Id", "Destination_Agent_Id", "Start_Timestamp",
         "End_Timestamp"})),
    Layout("rocprofv3 agent_info", "agents", frozenset(
        {"Node_Id", "Agent_Type", "Cu_Count", "Simd_Per_Cu", "Max_Waves_Per_Simd",
         "Wave_Front_Size", "Gfx_Target_Version"})),
    Layout("rocprofv3 summary statistics", "stats", frozenset(
        {"Name", "Calls", "TotalDurationNs", "AverageNs"})),
    Layout("rocprofv3 memory_allocation_trace", "other", frozenset(
        {"Kind", "Operation", "Agent_Id", "Allocation_Size", "Start_Timestamp"})),
    Layout("rocprofv3 scratch_memory_trace", "other", frozenset(
        {"Kind", "Operation", "Agent_Id", "Alloc_Flags", "Start_Timestamp"})),
    Layout("rocprof-compute sysinfo", "other", frozenset({"gpu_model", "gpu_arch", "cu_per_gpu"})),
]  # fmt: skip

SIBLINGS = {
    "agents": ["agent_info"],
    "api": ["hip_api_trace", "hip_trace", "rccl_api_trace", "rccl_trace"],
    "copies": ["memory_copy_trace"],
}
_SUFFIX = re.compile(r"(kernel_trace|counter_collection)\.csv(\.gz)?$")
_NUMERIC = ["dispatch", "device", "queue", "stream", "pid", "tid", "correlation", "start",
            "end", "grid_x", "grid_y", "grid_z", "wg_x", "wg_y", "wg_z", "lds", "arch_vgpr",
            "accum_vgpr", "sgpr", "wave_size", "src", "dst"]  # fmt: skip


def read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (pd.errors.ParserError, UnicodeDecodeError, *READ_ERRORS) as exc:
        raise AdvisorInputError(str(path), f"not a readable CSV: {read_problem(exc)}") from None
    except pd.errors.EmptyDataError:
        raise AdvisorInputError(str(path), "CSV without a header") from None


def sniff(header: list[str]) -> Layout | None:
    """The first layout whose identifying columns are all in ``header``."""
    cols = set(header)
    return next((lay for lay in LAYOUTS if lay.needs <= cols), None)


def _agent_number(values: pd.Series) -> pd.Series:
    """'Agent 4' (ROCm 7) or '4' -> 4."""
    return values.astype(str).str.extract(r"(-?\d+)\s*$")[0]


def normalize(raw: pd.DataFrame, layout: Layout, path: str) -> pd.DataFrame:
    """Rename known columns to ALIASES names and parse the numeric ones (errors name the
    column and row)."""
    out = pd.DataFrame(index=raw.index)
    for col, names in ALIASES.items():
        src = next((n for n in names if n in raw.columns), None)
        if src is None:
            continue
        text = raw[src].astype(str).str.strip()
        values = _agent_number(text) if col in ("device", "src", "dst") else text
        out[col] = numbers(values, text, src, path) if col in _NUMERIC else values
    if layout.kind in ("dispatches", "counters"):
        for col in ("name", "device"):  # (every dispatch layout has them; a damaged header not)
            if col not in out:
                raise AdvisorInputError(path, f"{layout.name}: no {' or '.join(ALIASES[col])} "
                                        "column")  # fmt: skip
    if layout.kind in ("dispatches", "api", "copies") and layout.timed:
        # single damaged rows (no time, end before start) are dropped and counted later
        # (trace.quality); a layout without times at all is not a trace
        for col in ("start", "end"):
            if col not in out or (len(out) and out[col].isna().all()):
                raise AdvisorInputError(path, f"{layout.name}: missing {col} timestamps")
    return out


def numbers(values: pd.Series, text: pd.Series, column: str, path: str) -> pd.Series:
    """``values`` as numbers (empty: NaN); AdvisorInputError naming the column and row of the
    first that is not a finite number (``text``: the values as written, for the message)."""
    num = pd.to_numeric(values, errors="coerce")
    bad = (num.isna() & text.ne("")) | np.isinf(num)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise AdvisorInputError(
            path,
            f"column {column!r}, data row {row + 1}: {text.iloc[row]!r} is not a "
            + ("finite number" if np.isinf(num.iloc[row]) else "number"),
        )
    return num


def read_table(path: str | Path, raw: pd.DataFrame | None = None) -> tuple[Layout, pd.DataFrame]:
    """Read one rocprof CSV (``raw``: its cells, when read already): its layout and the
    normalized table."""
    p = Path(path)
    raw = read_csv(p) if raw is None else raw
    layout = sniff(list(raw.columns))
    if layout is None:
        head = ", ".join(list(raw.columns)[:6])
        raise AdvisorInputError(
            str(p), f"not a rocprof CSV: its header ({head}) is no layout rocprof writes"
        )
    table = normalize(raw, layout, str(p))
    if layout.name.startswith("rocprofv3 counter_collection") and "dispatch" in table:
        table = table.drop_duplicates("dispatch")  # one row per counter and dispatch
    return layout, table.reset_index(drop=True)


def agents_to_gpus(raw: pd.DataFrame) -> dict[int, GpuSpec]:
    """GpuSpec per GPU agent (Node_Id) of an agent_info table."""
    specs = {}
    gpu_rows = raw[raw["Agent_Type"].str.upper().str.contains("GPU")]
    for _, row in gpu_rows.iterrows():
        node = device_index(row["Node_Id"])
        spec = cdna_spec(
            name=row.get("Product_Name") or row.get("Name") or "AMD GPU",
            gfx=row["Gfx_Target_Version"],
            cus=row["Cu_Count"],
            simds=row["Simd_Per_Cu"],
            waves=row["Max_Waves_Per_Simd"],
            lds_kb=row.get("Lds_Size_In_Kb"),
            wave=row["Wave_Front_Size"],
            source="trace (agent_info)",
        )
        if node is not None and spec is not None:  # (else a damaged row: not used)
            specs[node] = spec
    return specs


_KD = r"\s*(\[clone \.kd\]|\(\.kd\)|\.kd)$"  # the code-object suffix of AMD kernel names


def _col(d: pd.DataFrame, name: str, default) -> pd.Series:
    """Column ``name`` of ``d``, or ``default`` on every row when this layout lacks it."""
    return d[name] if name in d else pd.Series(default, index=d.index)


def dispatches_to_kernels(d: pd.DataFrame, pid: int) -> pd.DataFrame:
    """Trace kernels table from normalized dispatches (grid in work-items -> workgroups)."""
    k = pd.DataFrame(index=d.index)
    k["device"] = d["device"].fillna(0).astype("int64")
    stream = d["stream"] if "stream" in d else _col(d, "queue", 0)
    k["stream"] = stream.fillna(0).astype("int64")
    k["start"] = d["start"]  # float while cells are empty: trace.quality drops and casts
    k["end"] = d["end"]
    if isinstance(d["name"].dtype, pd.CategoricalDtype):  # each distinct name once
        names = d["name"].cat.rename_categories(lambda c: str(c))
        short, uniques = pd.factorize(names.cat.categories.str.replace(_KD, "", regex=True))
        codes = names.cat.codes.to_numpy()
        k["name"] = pd.Categorical.from_codes(np.where(codes >= 0, short[codes], -1), uniques)
        k["demangled"] = names.to_numpy()
    else:
        names = d["name"].astype(str)
        k["name"] = names.str.replace(_KD, "", regex=True)
        k["demangled"] = names
    for axis in "xyz":  # an absent column means 1; an empty or zero cell is damage (0)
        grid = _col(d, f"grid_{axis}", 1).fillna(0)
        wg = _col(d, f"wg_{axis}", 1).fillna(0)
        blocks = np.ceil(grid / wg.where(wg >= 1))
        k[f"grid_{axis}"] = blocks.fillna(0).astype("int64")  # 0: flagged by trace.quality
        k[f"block_{axis}"] = wg.astype("int64")
    arch = _col(d, "arch_vgpr", np.nan)
    accum = _col(d, "accum_vgpr", 0).fillna(0)
    k["arch_vgpr"] = arch.astype(float)
    k["accum_vgpr"] = accum.astype(float)
    k["sgpr"] = _col(d, "sgpr", np.nan).astype(float)
    k["registers"] = (arch + accum).fillna(0).astype("int64")
    k["static_smem"] = _col(d, "lds", 0).fillna(0).astype("int64")
    k["dynamic_smem"] = 0
    for col in ("smem_executed", "cluster_x", "cluster_y", "cluster_z", "graph_node"):
        k[col] = np.nan
    k["correlation"] = _col(d, "correlation", np.nan).astype(float)
    k["pid"] = d["pid"].fillna(pid).astype("int64") if "pid" in d else pid
    return k.sort_values("start", kind="stable", ignore_index=True)


def _api(d: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "start": d["start"],
            "end": d["end"],
            "name": d["function"].astype(str),
            "tid": d["tid"].astype("int64"),
            "pid": d["pid"].astype("int64"),
            "correlation": d["correlation"].astype(float),
        }
    )


_DIRECTIONS = {"HOST_TO_DEVICE": "HtoD", "DEVICE_TO_HOST": "DtoH", "DEVICE_TO_DEVICE": "DtoD",
               "HOST_TO_HOST": "HtoH"}  # fmt: skip


def _copies(d: pd.DataFrame, gpu_ids: set[int], pid: int) -> pd.DataFrame:
    kind = d["direction"].astype(str).str.replace("MEMORY_COPY_", "").map(_DIRECTIONS)
    src, dst = d["src"].astype("int64"), d["dst"].astype("int64")
    peer = src.isin(gpu_ids) & dst.isin(gpu_ids) & (src != dst)
    return pd.DataFrame(
        {
            "device": np.where(dst.isin(gpu_ids), dst, src),
            "stream": d["stream"].fillna(-1).astype("int64") if "stream" in d else -1,
            "start": d["start"],
            "end": d["end"],
            "bytes": np.nan,
            "kind": np.where(peer, "PtoP", kind.fillna("Unknown")),
            "correlation": _col(d, "correlation", np.nan).astype(float),
            "pid": pid,
        }
    )


def _siblings(path: Path) -> dict[str, list[Path]]:
    """Files of the same run: same folder and prefix, known suffixes (csv or csv.gz)."""
    prefix = _SUFFIX.sub("", path.name)
    found: dict[str, list[Path]] = {}
    for kind, names in SIBLINGS.items():
        for name in names:
            for ext in (".csv", ".csv.gz"):
                cand = path.parent / f"{prefix}{name}{ext}"
                if cand.is_file():
                    found.setdefault(kind, []).append(cand)
    return found


SAME_RUN_SLACK_NS = 600 * 10**9  # siblings' events must fall within 10 min of the kernels


def _same_run(sibling: Path, table: pd.DataFrame, main: Path, lo: int, hi: int) -> str | None:
    """None when the sibling file's events lie near the kernels' time range, else the
    warning that it is left out (a file of another run)."""
    near = (table["end"] >= lo - SAME_RUN_SLACK_NS) & (table["start"] <= hi + SAME_RUN_SLACK_NS)
    if len(table) and not near.any():
        return (
            f"{sibling.name} ignored: no event within 10 min of the dispatches in {main.name} "
            "(a sibling file from another run?)"
        )
    return None


def _pid_of(path: Path) -> int:
    match = re.match(r"(\d+)_", path.name)
    return int(match.group(1)) if match else 0


def read_rocprof(path: str | Path) -> Trace:
    """Read a rocprof kernel CSV (with its sibling files) or a folder of them into a Trace."""
    p = Path(path)
    if p.is_dir():
        found = sorted(x for x in p.iterdir() if _SUFFIX.search(x.name))
        counts = [x for x in found if "counter_collection" in x.name]
        mains = [x for x in found if x not in counts] or sorted(p.glob("results*.csv"))
        if not mains:
            why = (f" ({len(counts)} counter_collection file(s): counters, read one alone or "
                   "join it to a kernel trace with --counters)") if counts else ""  # fmt: skip
            raise AdvisorInputError(
                str(p), "folder holds no trace: no Nsight export (*.sqlite), PyTorch profiler "
                "trace (*.json, *.json.gz) or rocprof kernel trace (*kernel_trace.csv, "
                f"results*.csv){why}",
            )  # fmt: skip
        traces = [read_rocprof(m) for m in mains]
        merged = _merge(traces, str(p))
        if counts:
            merged.warnings.append(
                f"{', '.join(x.name for x in counts)}: hardware counters, not read as kernels "
                f"of the folder (join them: advisor analyze {mains[0].name} --counters "
                f"{counts[0].name})"
            )
        return merged
    raw = read_csv(p)
    layout = sniff(list(raw.columns))
    if layout is not None and layout.kind == "counters":  # (a kernel-level trace of its own)
        from advisor.trace.amd_counters import read_amd_counters

        return read_amd_counters(p, raw=raw)
    layout, table = read_table(p, raw)
    if layout.kind != "dispatches":
        hint = {
            "stats": "summary statistics, not a trace: analyze the kernel_trace.csv of the run",
            "agents": "agent facts only: analyze the kernel_trace.csv beside it",
            "api": "a host API trace only: analyze the kernel_trace.csv beside it",
            "copies": "copies only: analyze the kernel_trace.csv beside it",
        }.get(layout.kind, "no kernel dispatches in this file")
        raise AdvisorInputError(str(p), f"{layout.name}: {hint}")
    if not layout.timed:
        raise AdvisorInputError(
            str(p), f"{layout.name}: dispatches without timestamps cannot be analyzed in time"
        )
    if table.empty:
        raise AdvisorInputError(str(p), f"{layout.name}: no kernel dispatches")
    pid = _pid_of(p)
    trace = Trace(
        path=str(p), format="rocprof-csv", producer_version=layout.name,
        kernels=dispatches_to_kernels(table, pid),
    )  # fmt: skip
    if "arch_vgpr" not in table:
        trace.warnings.append(
            f"{layout.name} has no register counts: occupancy, waves and tails are not "
            "computed (rocprofv3 >= 7.0 writes VGPR_Count in its 22-column layout)"
        )
        trace.kernels["registers"] = -1  # marks 'unknown' for the occupancy model
    if layout.name.endswith("(22 columns)"):
        trace.warnings.append(
            "LDS_Block_Size of the 22-column kernel_trace omits dynamic LDS: occupancy limited "
            "by LDS may be overstated"
        )
    siblings = _siblings(p)
    gpu_ids = set(trace.kernels["device"].unique().tolist())
    gpus, notes, used = _agent_facts(p, siblings.get("agents", []), gpu_ids)
    trace.warnings += notes
    if gpus:
        trace.gpus = gpus
    siblings["agents"] = used
    k_lo, k_hi = int(trace.kernels["start"].min()), int(trace.kernels["end"].max())
    apis = [(f, read_table(f)[1]) for f in siblings.get("api", [])]
    copies = [(f, read_table(f)[1]) for f in siblings.get("copies", [])]
    kept = {}
    for f, table in apis + copies:
        note = _same_run(f, table, p, k_lo, k_hi)
        if note:
            trace.warnings.append(note)
        kept[f] = note is None
    apis = [(f, _whole_rows(t, ("pid", "tid"), f, trace)) for f, t in apis if kept[f]]
    copies = [(f, _whole_rows(t, ("src", "dst"), f, trace)) for f, t in copies if kept[f]]
    siblings = {kind: [f for f in fs if kept.get(f, True)] for kind, fs in siblings.items()}
    if apis:
        trace.api = pd.concat([_api(t) for _, t in apis], ignore_index=True)
        api_pids = trace.api["pid"].unique()
        if pid == 0 and len(api_pids) == 1:  # kernel_trace.csv names no process
            pid = int(api_pids[0])
            trace.kernels["pid"] = pid
    if copies:
        trace.memcpy = pd.concat([_copies(c, gpu_ids, pid) for _, c in copies], ignore_index=True)
    trace.sources.extend(f.name for fs in siblings.values() for f in fs)
    if trace.api.empty:
        trace.warnings.append(
            "no host API trace (hip_api_trace.csv) beside it: idle gaps cannot be attributed "
            "to host causes (capture with rocprofv3 --hip-trace or --runtime-trace)"
        )
    return trace


def _agent_facts(p: Path, files: list[Path], gpu_ids: set) -> tuple[dict, list[str], list[Path]]:
    """GPU facts of the agent_info files beside ``p`` (the last usable one's), the
    warnings, and the files used (a file without every GPU of ``gpu_ids``: another run's)."""
    gpus: dict[int, GpuSpec] = {}
    notes: list[str] = []
    used = []
    for f in files:
        raw = read_csv(f)
        agent_layout = sniff(list(raw.columns))
        if agent_layout is None or agent_layout.kind != "agents":
            raise AdvisorInputError(str(f), "expected an agent_info layout")
        agents = agents_to_gpus(raw)
        gpu_rows = int(raw["Agent_Type"].str.upper().str.contains("GPU").sum())
        if len(agents) < gpu_rows:
            notes.append(damaged_agents_warning(gpu_rows - len(agents), f.name))
        missing = gpu_ids - set(agents)
        if missing:  # a file of another run: its facts would be wrong here
            notes.append(
                f"{f.name} ignored: it has no GPU agent {', '.join(map(str, sorted(missing)))} "
                f"used by {p.name} (a sibling file from another run?)"
            )
            continue
        gpus = agents
        used.append(f)
    return gpus, notes, used


def sibling_gpus(p: Path, trace: Trace) -> tuple[dict, list[str], list[str]]:
    """GPU facts of the agent_info.csv beside a rocprofv3 CSV (the same prefix), for the
    devices of ``trace``: (facts, warnings, names of the files used)."""
    files = _siblings(p).get("agents", [])
    gpus, notes, used = _agent_facts(p, files, set(trace.kernels["device"].unique().tolist()))
    return gpus, notes, [f.name for f in used]


def damaged_agents_warning(count: int, where: str) -> str:
    """The warning for GPU agents whose facts cannot be used (no usable id or CU count)."""
    return (f"{count} GPU agent(s) in {where} have no usable id or compute-unit count (a "
            "damaged file): their facts are not used")  # fmt: skip


def _whole_rows(table: pd.DataFrame, cols: tuple[str, ...], f: Path, trace: Trace) -> pd.DataFrame:
    """The rows of a sibling file's table that have every column of ``cols`` (a thread, the
    copy's agents); the others are dropped, with a warning saying how many."""
    bad = np.logical_or.reduce([table[c].isna().to_numpy() for c in cols])
    if not bad.any():
        return table
    trace.warnings.append(
        f"{int(bad.sum()):,} of {len(table):,} rows of {f.name} dropped: no "
        f"{' or '.join(cols)} (a damaged file)"
    )
    return table[~bad].reset_index(drop=True)


def _merge(traces: list[Trace], path: str) -> Trace:
    first = traces[0]
    out = Trace(
        path=path, format=first.format, producer_version=first.producer_version,
        kernels=pd.concat([t.kernels for t in traces], ignore_index=True),
    )  # fmt: skip
    for table in ("api", "memcpy"):
        parts = [getattr(t, table) for t in traces if len(getattr(t, table))]
        setattr(out, table, pd.concat(parts, ignore_index=True) if parts else empty_table(table))
    for t in traces:
        out.gpus.update(t.gpus)
        out.warnings.extend(w for w in t.warnings if w not in out.warnings)
        out.sources.extend(t.sources)
    return out


def _dicts(value) -> list[dict]:
    """The objects of a JSON list (anything else: none)."""
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def _field(record: dict, *keys: str):
    """``record[k1][k2]...``, None where a level is missing or not an object."""
    value: Any = record
    for k in keys:
        value = value.get(k) if isinstance(value, dict) else None
    return value


def _json_id(value) -> float | None:
    """An id (agent handle, kernel id) as a number to look it up by; None if it is none."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    x = pd.to_numeric(pd.Series([value]), errors="coerce").iloc[0]
    return float(x) if np.isfinite(x) else None


def _json_numbers(values: pd.Series, name: str, path: str) -> pd.Series:
    """A field of the JSON records as numbers (missing or null: NaN); AdvisorInputError
    naming the field and record of the first value that is not a finite number."""

    def one(v):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return np.nan
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            return None
        try:
            x = float(v)
        except (ValueError, OverflowError):
            return None
        return x if np.isfinite(x) else None

    out = values.map(one)
    bad = out.isna() & ~values.map(lambda v: v is None or (isinstance(v, float) and np.isnan(v)))
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise AdvisorInputError(path, f"rocprofv3 JSON: {name} of record {row} is not a number: "
                                f"{str(values.iloc[row])[:40]!r}")  # fmt: skip
    return out.astype(float)


def read_rocprof_json(path: str | Path) -> Trace:
    """rocprofv3 ``--output-format json`` (optionally .gz) -> Trace (kernel dispatches,
    agents, memory copies, HIP API)."""
    p = Path(path)
    opener = gzip.open if p.name.endswith(".gz") else open
    try:
        with opener(p, "rt") as fh:
            doc = json.load(fh)
    except UnicodeDecodeError:
        raise AdvisorInputError(str(p), "not a profiler trace: binary data, not JSON") from None
    except json.JSONDecodeError as exc:
        raise AdvisorInputError(
            str(p),
            f"not a profiler trace: the text is not JSON (line {exc.lineno}, column {exc.colno})",
        ) from None
    except READ_ERRORS as exc:
        raise AdvisorInputError(str(p), f"cannot read: {read_problem(exc)}") from None
    except RecursionError:
        raise AdvisorInputError(str(p), f"not a rocprofv3 JSON trace: it {TOO_DEEP}") from None
    if not isinstance(doc, dict) or "rocprofiler-sdk-tool" not in doc:
        raise AdvisorInputError(str(p), not_a_trace(doc))
    try:
        tool = doc["rocprofiler-sdk-tool"][0]
        dispatch = tool["buffer_records"]["kernel_dispatch"]
    except (KeyError, IndexError, TypeError):
        raise AdvisorInputError(
            str(p),
            "rocprofv3 JSON without kernel dispatch records (rocprofiler-sdk-tool[0]."
            "buffer_records.kernel_dispatch): profile with rocprofv3 --kernel-trace",
        ) from None
    records = [r for r in dispatch if isinstance(r, dict)] if isinstance(dispatch, list) else []
    if not records:
        raise AdvisorInputError(str(p), "rocprofv3 JSON: no kernel dispatches")
    agents = {_json_id(_field(a, "id", "handle")): a for a in _dicts(tool.get("agents"))}
    agents.pop(None, None)
    symbols = {_json_id(s.get("kernel_id")): s for s in _dicts(tool.get("kernel_symbols"))}
    symbols.pop(None, None)
    d = pd.json_normalize(records, sep="_")
    for col in ("start_timestamp", "end_timestamp"):
        if col not in d:
            raise AdvisorInputError(str(p), f"rocprofv3 JSON: kernel dispatches without {col}")
    field = lambda col: d[col] if col in d else pd.Series(np.nan, index=d.index)  # noqa: E731
    kid = _json_numbers(field("dispatch_info_kernel_id"), "dispatch_info.kernel_id", str(p))
    sym = pd.DataFrame(
        list(symbols.values()),
        index=list(symbols),
        columns=["truncated_kernel_name", "arch_vgpr_count", "accum_vgpr_count", "sgpr_count"],
    )
    node = pd.Series({h: a.get("logical_node_id", a.get("node_id")) for h, a in agents.items()},
                     dtype=object)  # fmt: skip
    handle = _json_numbers(field("dispatch_info_agent_id_handle"), "agent_id.handle", str(p))
    columns = {"dispatch": "dispatch_info_dispatch_id", "queue": "dispatch_info_queue_id_handle",
               "stream": "stream_id_handle", "tid": "thread_id",
               "correlation": "correlation_id_internal", "start": "start_timestamp",
               "end": "end_timestamp", **{f"grid_{a}": f"dispatch_info_grid_size_{a}"
                                          for a in "xyz"},
               **{f"wg_{a}": f"dispatch_info_workgroup_size_{a}" for a in "xyz"},
               "lds": "dispatch_info_group_segment_size"}  # fmt: skip
    table = pd.DataFrame({col: _json_numbers(field(src), src, str(p))
                          for col, src in columns.items()})  # fmt: skip
    table["name"] = kid.map(sym["truncated_kernel_name"]).fillna("<unknown>").astype(str)
    table["device"] = handle.map(node).map(device_index).astype(float)
    for col, src in (("arch_vgpr", "arch_vgpr_count"), ("accum_vgpr", "accum_vgpr_count"),
                     ("sgpr", "sgpr_count")):  # fmt: skip
        table[col] = _json_numbers(kid.map(sym[src]), f"kernel_symbols.{src}", str(p))
    metadata = tool.get("metadata")
    pid = device_index(metadata.get("pid")) if isinstance(metadata, dict) else None
    trace = Trace(
        path=str(p), format="rocprofv3-json", producer_version="rocprofv3 JSON",
        kernels=dispatches_to_kernels(table, pid or 0),
    )  # fmt: skip
    for h, a in agents.items():
        if a.get("type") == 2:  # GPU agent
            name = a.get("product_name") or a.get("name", "AMD GPU")
            spec = agent_spec(a, name, "trace (rocprofv3 agents)")
            device = device_index(node.get(h))
            if spec is not None and device is not None:
                trace.gpus[device] = spec
            else:
                trace.warnings.append(damaged_agents_warning(1, "the JSON"))
    if not tool["buffer_records"].get("hip_api"):
        trace.warnings.append(
            "no HIP API records in this JSON: idle gaps cannot be attributed to host causes"
        )
    return trace
