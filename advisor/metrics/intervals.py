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
    if s.size > 1 and not (s[1:] >= s[:-1]).all():  # device ops arrive sorted already
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    return _merged(s, e)


UNION_BLOCK = 1 << 20  # intervals merged at a time by union and union_of_sorted


def union_of_sorted(starts: np.ndarray, ends: np.ndarray, mask: np.ndarray | None = None,
                    block: int | None = None) -> Segments | None:  # fmt: skip
    """``union`` of the intervals (``starts``, ``ends``; those where ``mask`` holds)
    ``block`` of them at a time (default UNION_BLOCK), the reach of every earlier one
    carried from block to block: temporaries of a block, not of the table (10M ops: 0.5 GB
    otherwise). None where the starts are not in ascending order (``union`` sorts them)."""
    if len(starts) > 1 and not (starts[1:] >= starts[:-1]).all():
        return None
    return _merged(starts, ends, mask, block)


def _merged(starts: np.ndarray, ends: np.ndarray, mask: np.ndarray | None = None,
            block: int | None = None) -> Segments:  # fmt: skip
    """union_of_sorted of intervals already in start order (empty ones dropped)."""
    block = block or UNION_BLOCK
    heads: list[np.ndarray] = []  # per block: the starts of the segments that begin in it
    closes: list[np.ndarray] = []  # and the ends of the segments those close
    reach = None  # the latest end of every earlier interval
    for b in range(0, len(starts), block):
        s = np.asarray(starts[b : b + block], dtype=np.int64)
        e = np.asarray(ends[b : b + block], dtype=np.int64)
        keep = e > s if mask is None else mask[b : b + block] & (e > s)
        if not keep.all():
            s, e = s[keep], e[keep]
        if s.size == 0:
            continue
        run = np.maximum.accumulate(e)
        if reach is not None:
            np.maximum(run, reach, out=run)
        new = np.empty(s.size, dtype=bool)
        new[0] = reach is None or s[0] > reach
        np.greater(s[1:], run[:-1], out=new[1:])
        at = np.flatnonzero(new)
        heads.append(s[at])
        inner = at[at > 0]
        closes.append(run[inner - 1] if reach is None or not new[0]
                      else np.r_[np.int64(reach), run[inner - 1]])  # fmt: skip
        reach = int(run[-1])
    if reach is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    closes.append(np.array([reach], dtype=np.int64))  # (the last segment's end)
    return np.concatenate(heads), np.concatenate(closes)


def length(segments: Segments) -> int:
    """Total covered time of disjoint segments (ns)."""
    s, e = segments
    return int((e - s).sum())


def overlap(a: Segments, b: Segments) -> int:
    """|A ∩ B| for two disjoint segment sets: |A| + |B| - |A ∪ B| (ns)."""
    both = union(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    return length(a) + length(b) - length(both)


def difference(a: Segments, b: Segments) -> Segments:
    """The time of segments ``a`` that segments ``b`` do not cover, as sorted disjoint
    segments (``a`` and ``b`` each sorted and disjoint, as ``union`` gives them): each
    segment of ``a`` cut by the segments of ``b`` that meet it. O((|a| + k) log |b|) for k
    segments of ``b`` inside ``a``'s: small where ``a`` is (a few copies against every
    kernel), whatever the size of ``b``."""
    a_start, a_end = (np.asarray(x, dtype=np.int64) for x in a)
    b_start, b_end = (np.asarray(x, dtype=np.int64) for x in b)
    if a_start.size == 0 or b_start.size == 0:
        return a_start, a_end
    # b's holes (hole j: between b[j - 1] and b[j]; the first and last unbounded) that meet
    # a segment [s, e): from the first b ending after s to the first b starting at or after e
    first = np.searchsorted(b_end, a_start, side="right")
    last = np.searchsorted(b_start, a_end, side="left")
    count = last - first + 1
    seg = np.repeat(np.arange(a_start.size), count)
    hole = np.arange(seg.size) - np.repeat(np.cumsum(count) - count - first, count)
    s, e, n = a_start[seg], a_end[seg], b_start.size
    lo = np.where(hole > 0, np.maximum(b_end[np.maximum(hole - 1, 0)], s), s)
    hi = np.where(hole < n, np.minimum(b_start[np.minimum(hole, n - 1)], e), e)
    keep = hi > lo
    return lo[keep], hi[keep]


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
        # (the lengths and their running total made in one array: no temporaries)
        dtype = np.result_type(self._end, self._start, np.int64)  # (int64 for int times)
        self._cum = np.zeros(len(self._start) + 1, dtype=dtype)
        np.subtract(self._end, self._start, out=self._cum[1:])
        np.cumsum(self._cum[1:], out=self._cum[1:])

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


class CodedCoverage:
    """Disjoint segments of several kinds (a code each, the segments of all kinds disjoint
    from each other) ready for many window queries: per code, the time its segments cover
    in each window (ns), as one Coverage per code answers, from two binary searches per
    window for every code together (not two per code)."""

    __slots__ = ("_code", "_cum", "_end", "_start")

    def __init__(self, segments: dict[int, Segments]) -> None:
        codes = list(segments)
        start = np.concatenate([segments[c][0] for c in codes]).astype(np.int64, copy=False)
        end = np.concatenate([segments[c][1] for c in codes]).astype(np.int64, copy=False)
        code = np.repeat(np.asarray(codes, dtype=np.int64), [len(segments[c][0]) for c in codes])
        order = np.argsort(start, kind="stable")
        self._start, self._end, self._code = start[order], end[order], code[order]
        length = self._end - self._start
        # per code: the time its segments before each segment cover (the first entry 0)
        self._cum = {}
        for c in codes:
            cum = np.zeros(len(length) + 1, dtype=np.int64)
            np.cumsum(np.where(self._code == c, length, 0), out=cum[1:])
            self._cum[c] = cum

    @property
    def codes(self) -> list[int]:
        """The codes that have segments, in the order they were given."""
        return list(self._cum)

    def within(self, lo, hi) -> dict[int, np.ndarray]:
        """Per code, for each window [lo_i, hi_i): the time that code's segments cover in
        it (ns; 0 where hi_i <= lo_i)."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        if self._end.size == 0:
            return {c: np.zeros(lo.shape, dtype=np.int64) for c in self._cum}
        before_lo, before_hi = self._before(lo), self._before(hi)
        return {c: np.maximum(before_hi[c] - before_lo[c], 0) for c in self._cum}

    def _before(self, t: np.ndarray) -> dict[int, np.ndarray]:
        """Per code: the time its segments cover in (-inf, t): those of the segments that
        start at or before t but the last, plus the last's part before t (its code's)."""
        k = np.searchsorted(self._start, t, side="right")  # segments starting at or before t
        last = np.maximum(k - 1, 0)
        # (where none starts at or before t: the first segment's part before t, none)
        partial = np.clip(np.minimum(t, self._end[last]) - self._start[last], 0, None)
        code = self._code[last]
        out = {}
        for c, cum in self._cum.items():
            before = cum[last]  # (cum[0] = 0 where none starts at or before t)
            before += np.where(code == c, partial, 0)
            out[c] = before
        return out


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
