"""The Trace's tables finished once read: GPU work given its launching process and a device,
integer columns typed as the Nsight reader types them, ROCm work-item grids as workgroups."""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.trace.model import Trace

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
    "cpu_ops": {"tid": "int64", "pid": "int32"},
}  # fmt: skip
# ROCm launch calls whose grid is the global work size (work-items), not workgroups
_WORK_ITEM_GRID_CALLS = ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")


def host_pids(trace: Trace) -> None:
    """GPU events carry the device as their pid: give them their launching process (by
    correlation id, the first call holding it; the trace's one process when a launch call is
    missing)."""
    api = trace.api
    pids = api["pid"].dropna().unique() if len(api) else np.array([])
    fallback = float(pids[0]) if len(pids) == 1 else np.nan
    corr = api["correlation"].to_numpy(dtype=np.float64) if len(api) else np.zeros(0)
    known = ~np.isnan(corr)
    keys, first = np.unique(corr[known], return_index=True)
    by_corr = api["pid"].to_numpy(dtype=np.float64)[np.flatnonzero(known)[first]]
    for name in ("kernels", "memcpy", "memset"):
        table = getattr(trace, name)
        if len(table):
            c = table["correlation"].to_numpy(dtype=np.float64)
            pid = np.full(len(c), fallback)
            if len(keys):
                at = np.minimum(np.searchsorted(keys, c), len(keys) - 1)
                found = keys[at] == c
                pid[found] = by_corr[at[found]]
            pid = np.where(np.isnan(pid), fallback, pid)  # (a call without a pid)
            table["pid"] = np.where(np.isnan(pid), 0.0, pid)


def known_devices(trace: Trace) -> None:
    """GPU events with neither ``args.device`` nor a numeric pid: counted on device 0, and
    the trace says so."""
    for name in ("kernels", "memcpy", "memset"):
        table = getattr(trace, name)
        missing = table["device"].isna() if len(table) else pd.Series(dtype=bool)
        if missing.any():
            table.loc[missing, "device"] = 0.0
            trace.warnings.append(
                f"{int(missing.sum())} {name} events without a device (no args.device, no "
                "numeric pid): counted on device 0"
            )


def tidy(trace: Trace) -> None:
    """Integer columns as integers (where no value is missing), like the Nsight reader's, so
    that nothing downstream sees the difference (names are categorical already)."""
    for name, cols in _INT_COLUMNS.items():
        table = getattr(trace, name)
        for col, dtype in cols.items():
            if col in table and len(table):
                as_int = _as_int(table[col], np.dtype(dtype))
                if as_int is not None:
                    table[col] = as_int


def _as_int(col: pd.Series, dtype: np.dtype) -> np.ndarray | None:
    """``col`` as ``dtype`` where every value is an integer that ``dtype`` holds, else None
    (the conversion would lose something: a missing, fractional or out-of-range value keeps
    the column as it is, for the quality check to see)."""
    if not pd.api.types.is_numeric_dtype(col):
        return None
    v = (
        col.to_numpy()
        if isinstance(col.dtype, np.dtype)
        else col.to_numpy(np.float64, na_value=np.nan)
    )
    info = np.iinfo(dtype)
    lo, hi = v.min(), v.max()  # (NaN: NaN, and no comparison holds)
    if not (lo >= info.min and hi <= info.max):
        return None
    out = v.astype(dtype)
    # (in range: equal after the conversion exactly where each value is an integer)
    return out if v.dtype.kind != "f" or np.array_equal(out, v) else None


def workgroups(trace: Trace) -> None:
    """Grids of kernels launched by hipExtModuleLaunchKernel (Tensile/hipBLASLt GEMMs) count
    work-items, as the call's arguments do: converted to workgroups (ceil(grid / block) per
    dimension), as every other kernel's grid counts them."""
    api, k = trace.api, trace.kernels
    if api.empty or k.empty or "correlation" not in api:
        return
    calls = api[api["name"].isin(_WORK_ITEM_GRID_CALLS)]
    if calls.empty:
        return
    rows = np.flatnonzero(k["correlation"].isin(set(calls["correlation"].dropna())).to_numpy())
    if rows.size == 0:
        return
    for axis in "xyz":
        grid = k[f"grid_{axis}"].to_numpy(np.float64)[rows]
        block = k[f"block_{axis}"].to_numpy(np.float64)[rows]
        col = k[f"grid_{axis}"].to_numpy(np.float64).copy()
        col[rows] = np.where(block >= 1, np.ceil(grid / np.maximum(block, 1)), grid)
        k[f"grid_{axis}"] = col.astype(k[f"grid_{axis}"].dtype) if np.isfinite(col).all() else col
    trace.sources.append(
        f"{rows.size:,} kernels launched by hipExtModuleLaunchKernel: their grid (work-items, "
        "as that call takes it) converted to workgroups"
    )
