"""Data quality of a Trace: rows that cannot be real are dropped (and counted), launch
configurations that cannot run are flagged, and what the trace lacks is said together with
the metrics it limits. Every message here ends up in the output's warnings.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.data import load_yaml
from advisor.trace.model import COLUMNS

# Timestamps are ns since the session start (nsys) or since the epoch (rocprof, ~1.7e18):
# a value at or beyond 2^62 ns (146 years) is a damaged field, as is a negative one.
MAX_TIME_NS = 1 << 62
# Launch limits shared by every CUDA and ROCm GPU the advisor knows.
MAX_BLOCK_THREADS = 1024
MAX_REGISTERS = 512  # per thread: 255 on CUDA, 512 VGPRs (incl. AGPRs) on CDNA
MAX_GRID_BLOCKS = 2.0**53  # CUDA allows (2^31 - 1) * 65535 * 65535 ~ 2^63; beyond 2^53 is damage
MAX_DEVICE = 2**31  # device ids are small numbers (a Kineto GPU event without one: its pid)

_LABELS = {"kernels": "kernel launches", "memcpy": "memory copies", "memset": "memsets",
           "graphs": "CUDA graph launches", "sync": "synchronization events",
           "api": "runtime API calls", "nvtx": "NVTX ranges", "cpu_ops": "CPU ops"}  # fmt: skip


def drop_impossible_rows(trace) -> None:
    """Make every timed table of ``trace`` (in place) hold only rows that can be real: text
    in a numeric column becomes missing (counted), as do infinite values; rows whose
    start/end are missing, negative, at or beyond 2^62 ns, or end before they start, and GPU
    rows without a device or stream or whose device id cannot be one (negative, fractional,
    2^31 or more), are removed, with one warning per table saying how many."""
    for table, label in _LABELS.items():
        df = getattr(trace, table)
        if df.empty:
            continue
        _coerce_numbers(trace, df, COLUMNS[table], label)
        _finite(df, COLUMNS[table])
        if table == "kernels":
            _absurd_launch_fields(df)
        start, end = _times(df["start"]), _times(df["end"])
        bad = ~((start >= 0) & (end >= start) & (end < MAX_TIME_NS))  # NaN fails too
        for col in ("device", "stream"):  # GPU work must say where it ran
            if col in df and table != "api":
                bad |= pd.isna(df[col]).to_numpy()
        if "device" in df:
            bad |= _impossible_devices(df["device"])
        if bad.any():
            if table == "kernels" and not trace.counters.empty:  # (counters name kernel rows)
                _renumber_counters(trace, ~np.asarray(bad))
            kept = df[~bad].reset_index(drop=True)
            trace.warnings.append(
                f"{int(bad.sum()):,} of {len(df):,} {label} dropped: missing timestamps or "
                "device/stream, a device id that cannot be one, end before start, or times "
                "outside 0..2^62 ns (a damaged trace); every metric is computed without them"
            )
            df = kept
        for col in ("device", "stream"):
            if col in df and df[col].dtype.kind == "f":
                df[col] = df[col].astype(np.int64)
        for col in ("start", "end"):
            if df[col].dtype != np.int64:
                df[col] = pd.to_numeric(df[col]).astype(np.int64)
        setattr(trace, table, df)


def _renumber_counters(trace, kept: np.ndarray) -> None:
    """trace.counters' ``launch`` (a row of trace.kernels) after the kernel rows not
    ``kept`` are dropped: the new row number, -1 for a dropped launch."""
    new = np.where(kept, np.cumsum(kept) - 1, -1)
    at = trace.counters["launch"].to_numpy(np.int64)
    inside = (at >= 0) & (at < len(new))
    trace.counters["launch"] = np.where(inside, new[np.clip(at, 0, len(new) - 1)], -1)


# columns of the Trace contract that hold text (the others hold numbers)
_TEXT = {"name", "demangled", "kind", "text", "domain"}


def _coerce_numbers(trace, df: pd.DataFrame, contract: dict, label: str) -> None:
    """The contract's numeric columns that arrived holding text (a damaged export stores
    'abc' in an integer column; SQLite allows it) become numbers, the text missing, with a
    warning. Extra reader columns are left as they are."""
    for col in df.columns:
        if col not in contract or col in _TEXT or pd.api.types.is_numeric_dtype(df[col]):
            continue
        values = pd.to_numeric(df[col], errors="coerce")
        lost = int((values.isna() & df[col].notna()).sum())
        df[col] = values
        if lost:
            trace.warnings.append(_non_numeric(lost, label, col))


def _finite(df: pd.DataFrame, contract: dict) -> None:
    """The contract's float columns with infinities (a damaged field: 'inf' as text, 9e999
    as a real) hold them as missing, in place: no id, count or time is infinite."""
    for col in df.columns:
        if col in contract and df[col].dtype.kind == "f":
            v = df[col].to_numpy()
            if np.isinf(v).any():
                df[col] = np.where(np.isinf(v), np.nan, v)


# launch fields of the kernels table (grid and block dimensions, registers, shared memory)
LAUNCH_FIELDS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers",
                 "static_smem", "dynamic_smem")  # fmt: skip


def _absurd_launch_fields(df: pd.DataFrame) -> None:
    """Launch fields (floats, as JSON traces give them) beyond +-MAX_GRID_BLOCKS or not
    finite become missing, in place: no launch has them, and no integer column holds -1e308
    (the launch is then flagged and counted with the impossible ones, impossible_launches)."""
    for col in LAUNCH_FIELDS:
        if col in df and df[col].dtype.kind == "f":
            v = df[col].to_numpy()
            absurd = ~(np.abs(v) <= MAX_GRID_BLOCKS) & ~np.isnan(v)
            if absurd.any():
                df[col] = np.where(absurd, np.nan, v)


def non_numeric_warning(count: int, table: str, field: str) -> str:
    """The warning for ``count`` values of ``field`` in ``table`` (a Trace table name) that
    were not numbers (a reader read them as missing)."""
    return _non_numeric(count, _LABELS.get(table, table), field)


def _non_numeric(count: int, label: str, field: str) -> str:
    return f"{count:,} {label} have a non-numeric {field!r} (a damaged trace): treated as missing"


def _impossible_devices(col: pd.Series) -> np.ndarray:
    """Per row: True where the device id is negative, fractional or 2^31 or more (missing
    ids are counted as missing, not here)."""
    v = pd.to_numeric(col, errors="coerce").to_numpy(np.float64)
    return (v < 0) | (v >= MAX_DEVICE) | ((v != np.floor(v)) & ~np.isnan(v))


def _times(col: pd.Series) -> np.ndarray:
    """A time column as int64 when it is one (no copy), else as float64 (NaN: missing)."""
    if col.dtype == np.int64:
        return col.to_numpy()
    return pd.to_numeric(col, errors="coerce").to_numpy(np.float64)


def impossible_launches(k: pd.DataFrame) -> np.ndarray:
    """Per launch: True when its recorded configuration cannot run on any GPU (a grid or block
    dimension below 1, fractional or missing, over MAX_GRID_BLOCKS blocks, more than
    MAX_BLOCK_THREADS threads, registers outside 0..MAX_REGISTERS, negative shared memory): no
    occupancy or waves are computed for it."""
    dims = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
    v = {c: pd.to_numeric(k[c], errors="coerce").to_numpy(np.float64) for c in dims}
    threads = v["block_x"] * v["block_y"] * v["block_z"]
    regs = pd.to_numeric(k["registers"], errors="coerce").to_numpy(np.float64)
    smem = pd.to_numeric(k["static_smem"], errors="coerce").to_numpy(np.float64) + pd.to_numeric(
        k["dynamic_smem"], errors="coerce"
    ).to_numpy(np.float64)
    ok = np.logical_and.reduce([(v[c] >= 1) & (v[c] == np.floor(v[c])) for c in dims])
    ok &= v["grid_x"] * v["grid_y"] * v["grid_z"] <= MAX_GRID_BLOCKS
    ok &= threads <= MAX_BLOCK_THREADS
    # (registers or shared memory not recorded, as in ROCm Kineto traces: unknown, not damage)
    ok &= np.isnan(regs) | ((regs >= 0) & (regs <= MAX_REGISTERS))
    ok &= np.isnan(smem) | (smem >= 0)
    return ~ok & ~unrecorded_launches(k)  # nothing recorded is not damage


def unknown_resources(k: pd.DataFrame) -> np.ndarray:
    """Per launch: grid and block recorded but registers or shared memory not (ROCm Kineto
    traces): occupancy is then bounded by what is known (block size, the GPU's limits)."""
    regs = pd.to_numeric(k["registers"], errors="coerce").isna().to_numpy()
    smem = (pd.to_numeric(k["static_smem"], errors="coerce").isna()
            | pd.to_numeric(k["dynamic_smem"], errors="coerce").isna()).to_numpy()  # fmt: skip
    return (regs | smem) & ~unrecorded_launches(k)


def unrecorded_launches(k: pd.DataFrame) -> np.ndarray:
    """Per launch: True when the trace recorded no launch configuration at all (every grid
    and block dimension missing, as in ROCm PyTorch profiler traces): not damage, but no
    occupancy or waves can be computed for it."""
    dims = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
    return np.logical_and.reduce(
        [pd.to_numeric(k[c], errors="coerce").isna().to_numpy() for c in dims]
    )


def coverage_counts(
    ops: pd.DataFrame,
    impossible: int = 0,
    api_traced: bool = True,
    unrecorded: int = 0,
    unknown_resources: int = 0,
) -> dict[str, int]:
    """What coverage_notes reports, as counts (summable over the ranks of a job):
    ``kernels``, ``no_launch_call`` (kernels without their launch call), ``api_traced``
    (1 when the trace holds runtime API calls), ``repeated`` ops, ``unrecorded`` and
    ``impossible`` launch configurations."""
    kernels = ops["kind"].eq("kernel").to_numpy()
    return {
        "kernels": int(kernels.sum()),
        "no_launch_call": int(ops["api_tid"].isna().to_numpy()[kernels].sum()),
        "api_traced": int(api_traced),
        "repeated": _repeated_ops(ops),
        "unrecorded": int(unrecorded),
        "impossible": int(impossible),
        "unknown_resources": int(unknown_resources),
    }


def coverage_notes(counts: dict[str, int]) -> list[str]:
    """What the trace lacks, and the metrics that limits (``counts``: coverage_counts)."""
    notes = []
    missing = counts["no_launch_call"]
    if counts["kernels"] and counts["api_traced"] and missing:
        # (no API at all: the reader says how to get it)
        notes.append(
            f"{missing:,} of {counts['kernels']:,} kernel launches have no launch call in "
            "the trace (API events lost or not traced): the gaps before them are "
            "'unattributed' and they belong to no NVTX range"
        )
    same = counts["repeated"]
    if same:
        notes.append(
            f"{same:,} GPU operations repeat another's device, stream, start and end to the "
            "nanosecond (a trace merged twice or damaged): busy time counts them once, but "
            "launch counts and per-kernel totals include them"
        )
    if counts["unrecorded"]:
        notes.append(
            f"{counts['unrecorded']:,} kernel launches have no launch configuration in the "
            "trace (grid and block not recorded, as in ROCm PyTorch profiler traces): their "
            "occupancy, waves and tails are not computed (rocprofv3 --kernel-trace records "
            "them)"
        )
    if counts.get("unknown_resources"):
        notes.append(
            f"{counts['unknown_resources']:,} kernel launches have no registers or shared "
            "memory in the trace (as ROCm PyTorch profiler traces record them): their "
            "occupancy counts the block size and the GPU's limits only, an upper bound (their "
            "waves a lower bound, their tails an estimate)"
        )
    if counts["impossible"]:
        notes.append(
            f"{counts['impossible']:,} kernel launches have impossible launch configurations "
            "(zero, negative or fractional dimensions, over 1024 threads, or out-of-range "
            "registers/shared memory): their occupancy, waves and tails are not computed"
        )
    return notes


def _repeated_ops(ops: pd.DataFrame) -> int:
    """Ops equal to an earlier op in device, stream, start and end. ``ops`` is sorted by
    (device, start, end), so such repeats sit next to each other: only those runs are
    compared (no hash of the whole table)."""
    d, s, e = (ops[c].to_numpy() for c in ("device", "start", "end"))
    same = (d[1:] == d[:-1]) & (s[1:] == s[:-1]) & (e[1:] == e[:-1])
    if not same.any():
        return 0
    rows = np.unique(np.concatenate([np.flatnonzero(same), np.flatnonzero(same) + 1]))
    return int(ops.iloc[rows].duplicated(["device", "stream", "start", "end"]).sum())


def slow_host_ops(trace) -> list[str]:
    """A warning when the trace's metadata-only host ops (thresholds.yaml ``slow_host_ops``:
    aten::view, aten::as_strided) take long at the median: the profiler's own cost or a
    loaded CPU stretched every host op, so the host's share of the idle is overstated."""
    t = load_yaml("thresholds.yaml")["slow_host_ops"]
    ops = trace.cpu_ops
    if ops.empty:
        return []
    names = ops["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes = names.cat.categories.get_indexer(t["ops"])
        mine = np.isin(names.cat.codes.to_numpy(), codes[codes >= 0])
    else:
        mine = names.isin(t["ops"]).to_numpy()
    calls = int(mine.sum())
    if calls < t["min_calls"]:
        return []
    took = ops["end"].to_numpy()[mine] - ops["start"].to_numpy()[mine]
    median = float(np.median(took))
    if median < t["median_ns"]:
        return []
    return [
        f"host ops look slowed: {' / '.join(t['ops'])} (they only change tensor metadata) take "
        f"{median / 1e3:.1f} us at the median over {calls:,} calls (0.4-4.5 us in other "
        "PyTorch traces): the profiler's own cost (record_shapes, with_stack, profile_memory) "
        "or a loaded CPU slowed the host; launch overhead, host work and their estimated "
        "savings are upper bounds for a run without it"
    ]
