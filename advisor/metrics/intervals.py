"""Vectorized interval algebra on [start, end) nanosecond intervals (numpy, no Python loops)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.metrics.keys import pack_one

Segments = tuple[np.ndarray, np.ndarray]


def union(starts, ends) -> Segments:
    """Merge intervals into sorted, disjoint segments (touching intervals merge)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    if not keep.all():  # (no copies when every interval is non-empty)
        s, e = s[keep], e[keep]
    if s.size == 0:
        return s, e
    if s.size > 1 and not (s[1:] >= s[:-1]).all():  # device ops arrive sorted already
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    idx = np.flatnonzero(new)
    seg_end = np.append(reach[idx[1:] - 1], reach[-1])
    return s[idx], seg_end


def length(segments: Segments) -> int:
    """Total covered time of disjoint segments (ns)."""
    s, e = segments
    return int((e - s).sum())


def overlap(a: Segments, b: Segments) -> int:
    """|A ∩ B| for two disjoint segment sets: |A| + |B| - |A ∪ B| (ns)."""
    both = union(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    return length(a) + length(b) - length(both)


def clip(segments: Segments, lo: int, hi: int) -> Segments:
    """Segments cut to the window [lo, hi)."""
    s = np.clip(segments[0], lo, hi)
    e = np.clip(segments[1], lo, hi)
    keep = e > s
    return s[keep], e[keep]


class Coverage:
    """Disjoint sorted segments ready for many window queries: their running total of
    covered time (ns) is summed once, so that each query is two binary searches (callers
    that ask block after block keep one Coverage rather than summing every time)."""

    __slots__ = ("_cum", "_end", "_start")

    def __init__(self, segments: Segments) -> None:
        self._start, self._end = segments
        self._cum = np.concatenate([[0], np.cumsum(self._end - self._start)])

    def within(self, lo, hi) -> np.ndarray:
        """For each window [lo_i, hi_i), the time the segments cover in it (ns; 0 where
        hi_i <= lo_i)."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        if self._end.size == 0:
            return np.zeros(lo.shape, dtype=np.int64)
        return np.maximum(self._before(hi) - self._before(lo), 0)

    def _before(self, t: np.ndarray) -> np.ndarray:
        """Time covered in (-inf, t): the segments ending before t plus a partial one."""
        k = np.searchsorted(self._start, t, side="right")  # segments starting at or before t
        last = np.maximum(k - 1, 0)
        partial = np.clip(np.minimum(t, self._end[last]) - self._start[last], 0, None)
        return np.where(k > 0, self._cum[last] + partial, 0)


class GapCoverage(Coverage):
    """Coverage of disjoint segments sorted by end given as their ends and lengths (the
    idle gaps before a device's ops: ``[start - gap_ns, start)``), read from those two
    arrays as they are (views of the ops' columns: no array of the segments' starts is
    made). Its running total of covered time (ns) is summed once; ``within`` answers as
    Coverage's of the same segments."""

    __slots__ = ("_length",)

    def __init__(self, end: np.ndarray, length: np.ndarray) -> None:  # (no super: no starts)
        self._end, self._length = end, length
        self._cum = np.zeros(len(end) + 1, dtype=np.int64)
        np.cumsum(length, out=self._cum[1:])

    def _before(self, t: np.ndarray) -> np.ndarray:
        """Time covered in (-inf, t): the segments ending at or before t, plus what the
        next one (ending after t) covers before t."""
        k = np.searchsorted(self._end, t, side="right")
        nxt = np.minimum(k, len(self._end) - 1)
        begins = self._end[nxt] - self._length[nxt]
        partial = np.where(k < len(self._end), np.clip(t - begins, 0, None), 0)
        return self._cum[k] + partial


def covered_in_windows(segments: Segments, lo, hi) -> np.ndarray:
    """For each window [lo_i, hi_i), the time the disjoint ``segments`` cover in it (ns; 0
    where hi_i <= lo_i): a prefix sum over segment lengths and binary search,
    O((n + w) log n). For many calls on the same segments keep a ``Coverage``."""
    return Coverage(segments).within(lo, hi)


def run_heads(*keys) -> np.ndarray:
    """Row positions where a run of equal ``keys`` (arrays of one length) begins."""
    n = len(keys[0])
    change = np.zeros(n, dtype=bool)
    if n:
        change[0] = True
    for k in keys:
        k = np.asarray(k)
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


def grouped_order(*keys) -> np.ndarray:
    """Stable order that brings rows of equal ``keys`` together, groups in ascending key
    order (as ``np.lexsort`` of the keys, last key primary, rows keeping their order within
    a group). With few distinct key combinations (the usual case: devices, streams) the
    combinations get small codes and a radix sort orders them in linear time."""
    packed = pack_one(*reversed(keys), fallback=None)  # the last key is the primary one
    if packed is None:  # too many combinations to pack
        return np.lexsort(keys)
    codes, uniques = pd.factorize(packed, sort=True)
    if len(uniques) <= np.iinfo(np.int16).max:
        codes = codes.astype(np.int16)  # numpy sorts 16-bit integers by radix
    return np.argsort(codes, kind="stable")


def distinct_in_runs(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Per run of rows (starting at ``first``; ``values`` sorted within each run): how many
    distinct values it holds (each NaN counts alone)."""
    new = np.ones(len(values), dtype=bool)
    np.not_equal(values[1:], values[:-1], out=new[1:])  # NaN != NaN: each NaN is new
    new[first] = True
    return np.add.reduceat(new, first, dtype=np.int64)


def reach_before(end, keys, fill=None) -> np.ndarray:
    """Per row of a table sorted by its group ``keys`` (an array or list of arrays; each
    group's rows contiguous) and by start within a group: the latest end of the earlier
    rows of its group (int64 ns; a group's first row gets ``fill`` there, an array of the
    rows' values, or the smallest int64 when None). ``start - reach_before`` is the idle
    time before a row when positive; ``reach_before >= end`` means the row is nested in an
    earlier one. Vectorized: one running maximum over all groups, each group offset above
    the previous one so that maxima never cross groups."""
    keys = keys if isinstance(keys, list) else [keys]
    e = np.asarray(end, dtype=np.int64)
    n = len(e)
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    first = run_heads(*keys)
    lo = int(e.min())
    span = int(e.max()) - lo + 1
    if span * len(first) < 2**62:  # (in place: a few arrays of n, not a dozen)
        offset = np.zeros(n, dtype=np.int64)
        offset[first[1:]] = span
        np.cumsum(offset, out=offset)  # group g starts g * span higher
        reach = e - lo
        reach += offset
        np.maximum.accumulate(reach, out=reach)
        reach -= offset
        reach += lo
        del offset
    else:  # timestamps too far apart to offset: one running maximum per group
        reach = np.concatenate([np.maximum.accumulate(x) for x in np.split(e, first[1:])])
    out[1:] = reach[:-1]
    del reach
    out[first] = np.iinfo(np.int64).min if fill is None else np.asarray(fill)[first]
    return out
