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

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from advisor.data import names_in
from advisor.metrics.ahead import analysis_threads, beside
from advisor.metrics.grouping import groups_and_firsts, row_groups
from advisor.metrics.keys import (
    first_appearance_codes,
    first_max_rows,
    group_medians,
    pack_one,
    slot_sums,
)
from advisor.metrics.occupancy import kernel_occupancy
from advisor.plain import plain_array
from advisor.trace.quality import impossible_launches, unrecorded_launches

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
# everything the per-configuration wave columns depend on
CONFIG_KEYS = ["device", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
               "registers", "sgpr", "static_smem", "dynamic_smem", "smem_executed"]  # fmt: skip
# what a launch configuration (wave_configs' id) stands for besides the device and the name:
# the configurations table holds them once per configuration, the launches do not
LAUNCH_CONFIG_COLUMNS = CONFIG_KEYS[2:]
# per-configuration columns (wave_configs), in kernel-group column order
CONFIG_COLUMNS = ["grid_blocks", "block_threads", "ctas_per_sm", "limiter", "slots", "waves",
                  "tail_fraction", "persistent", "comm", "underfilled"]  # fmt: skip
# what wave_configs computes per configuration: those and the quality flags
CONFIG_FACTS = [*CONFIG_COLUMNS, "impossible", "unrecorded"]


def wave_configs(kernels: pd.DataFrame, gpus: dict, taken: bool = False
                 ) -> tuple[np.ndarray, pd.DataFrame]:  # fmt: skip
    """(config id per launch, one row per distinct launch configuration): the configuration's
    own LAUNCH_CONFIG_COLUMNS (those the kernels table has), then CONFIG_COLUMNS,
    ``impossible`` and ``unrecorded`` (trace.quality), computed once per configuration (a
    million launches hold a few hundred). Launches on devices without GPU facts keep NaN
    waves and zero tail. ``taken``: ``kernels`` is the caller's to give away, each launch
    configuration column taken out of it once numbered (grouping.groups_and_firsts)."""
    cols = [c for c in CONFIG_KEYS if c in kernels]
    # (each configuration's first launch)
    ids, k = groups_and_firsts(kernels, cols, LAUNCH_CONFIG_COLUMNS if taken else ())
    impossible = impossible_launches(k)  # damaged fields: no occupancy, no waves
    unrecorded = unrecorded_launches(k)  # no configuration in the trace: the same
    occ = kernel_occupancy(k[~impossible & ~unrecorded], gpus).reindex(k.index)
    # products in float64: damaged dimensions must not overflow int64 (clamped at 2^62)
    grid = np.minimum(_product(k, "grid"), 2.0**62)
    out = pd.DataFrame(index=k.index)
    out["grid_blocks"] = grid.fillna(0).astype("int64")  # 0: unknown (a missing dimension)
    out["block_threads"] = np.minimum(_product(k, "block"), 2.0**62).fillna(0).astype("int64")
    out["ctas_per_sm"] = occ["ctas_per_sm"]
    out["limiter"] = occ["limiter"]
    slots = occ["sm_count"] * out["ctas_per_sm"]
    out["slots"] = slots.where(slots > 0)
    waves = grid / out["slots"]
    out["waves"] = waves
    named_persistent, comm, blit = names_in(
        k["name"], "persistent_kernels", "comm_kernels", "memory_kernels"
    )
    full = np.ceil(waves)
    tail = (1.0 - waves / full).where(full > 0, 0.0).fillna(0.0)
    out["persistent"] = named_persistent & (grid <= out["slots"].fillna(0))
    # collectives size their grids to channels, not to the machine: not judged by waves
    out["comm"] = comm
    judged = ~out["persistent"] & ~out["comm"] & ~blit  # blit: runtime copy/fill kernels
    out["tail_fraction"] = tail.where(judged, 0.0)
    out["underfilled"] = (waves < 1) & judged
    out["impossible"] = impossible  # kept out of the kernel groups (CONFIG_COLUMNS)
    out["unrecorded"] = unrecorded
    own = [c for c in LAUNCH_CONFIG_COLUMNS if c in k]
    return ids.astype(np.int32, copy=False), pd.concat([k[own], out[CONFIG_FACTS]], axis=1)


def without_configuration(kernels: pd.DataFrame) -> pd.DataFrame:
    """The kernels table without the LAUNCH_CONFIG_COLUMNS (the launches' table: their
    ``config`` id finds them in wave_configs' table, once per configuration)."""
    return kernels.drop(columns=[c for c in LAUNCH_CONFIG_COLUMNS if c in kernels])


def with_configuration(launches: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """``launches`` (with their ``config`` ids) with their configuration's
    LAUNCH_CONFIG_COLUMNS from ``configs`` (wave_configs), dtypes kept."""
    ids = launches["config"].to_numpy()
    own = [c for c in LAUNCH_CONFIG_COLUMNS if c in configs]
    return launches.assign(**{c: configs[c].iloc[ids].set_axis(launches.index) for c in own})


def _product(k: pd.DataFrame, prefix: str) -> pd.Series:
    """x * y * z of the grid or block dimensions, as float64."""
    return k[f"{prefix}_x"].astype("float64") * k[f"{prefix}_y"] * k[f"{prefix}_z"]


def launch_durations(launches: pd.DataFrame) -> np.ndarray:
    """Per launch (kernel row): its GPU time, end - start (ns, int64; a ``duration`` column
    where the table has one). Computed where it is needed, not kept as a column (8 bytes a
    launch)."""
    if "duration" in launches:
        return launches["duration"].to_numpy(np.int64)
    return launches["end"].to_numpy(np.int64) - launches["start"].to_numpy(np.int64)


def launch_idle(duration: np.ndarray, ids: np.ndarray, configs: pd.DataFrame) -> dict:
    """Per launch (``duration``: its GPU time, ns; ``ids``: its configuration's row in
    ``configs``): tail_idle_ns (tail share x duration, launches with at least one full wave)
    and underfill_idle_ns (the same for under-filled single waves), ns (float64)."""
    idle = configs["tail_fraction"].to_numpy(np.float64)[ids]
    idle *= duration  # (in place: a launch-long array less at once, the same products)
    under = configs["underfilled"].to_numpy(bool)[ids]
    underfill = np.where(under, idle, 0.0)
    idle[under] = 0.0
    return {"tail_idle_ns": idle, "underfill_idle_ns": underfill}


def launch_waves(kernels: pd.DataFrame, gpus: dict) -> pd.DataFrame:
    """Per-launch columns: CONFIG_COLUMNS (grid_blocks, block_threads, ctas_per_sm,
    limiter, slots, waves, tail_fraction, persistent, comm, underfilled) plus duration,
    tail_idle_ns and underfill_idle_ns (launch_idle)."""
    ids, configs = wave_configs(kernels, gpus)
    out = configs[CONFIG_FACTS].iloc[ids].set_axis(kernels.index)
    out["duration"] = launch_durations(kernels)
    for col, values in launch_idle(out["duration"].to_numpy(), ids, configs).items():
        out[col] = values
    return out


def kernel_groups(
    launches: pd.DataFrame,
    configs: pd.DataFrame,
    by=(),
    worst: bool = True,
    extra=None,
    read_at: Callable[[str, np.ndarray], Any] | None = None,
) -> pd.DataFrame:
    """Aggregate launches (kernel columns plus ``config`` ids into ``configs``) per (device,
    name, grid, block, registers, smem [, by...]).
    ``read_at(col, rows)``: the launches' ``device`` and ``start`` at row positions, for a
    table without those columns (read at each group's first and worst launch only); default:
    the table's own (a ``duration`` column then stands for end - start: launch_durations).

    Columns: launches, total_ns, median_ns, the CONFIG_COLUMNS of the group's first launch,
    tail_idle_ns, underfill_idle_ns (the launch_idle of its launches: group_idle_sums),
    worst_start_ns (with ``worst``: the start of the launch with the most quantization
    idle, else the longest; NaN without), demangled, and the ``extra`` launch columns
    reduced as it says (column -> a pandas aggregation, NaN skipped: the hardware
    counters); sorted by tail + under-fill idle, then total_ns, descending.
    """
    keys = GROUP_KEYS + list(by)
    read = read_at or (lambda col, rows: launches[col].array.take(rows))
    group, first = _launch_groups(launches, configs, by, read)
    df = _keyed(launches, configs, first, read, [*by, "demangled"])
    duration = launch_durations(launches)
    launch_config = launches["config"].to_numpy()
    extra = dict(extra or {})
    n = len(first)
    # the columns made as arrays and the table built once, its rows in order (not a column
    # inserted, then the whole table sorted and copied again, at a time)
    cols: dict = {k: df[k].array for k in keys}
    cols["launches"] = np.bincount(group, minlength=n)
    cols["total_ns"] = slot_sums(group, duration, cols["launches"])  # (int64: exact)
    # (on another thread while the medians are made here)
    idle_sums = beside(lambda: group_idle_sums(group, first, launch_config, duration,
                                               cols["total_ns"], configs),
                       analysis_threads())  # fmt: skip
    cols["median_ns"] = group_medians(group, duration, n)
    config = df["config"].to_numpy()
    for col in CONFIG_COLUMNS[:7]:
        cols[col] = configs[col].array.take(config)
    # the start of each group's worst launch (where a finding points)
    worst_rows = _worst_launch(launch_config, configs, group, duration) if worst else None
    cols.update(idle_sums.result())
    for col in CONFIG_COLUMNS[7:]:
        cols[col] = configs[col].array.take(config)
    if worst_rows is not None:
        cols["worst_start_ns"] = np.asarray(read("start", worst_rows))
    else:
        cols["worst_start_ns"] = np.full(n, np.nan)
    cols["demangled"] = df["demangled"].to_numpy()
    # most of its launches come from CPU ops that are no matrix multiply
    vetoed = launches["op_not_gemm"].to_numpy(bool) if "op_not_gemm" in launches else None
    cols["op_not_gemm"] = (slot_sums(group, vetoed, cols["launches"]) * 2 > cols["launches"]
                           if vetoed is not None else np.zeros(n, dtype=bool))  # fmt: skip
    if extra:
        reduced = launches[list(extra)].groupby(group, sort=True).agg(extra)
        for col in extra:
            cols[col] = reduced[col].to_numpy()
    order = _group_order(cols["tail_idle_ns"] + cols["underfill_idle_ns"], cols["total_ns"],
                         np.asarray(cols["device"]))  # fmt: skip
    # (in row order; categorical columns as plain object columns: plain_columns)
    return pd.DataFrame({c: plain_array(v.take(order)) for c, v in cols.items()})


def order_kernel_groups(groups: pd.DataFrame) -> pd.DataFrame:
    """kernel_groups' row order: tail + under-fill idle, then total_ns, descending; ties
    (the same kernel on several devices or ranges) by device, then in order of first launch
    (stable), whatever order the trace's rows came in."""
    idle = (groups["tail_idle_ns"] + groups["underfill_idle_ns"]).to_numpy()
    order = _group_order(idle, groups["total_ns"].to_numpy(), groups["device"].to_numpy())
    return groups.take(order).reset_index(drop=True)


def _group_order(idle: np.ndarray, total: np.ndarray, device: np.ndarray) -> np.ndarray:
    """Row positions in kernel_groups' order (order_kernel_groups): as pandas' stable sort
    by idle and total descending, device ascending (lexsort is stable; NaN sorts last in
    either direction)."""
    return np.lexsort((device, -np.asarray(total, np.float64), -np.asarray(idle, np.float64)))


def group_idle_sums(
    group: np.ndarray,
    first: np.ndarray,
    config: np.ndarray,
    duration: np.ndarray,
    total: np.ndarray,
    configs: pd.DataFrame,
    block: int = 1 << 20,
) -> dict[str, np.ndarray]:
    """Per group (``group``: each launch's id 0..n-1; ``first``: each group's first launch;
    ``config``: each launch's configuration, rows of ``configs``; ``duration``: ns;
    ``total``: each group's duration, ns): the launch_idle of its launches, tail_idle_ns and
    underfill_idle_ns (ns, float64). A launch idles its configuration's tail share of its
    duration, so a group idles, per configuration of its launches, that share of their total
    duration (summed exactly in int64: one rounding per configuration, not per launch);
    launches of an unknown share (NaN) add nothing. Most groups have one configuration (it
    fixes every group key but the ``by`` columns and how shared memory is split): the
    launches on another are found ``block`` at a time."""
    share = configs["tail_fraction"].to_numpy(np.float64)
    under = configs["underfilled"].to_numpy(bool)
    main = config[first]  # (per group: its first launch's configuration)
    parts = [np.zeros(0, np.int64)]
    for b in range(0, len(config), block):
        at = slice(b, b + block)
        parts.append(b + np.flatnonzero(config[at] != main[group[at]]))
    other = np.concatenate(parts)
    on_main = total.astype(np.int64)
    pair_group, pair_config, pair_ns = (np.zeros(0, np.int64),) * 3
    if len(other):  # (their durations moved from the group's first configuration to theirs)
        g, c, d = group[other].astype(np.int64), config[other].astype(np.int64), duration[other]
        np.subtract.at(on_main, g, d)
        pairs, at = np.unique(g * len(share) + c, return_inverse=True)
        pair_group, pair_config = pairs // len(share), pairs % len(share)
        pair_ns = np.zeros(len(pairs), dtype=np.int64)
        np.add.at(pair_ns, at, d)

    def idle(pick: np.ndarray, config: np.ndarray, ns: np.ndarray) -> np.ndarray:
        """Each (configuration, ns)'s share of it where ``pick`` holds, else 0; 0 for NaN."""
        return np.nan_to_num(np.where(pick[config], share[config], 0.0) * ns, nan=0.0)

    out = {}
    for name, pick in (("tail_idle_ns", ~under), ("underfill_idle_ns", under)):
        out[name] = idle(pick, main, on_main)
        if len(pair_group):
            np.add.at(out[name], pair_group, idle(pick, pair_config, pair_ns))
    return out


def _worst_launch(
    config: np.ndarray, configs: pd.DataFrame, group: np.ndarray, duration: np.ndarray
) -> np.ndarray:
    """Per group (ids 0..n-1): the row position of its worst launch, the one with the most
    quantization idle (its configuration's tail share of its duration: launch_idle's tail
    or under-fill), or the longest (``duration``: launch_durations) when none idles."""
    # idle launches rank above every non-idle one (2**50 ns = 13 days > any launch; float64
    # still resolves 1/4 ns there); the others score their duration. One array of the
    # launches' length and a mask (no row numbers, no copy of the durations)
    score = configs["tail_fraction"].to_numpy(np.float64)[config]
    score *= duration  # (launch_idle's product: tail + under-fill, one of them 0)
    idles = score > 0
    np.add(score, 2.0**50, out=score, where=idles)
    np.copyto(score, duration, where=~idles)
    del idles
    return first_max_rows(group, score)


def _smem_per_block(launches: pd.DataFrame) -> pd.Series:
    """Static + dynamic shared memory per block (B); int64 unless a damaged trace lost one."""
    smem = launches["static_smem"].astype("float64") + launches["dynamic_smem"]
    return smem.astype("int64") if smem.notna().all() else smem


def _keyed(launches: pd.DataFrame, configs: pd.DataFrame, rows: np.ndarray,
           read: Callable[[str, np.ndarray], Any], also=()) -> pd.DataFrame:  # fmt: skip
    """The launches at positions ``rows`` (index 0..n-1): their GROUP_KEYS (the device
    through ``read``, the configuration's columns through ``config``, smem_per_block from
    its static and dynamic shared memory), ``config`` and the ``also`` launch columns;
    dtypes kept. Only those rows of those columns are gathered."""
    data = {"device": read("device", rows)}
    data |= {c: launches[c].array.take(rows) for c in ("name", "config", *also)}
    ids = np.asarray(data["config"])
    for c in GROUP_KEYS[2:-1]:
        data[c] = configs[c].array.take(ids)
    smem = {c: configs[c].array.take(ids) for c in ("static_smem", "dynamic_smem")}
    data["smem_per_block"] = _smem_per_block(pd.DataFrame(smem)).to_numpy()
    return pd.DataFrame(data)


def _launch_groups(
    launches: pd.DataFrame, configs: pd.DataFrame, by, read: Callable[[str, np.ndarray], Any]
) -> tuple[np.ndarray, np.ndarray]:
    """(group id per launch, row position of each group's first launch) for GROUP_KEYS plus
    ``by``, ids in order of first appearance. A launch configuration (``config``) fixes
    every GROUP_KEYS value, so the configurations present are grouped first (a few hundred
    rows) and the launches only combine that group with the ``by`` columns' codes."""
    config = launches["config"].to_numpy()
    if len(config) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    one = first_appearance_codes(config)[1]  # a launch per config
    per_config = np.zeros(int(config.max()) + 1, dtype=np.int64)
    per_config[config[one]] = row_groups(_keyed(launches, configs, one, read), GROUP_KEYS)
    key = per_config[config]
    if by:  # (one key of the group and the columns' codes, numbered once)
        key = pack_one(key, *(_column_codes(launches[col]) for col in by))
    return first_appearance_codes(key)


def _column_codes(column: pd.Series) -> np.ndarray:
    """Integers equal where the column's values are (NaN: one value of its own): a
    categorical's codes, an integer column itself, else its values factorized."""
    values = column.array
    if isinstance(values, pd.Categorical):
        return values.codes
    data = column.to_numpy()
    return data if data.dtype.kind in "iub" else pd.factorize(data)[0]
