"""Per (region, device) of a set of communication ops, the sums the rules' range table reads
(rules/tables._regions): how many comm ops, how many collectives (comm kernels that are not
point-to-point), their time and the point-to-point kernels' time, the part of their waits for
other ranks spent in start-up (comm.startup_waits), and how often each device was the last
to arrive. All are counts and sums of whole nanoseconds, so a job's are its ranks' added up:
the client of a job of many ranks sums them rank by rank (commstore.py) instead of holding
every comm op of the job.

A region is the text of the top-level range an op was launched in ('' outside every range,
and for a missing text); devices are the analysis's ids. Sums are float64, exact while each
stays below 2**53 ns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor.metrics.comm import startup_waits
from advisor.metrics.keys import integer_group_sums
from advisor.metrics.pipeline import point_to_point

# per (region, device): comm ops, collectives, their time and the point-to-point kernels'
# (ns), the waits' start-up part (ns), and that part as an analysis of the op's device alone
# measures it (it knows no other device's steady state: before its own steady start only)
SUM_COLUMNS = ["n", "collectives", "comm_ns", "p2p_ns", "startup_wait_ns", "own_startup_wait_ns"]
_KEYS = ["region", "device"]


@dataclass
class RegionCommSums:
    """``sums``: region, device and SUM_COLUMNS, one row per (region, device) with comm ops;
    ``last``: region, device, last (a device id) and n (how many of its ops waited for
    that device as the last to arrive), one row per combination seen."""

    sums: pd.DataFrame
    last: pd.DataFrame

    def several_devices(self) -> bool:
        """Whether the comm ops ran on two devices or more (waits for other ranks can be
        measured only then)."""
        return self.sums["device"].nunique() > 1

    def per_region(self, column: str, index: pd.MultiIndex) -> pd.Series:
        """``column`` of ``sums`` at each (region, device) of ``index`` (NaN: none)."""
        return self.sums.set_index(_KEYS)[column].reindex(index)

    def most_often_last(self, index: pd.MultiIndex) -> pd.Series:
        """Per (region, device) of ``index``: the device most often last (ties: the lowest;
        NaN where none was), float32 as the ops' ``last_device`` (float64 NaN when no op
        waited); as each group's ``Series.mode().iloc[0]`` of its waiting ops' last devices."""
        t = self.last
        if t.empty:
            return pd.Series(np.nan, index=index, dtype=np.float64)
        top = t.sort_values([*_KEYS, "n", "last"], ascending=[True, True, False, True],
                            kind="stable").drop_duplicates(_KEYS)  # fmt: skip
        last = top.set_index(_KEYS)["last"].astype(np.float32)
        return last.reindex(index)

    def narrowed(self, device: int | None = None, range_text: str | None = None) -> RegionCommSums:
        """The sums of the ops on ``device`` (None: every device) launched in a range whose
        text contains ``range_text`` (None: every op, outside ranges too): the ops an
        analysis keeps when that range and device are selected (with a device, the waits'
        start-up part as that device's analysis measures it: own_startup_wait_ns)."""

        def keep(t: pd.DataFrame) -> pd.DataFrame:
            mask = np.ones(len(t), dtype=bool)
            if device is not None:
                mask &= t["device"].to_numpy() == device
            if range_text:
                mask &= t["region"].str.contains(range_text, regex=False).to_numpy(bool)
            return t[mask].reset_index(drop=True)

        sums = keep(self.sums)
        if device is not None:
            sums["startup_wait_ns"] = sums["own_startup_wait_ns"]
        return RegionCommSums(sums, keep(self.last))

    @staticmethod
    def added(parts: list[RegionCommSums]) -> RegionCommSums:
        """The sums of several sets of comm ops (the ranks of a job) added up."""
        sums = [p.sums for p in parts if len(p.sums)]
        last = [p.last for p in parts if len(p.last)]
        if not sums:
            return empty_sums()
        s = pd.concat(sums, ignore_index=True).groupby(_KEYS, as_index=False, sort=True).sum()
        if not last:
            return RegionCommSums(s, empty_sums().last)
        t = pd.concat(last, ignore_index=True)
        t = t.groupby([*_KEYS, "last"], as_index=False, sort=True)["n"].sum()
        return RegionCommSums(s, t)


def empty_sums() -> RegionCommSums:
    """No comm ops."""
    keys = {"region": pd.Series(dtype=object), "device": pd.Series(dtype=np.int64)}
    sums = pd.DataFrame({**keys, **{c: pd.Series(dtype=np.float64) for c in SUM_COLUMNS}})
    ints = {c: pd.Series(dtype=np.int64) for c in ("last", "n")}
    return RegionCommSums(sums, pd.DataFrame({**keys, **ints}))


def region_comm_sums(ops: pd.DataFrame, steady_start: pd.Series) -> RegionCommSums:
    """The RegionCommSums of the comm ops among ``ops`` (columns op_class, kind, name, start,
    end, device, region, wait_ns, last_device); ``steady_start``: per device id, its steady
    state's first ns (startup_waits)."""
    comm = ops["op_class"].eq("comm").to_numpy()
    rows = np.flatnonzero(comm)
    if rows.size == 0:
        return empty_sums()
    c = ops if rows.size == len(ops) else ops.iloc[rows]
    codes, texts = region_codes(c["region"])
    device = c["device"].to_numpy()
    start = c["start"].to_numpy()
    took = np.subtract(c["end"].to_numpy(), start, dtype=np.float64)
    p2p = point_to_point(c)
    wait = c["wait_ns"].to_numpy()
    waiting = np.flatnonzero(wait > 0)
    last = c["last_device"].to_numpy()
    startup, own = np.zeros(len(c)), np.zeros(len(c))
    at = (start[waiting], wait[waiting], device[waiting])
    startup[waiting] = startup_waits(*at, last[waiting], steady_start)
    own[waiting] = startup_waits(*at, np.full(len(waiting), np.nan), steady_start)
    sums = integer_group_sums(
        {"region": codes, "device": device},
        {"n": np.ones(len(c), dtype=bool), "collectives": ~p2p, "comm_ns": took,
         "p2p_ns": np.where(p2p, took, 0.0), "startup_wait_ns": startup,
         "own_startup_wait_ns": own},
    )  # fmt: skip
    sums["region"] = texts[sums["region"].to_numpy()]
    named = waiting[~np.isnan(last[waiting].astype(np.float64))]
    counts = integer_group_sums(
        {"region": codes[named], "device": device[named], "last": last[named].astype(np.int64)},
        {"n": np.ones(len(named), dtype=bool)},
    )  # fmt: skip
    counts["region"] = texts[counts["region"].to_numpy()] if len(counts) else counts["region"]
    return RegionCommSums(sums, counts.astype({"n": np.int64}))


def region_codes(region: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(an int32 code per row, the texts by code) of a region column; missing is ''."""
    if not isinstance(region.dtype, pd.CategoricalDtype):
        codes, texts = pd.factorize(region.astype(object).fillna("").to_numpy())
        return codes.astype(np.int32), np.asarray(texts, dtype=object)
    texts = np.asarray(region.cat.categories, dtype=object)
    empty = np.flatnonzero(texts == "")
    if not len(empty):
        texts, empty = np.append(texts, ""), np.array([len(texts)])
    codes = region.cat.codes.to_numpy().astype(np.int32)
    codes[codes < 0] = empty[0]
    return codes, texts
