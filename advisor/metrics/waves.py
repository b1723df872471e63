"""Wave quantization per launch and per kernel group.

For a non-persistent launch: slots = SMs * CTAs/SM, waves = grid blocks / slots. With
uniform CTA times it lasts ceil(waves) waves, so the idle share of the GPU over the launch
is tail = 1 - waves / ceil(waves). For launches with at least one full wave, tail * duration
is the tail idle time; waves < 1 is an under-filled single wave and tail * duration is its
under-fill idle time, reported apart. Persistent kernels (classify.yaml names, grid <=
slots) loop over tiles themselves: their grid does not quantize, so they get no tail.
Communication kernels (classify.yaml comm_kernels) size their grids to channels and are not
judged either.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.data import names_in
from advisor.metrics.occupancy import kernel_occupancy
from advisor.plain import plain_columns

GROUP_KEYS = [
    "device",
    "name",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers",
    "smem_per_block",
]


def launch_waves(kernels: pd.DataFrame, gpus: dict) -> pd.DataFrame:
    """Per-launch columns: grid_blocks, block_threads, duration, ctas_per_sm, limiter,
    slots, waves, tail_fraction, tail_idle_ns, underfill_idle_ns, persistent, comm,
    underfilled.

    Launches on devices without GPU facts keep NaN waves and zero tail.
    """
    occ = kernel_occupancy(kernels, gpus)
    grid = (kernels["grid_x"] * kernels["grid_y"] * kernels["grid_z"]).astype("int64")
    out = pd.DataFrame(index=kernels.index)
    out["grid_blocks"] = grid
    out["block_threads"] = (kernels["block_x"] * kernels["block_y"] * kernels["block_z"]).astype(
        "int64"
    )
    out["duration"] = (kernels["end"] - kernels["start"]).astype("int64")
    out["ctas_per_sm"] = occ["ctas_per_sm"]
    out["limiter"] = occ["limiter"]
    slots = occ["sm_count"] * occ["ctas_per_sm"]
    out["slots"] = slots.where(slots > 0)
    waves = grid / out["slots"]
    out["waves"] = waves
    named_persistent, comm, blit = names_in(
        kernels["name"], "persistent_kernels", "comm_kernels", "memory_kernels"
    )
    out["persistent"] = named_persistent & (grid <= out["slots"].fillna(0))
    full = np.ceil(waves)
    tail = (1.0 - waves / full).where(full > 0, 0.0).fillna(0.0)
    # collectives size their grids to channels, not to the machine: not judged by waves
    out["comm"] = comm
    judged = ~out["persistent"] & ~out["comm"] & ~blit  # blit: runtime copy/fill kernels
    tail = tail.where(judged, 0.0)
    out["tail_fraction"] = tail
    out["underfilled"] = (waves < 1) & judged
    idle = tail * out["duration"]
    out["tail_idle_ns"] = idle.where(~out["underfilled"], 0.0)
    out["underfill_idle_ns"] = idle.where(out["underfilled"], 0.0)
    return out


def kernel_groups(launches: pd.DataFrame, by=()) -> pd.DataFrame:
    """Aggregate launches (kernel columns plus the ``launch_waves`` columns) per (device,
    name, grid, block, registers, smem [, by...]).

    Columns: launches, total_ns, median_ns, grid_blocks, block_threads, ctas_per_sm,
    limiter, waves, tail_fraction, tail_idle_ns, underfill_idle_ns, persistent, underfilled;
    sorted by tail + under-fill idle, then total_ns, descending.
    """
    df = launches.assign(smem_per_block=launches["static_smem"] + launches["dynamic_smem"])
    keys = GROUP_KEYS + list(by)
    g = df.groupby(keys, dropna=False, sort=False, observed=True)
    out = g.agg(
        launches=("start", "size"),
        total_ns=("duration", "sum"),
        median_ns=("duration", "median"),
        grid_blocks=("grid_blocks", "first"),
        block_threads=("block_threads", "first"),
        ctas_per_sm=("ctas_per_sm", "first"),
        limiter=("limiter", "first"),
        slots=("slots", "first"),
        waves=("waves", "first"),
        tail_fraction=("tail_fraction", "first"),
        tail_idle_ns=("tail_idle_ns", "sum"),
        underfill_idle_ns=("underfill_idle_ns", "sum"),
        persistent=("persistent", "first"),
        comm=("comm", "first"),
        underfilled=("underfilled", "first"),
        demangled=("demangled", "first"),
    ).reset_index()
    out["_idle"] = out["tail_idle_ns"] + out["underfill_idle_ns"]
    out = out.sort_values(["_idle", "total_ns"], ascending=False, ignore_index=True)
    return plain_columns(out.drop(columns="_idle"))
