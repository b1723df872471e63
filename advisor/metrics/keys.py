"""Composite integer keys packed into one int64 per row: the one place that does it.

``pack`` turns k integer key columns into one int64 per row that is equal exactly when the
rows' keys are equal and that sorts as the key tuples do (first column primary), across
several tables at once (e.g. ops and the windows they are looked up in). Each column is
offset by its minimum and scaled by the ranges of the columns after it (a mixed-radix
number); this fits when the product of the columns' ranges stays below ``PACK_LIMIT``. When
it does not (64-bit correlation ids, many processes), ``fallback`` decides: the default
numbers the distinct key tuples in sorted order (exact and ordered, a hash-sort slower);
``fallback=None`` returns None so that the caller takes its own path (e.g. a lexsort).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import pandas as pd

PACK_LIMIT = 1 << 62  # packed keys stay below this (room for one more sign-safe step)


@dataclass(frozen=True)
class Packed:
    """Packed keys per table; ``lows``/``radices`` per column (None after the fallback),
    so that ``column(i, key)`` recovers a column from a packed (e.g. sorted) key."""

    keys: list[np.ndarray]
    lows: tuple[int, ...] | None
    radices: tuple[int, ...] | None

    def column(self, i: int, key: np.ndarray) -> np.ndarray:
        """Column ``i`` of packed ``key`` values (only for arithmetic packing)."""
        if self.radices is None or self.lows is None:  # (both None, or neither)
            raise ValueError("keys were numbered by the fallback: columns cannot be recovered")
        below = int(np.prod(self.radices[i + 1 :], dtype=object))
        return (key // below) % self.radices[i] + self.lows[i]


Fallback = Callable[[list[list[np.ndarray]]], list[np.ndarray]]


def number_tuples(tables: list[list[np.ndarray]]) -> list[np.ndarray]:
    """The default fallback: the distinct key tuples of all tables numbered 0, 1, ... in
    sorted tuple order (so the numbers sort as the tuples do)."""
    columns = [np.concatenate([t[i] for t in tables]) for i in range(len(tables[0]))]
    codes = pd.factorize(pd.MultiIndex.from_arrays(columns), sort=True)[0].astype(np.int64)
    return np.split(codes, np.cumsum([len(t[0]) for t in tables])[:-1])


@overload
def pack(*tables: Sequence[np.ndarray], fallback: Fallback = number_tuples) -> Packed: ...
@overload
def pack(*tables: Sequence[np.ndarray], fallback: None) -> Packed | None: ...
def pack(*tables: Sequence[np.ndarray], fallback: Fallback | None = number_tuples) -> Packed | None:
    """One int64 key per row of each table (a sequence of equally long integer columns; every
    table has the same columns in the same order). Equal keys <=> equal tuples, across the
    tables; keys sort as the tuples. When the ranges' product reaches PACK_LIMIT:
    ``fallback(tables)`` numbers them (Packed without lows/radices), or None when
    ``fallback`` is None."""
    cols = [[_integers(c) for c in t] for t in tables]
    bounds = pack_bounds([c for t in cols for c in t], len(cols[0]))
    if bounds is None:
        if fallback is None:
            return None
        return Packed(fallback(cols), None, None)
    lows, radices = bounds
    # (each column added in its own dtype: no int64 copy of it)
    return Packed([packed_rows(t, lows, radices) for t in cols], lows, radices)


def pack_bounds(columns: Sequence[np.ndarray], width: int | None = None
                ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:  # fmt: skip
    """(lows, radices) that ``pack`` gives keys of ``width`` integer columns (``columns``:
    those of one table, or of several one after another: column i of each), or None where
    the radices' product reaches PACK_LIMIT."""
    width = len(columns) if width is None else width
    lows, radices = [], []
    for i in range(width):
        parts = [c for c in columns[i::width] if len(c)]
        lo = min((int(p.min()) for p in parts), default=0)
        hi = max((int(p.max()) for p in parts), default=0)
        lows.append(lo)
        radices.append(hi - lo + 1)
    if int(np.prod(radices, dtype=object)) >= PACK_LIMIT:
        return None
    return tuple(lows), tuple(radices)


def packed_rows(columns: Sequence[np.ndarray], lows: Sequence[int], radices: Sequence[int],
                rows: slice = slice(None), dtype: type[np.signedinteger] = np.int64
                ) -> np.ndarray:  # fmt: skip
    """The packed keys of ``rows`` of integer ``columns`` (pack_bounds' lows and radices),
    each column added in its own dtype; ``dtype``: int64, or a narrower type where the
    radices' product fits it (int32: half the memory)."""
    if dtype is not np.int64 and int(np.prod(radices, dtype=object)) > np.iinfo(dtype).max:
        dtype = np.int64
    packed: np.ndarray | None = None
    for c, lo, radix in zip(columns, lows, radices, strict=True):
        part = c[rows]
        if packed is None:
            packed = np.zeros(len(part), dtype=dtype)
        else:
            packed *= radix
        packed += part
        if lo:
            packed -= lo
    assert packed is not None, "a key has at least one column"
    return packed


def _integers(column) -> np.ndarray:
    """A key column as an array that adds into int64 in place: itself when its integers
    (or booleans) do, else an int64 copy (uint64, floats)."""
    c = np.asarray(column)
    if c.dtype.kind in "bi" or (c.dtype.kind == "u" and c.dtype.itemsize < 8):
        return c
    return c.astype(np.int64)


@overload
def pack_one(*columns: np.ndarray, fallback: Fallback = number_tuples) -> np.ndarray: ...
@overload
def pack_one(*columns: np.ndarray, fallback: None) -> np.ndarray | None: ...
def pack_one(*columns: np.ndarray, fallback: Fallback | None = number_tuples) -> np.ndarray | None:
    """``pack`` of one table: its keys (None when it does not fit and fallback is None)."""
    packed = pack(columns, fallback=fallback)
    return None if packed is None else packed.keys[0]


def int_dtype(low: int, high: int) -> type[np.signedinteger]:
    """The smallest signed integer type holding every integer from ``low`` to ``high``."""
    for small in (np.int8, np.int16, np.int32):
        info = np.iinfo(small)
        if info.min <= low and high <= info.max:
            return small
    return np.int64


def row_dtype(rows: int) -> type[np.signedinteger]:
    """The integer type of row positions into a table of ``rows`` rows: int32 below 2**31
    rows (half the memory of int64), else int64."""
    return np.int32 if rows < 2**31 else np.int64


RUN_SORT_MAX_MEAN = 1 << 20  # mean rows per run up to which a merge sort beats quicksort


def sort_runs(keys: np.ndarray, runs: int) -> None:
    """Sort in place int64 ``keys`` packed with a run id first whose ``runs`` runs are
    already contiguous and ascending (only the values within each run are out of order).
    numpy's stable sort (timsort) finds that order and merges the runs instead of sorting
    the whole array again: at 10M keys 0.07-0.5 s for runs of 5 to 100K rows against 0.6 s
    for quicksort; from about a million rows per run quicksort is faster (measured on
    random values, this project's VM). The result is the same either way (integers)."""
    mean_run = len(keys) / max(runs, 1)
    keys.sort(kind="stable" if mean_run <= RUN_SORT_MAX_MEAN else "quicksort")


def middle_rows(head: np.ndarray, count: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group of ``count`` sorted values starting at row ``head`` of ``rows`` sorted values:
    the rows of its two middle values (the same row for an odd count), kept within the rows
    (a group without values may start past the end): its median is their mean."""
    last = max(rows - 1, 0)
    lo = np.minimum(head + np.maximum(count - 1, 0) // 2, last)
    hi = np.minimum(head + count // 2, last)
    return lo, hi


def group_medians(group: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Per group id 0..groups-1 (``group``: per value): the median of its ``values`` as
    pandas' groupby median gives it (float64; for an even count the mean of the two middle
    values; NaN for a group without values). Integer values are packed with their group id
    into one int64 and sorted as such, the only array of their length made (at 10M values
    half of pandas' temporaries and half its time); others go through pandas."""
    count = np.bincount(group, minlength=groups)
    if len(values) == 0:
        return np.full(groups, np.nan)
    packed = pack((group, values), fallback=None) if values.dtype.kind in "biu" else None
    if packed is None:
        median = pd.Series(values, copy=False).groupby(group, sort=True).median()
        return median.reindex(range(groups)).to_numpy(np.float64)
    (keys,) = packed.keys
    keys.sort()
    lo, hi = middle_rows(np.cumsum(count) - count, count, len(keys))
    pair = packed.column(1, keys[lo]).astype(np.float64) + packed.column(1, keys[hi])
    return np.where(count > 0, pair / 2, np.nan)


def group_sums(
    keys: dict[str, np.ndarray],
    values: dict[str, np.ndarray],
    least: dict[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Per distinct tuple of the integer ``keys`` columns, in order of first appearance: the
    key columns (int64), the sum of each of ``values`` (as ``groupby(keys, sort=False)
    .sum()``) and the least of each of ``least``. The keys are packed into one int64 when
    they fit, so the groupby hashes one column instead of factorizing each (at 17M rows and
    4 keys, several times faster)."""
    names = list(keys)
    how = {v: "sum" for v in values} | {v: "min" for v in least or {}}
    frame = pd.DataFrame({**values, **(least or {})}, copy=False)
    packed = pack([keys[k] for k in names], fallback=None)
    if packed is None:
        frame = pd.DataFrame({**keys, **frame}, copy=False)
        by_keys = frame.groupby(names, sort=False, as_index=False)
        sums = by_keys.sum() if least is None else by_keys.agg(how)
        return sums.astype({k: np.int64 for k in names})
    grouped = frame.groupby(packed.keys[0], sort=False)
    sums = grouped.sum() if least is None else grouped.agg(how)
    key = sums.index.to_numpy()
    columns = {k: packed.column(i, key).astype(np.int64) for i, k in enumerate(names)}
    return pd.DataFrame({**columns, **{v: sums[v].to_numpy() for v in how}})


DENSE_BINS = 1 << 22  # key ranges up to which integer_group_sums counts into an array


def integer_group_sums(keys: dict[str, np.ndarray], values: dict[str, np.ndarray]) -> pd.DataFrame:
    """group_sums of integer-valued ``values`` (bools, ints, floats holding whole numbers),
    groups in ascending key order, sums as float64: counted with np.bincount into one slot
    per packed key when the keys' range has at most DENSE_BINS values (no hash table and
    no groupby temporaries: a job of many ranks has millions of comm ops), else by
    group_sums. Exact while each sum stays below 2**53 (104 days in ns)."""
    names = list(keys)
    packed = pack([keys[k] for k in names], fallback=None)
    bins = math.prod(packed.radices) if packed is not None and packed.radices else 0
    if packed is None or not 0 < bins <= DENSE_BINS:
        sums = group_sums(keys, values)
        order = np.lexsort([sums[k].to_numpy() for k in names[::-1]])
        out = sums.take(order).reset_index(drop=True)
        return out.astype({v: np.float64 for v in values})
    key = packed.keys[0]
    counts = np.bincount(key, minlength=bins)
    present = np.flatnonzero(counts)
    columns = {k: packed.column(i, present).astype(np.int64) for i, k in enumerate(names)}
    for v, weights in values.items():
        columns[v] = slot_sums(key, np.asarray(weights), counts)[present].astype(
            np.float64, copy=False)  # fmt: skip
    return pd.DataFrame(columns)


def slot_sums(key: np.ndarray, values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per slot of ``key`` (integers 0..len(counts)-1; ``counts``: each slot's rows, as
    ``np.bincount(key, minlength=len(counts))``): the sum of ``values`` without a float64
    copy of them: booleans counted (int64; every one true: the counts), integers added
    exactly in int64 (np.add.at: twice as fast as np.bincount's float weights at 10M rows),
    other numbers as np.bincount's float64 weights."""
    bins = len(counts)
    if values.dtype == bool:
        return counts if values.all() else np.bincount(key[values], minlength=bins)
    if values.dtype.kind in "iu":
        sums = np.zeros(bins, dtype=np.int64)
        np.add.at(sums, key, values)
        return sums
    return np.bincount(key, values, minlength=bins)


def sorted_codes(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, keys) of int64 ``key``: per row the position of its value among the distinct
    values in ascending order, and those values (as ``pd.factorize(key, sort=True)``), found
    with an array indexed by value where the values span at most DENSE_BINS integers (no
    hash table; int32 codes), else by pd.factorize."""
    if len(key) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=key.dtype)
    lo, hi = int(key.min()), int(key.max())
    if hi - lo >= DENSE_BINS:
        codes, values = pd.factorize(key, sort=True)
        return codes, values
    offset = key - lo if lo else key
    seen = np.zeros(hi - lo + 1, dtype=bool)
    seen[offset] = True
    present = np.flatnonzero(seen)
    number = np.zeros(len(seen), dtype=np.int32)
    number[present] = np.arange(len(present), dtype=np.int32)
    return number[offset], (present + lo).astype(key.dtype)


def text_categorical(values: np.ndarray) -> pd.Categorical:
    """An object array of texts as a categorical (factorized by hashing: no inference of a
    string dtype over millions of rows), categories sorted."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object), sort=True)
    return pd.Categorical.from_codes(codes, pd.Index(uniques, dtype=object))


def vocabulary_codes(texts: np.ndarray, vocab: dict[object, int]) -> np.ndarray:
    """int32 codes of ``texts`` into ``vocab`` (text -> code; texts new to it are added);
    -1 for a missing text (None, NaN)."""
    codes, uniques = pd.factorize(np.asarray(texts, dtype=object))
    ids = np.array([vocab.setdefault(u, len(vocab)) for u in uniques] + [-1], dtype=np.int32)
    return ids[codes]  # (code -1 takes the last: missing)


def vocabulary_categorical(
    codes: np.ndarray, vocab: dict[object, int], used: np.ndarray | None = None
) -> pd.Categorical:
    """``codes`` into ``vocab`` (vocabulary_codes; -1: missing) as a categorical whose
    categories are the texts of the codes ``used`` (default: every text of ``vocab``),
    sorted as text_categorical sorts them."""
    words = np.array(list(vocab), dtype=object)
    used = np.arange(len(words)) if used is None else used
    order = used[np.argsort(words[used])]
    remap = np.full(len(words) + 1, -1, dtype=np.int32)  # (the last: missing stays -1)
    remap[order] = np.arange(len(order), dtype=np.int32)
    return pd.Categorical.from_codes(remap[codes], pd.Index(words[order], dtype=object))


class TextColumn:
    """A column of texts ('' where none was put) filled part by part and held as codes into
    its vocabulary: int16 (2 bytes a row instead of an object reference) while the
    vocabulary fits them, int32 from then on, and no hashing of the whole column at the
    end. ``categorical()`` is text_categorical of the same texts (categories: those
    present, sorted; a missing text, None or NaN, is NaN). Filled from one thread."""

    def __init__(self, n: int, vocab: dict[object, int] | None = None) -> None:
        """``vocab``: the vocabulary to code into (text -> code, '' -> 0; shared with what
        else codes into it, which may add to it), else one of its own."""
        self._codes = np.zeros(n, dtype=np.int16)  # (-1: a missing text)
        self._vocab: dict[object, int] = {"": 0} if vocab is None else vocab

    def _fitted(self) -> np.ndarray:
        """The codes, widened to int32 first where the vocabulary has outgrown int16
        (another column sharing it may have added texts): every code of it then fits."""
        if self._codes.dtype == np.int16 and len(self._vocab) > np.iinfo(np.int16).max:
            self._codes = self._codes.astype(np.int32)
        return self._codes

    def put(self, rows: np.ndarray, texts: np.ndarray) -> None:
        """Set the texts of ``rows`` (positions) to ``texts``."""
        codes = vocabulary_codes(texts, self._vocab)
        self._fitted()[rows] = codes

    def put_codes(self, rows: np.ndarray, codes: np.ndarray) -> None:
        """Set the texts of ``rows`` to those ``codes`` stand for in its vocabulary
        (vocabulary_codes of the texts into it: coded once for several columns)."""
        self._fitted()[rows] = codes

    def put_coded(self, rows: np.ndarray, codes: np.ndarray, words: np.ndarray) -> None:
        """Set the texts of ``rows`` to ``words[codes]`` (``words``: an object array of
        texts; ``codes``: integer positions in it): each distinct code's text is looked up
        once, not every row's."""
        at, used = pd.factorize(codes)
        coded = vocabulary_codes(words[used], self._vocab)
        self._fitted()[rows] = coded[at]

    def categorical(self) -> pd.Categorical:
        """The column as a categorical with its present texts as sorted categories."""
        return vocabulary_categorical(
            self._codes, self._vocab, used_codes(self._codes, len(self._vocab))
        )


def value_codes(column: pd.Series, dtype: type = np.int64) -> np.ndarray:
    """Integer codes of a column's values (of ``dtype``, wide enough for their number): a
    categorical's own codes, else its values factorized (equal values, equal codes)."""
    values = column.array
    codes = values.codes if hasattr(values, "codes") else pd.factorize(column)[0]
    return np.asarray(codes, dtype=dtype)


def few_value_codes(values: np.ndarray) -> tuple[np.ndarray, pd.Index]:
    """(an int32 code per value, the distinct values the codes index): equal values get
    equal codes, NaN gets -1, as ``pd.factorize``. The first value's rows are found by one
    comparison and only the others hashed: a column that one value nearly fills (the thread
    that made most launch calls) costs a pass, not a hash table (10M values: 12 ms against
    0.24 s)."""
    values = np.asarray(values)
    if not len(values) or (values.dtype.kind == "f" and np.isnan(values[0])):
        codes, uniques = pd.factorize(values)
        return codes.astype(np.int32), pd.Index(uniques)
    codes = np.zeros(len(values), dtype=np.int32)
    others = np.flatnonzero(values != values[0])
    other_codes, uniques = pd.factorize(values[others])
    codes[others] = np.where(other_codes >= 0, other_codes + 1, -1)
    return codes, pd.Index(np.concatenate([values[:1], uniques]))


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: ``np.unique(values)``, by a hash table then a sort of
    the few distinct values (numpy 2's unique takes 4-7x longer on millions of rows)."""
    return np.sort(pd.unique(np.asarray(values)))


def first_rows(values: np.ndarray) -> np.ndarray:
    """Row positions of each distinct value's first occurrence, in the order of the
    values: ``np.unique(values, return_index=True)[1]``, by hashing, not a full sort."""
    values = np.asarray(values)
    first = np.flatnonzero(~pd.Series(values, copy=False).duplicated().to_numpy())
    return first[np.argsort(values[first], kind="stable")]


def first_appearance_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a code per row, each code's first row) of integer ``values``: the codes of
    ``pd.factorize`` (numbered in order of first appearance) and first_rows of them. When
    the values span at most DENSE_BINS integers, each value's first row is found in an
    array indexed by value (a running minimum, a block of rows at a time): no hash table,
    no second pass, and the codes int32 (fewer than 2**31 of them; 10M launches' kernel
    groups: 40 MB less); else pd.factorize (int64 codes)."""
    values = np.asarray(values)
    n = len(values)
    lo = int(values.min()) if n else 0
    bins = int(values.max()) - lo + 1 if n else 0
    if not 0 < bins <= DENSE_BINS:
        codes = pd.factorize(values)[0].astype(np.int64, copy=False)
        return codes, first_rows(codes)  # (by code: in order of appearance)
    first = np.full(bins, n, dtype=np.int64)  # per value (from lo): its first row
    for start in range(0, n, BLOCK_ROWS):
        block = values[start : start + BLOCK_ROWS]
        rows = np.arange(start, start + len(block), dtype=np.int64)
        np.minimum.at(first, block - lo if lo else block, rows)
    present = np.flatnonzero(first < n)
    firsts = np.sort(first[present])  # (each code's first row, in order of appearance)
    code_of = np.zeros(bins, dtype=row_dtype(len(firsts)))
    code_of[values[firsts] - lo] = np.arange(len(firsts))
    return code_of[values - lo if lo else values], firsts


# rows worked a block at a time where a whole-length temporary would be held otherwise
# (first_appearance_codes, first_max_rows, used_codes; the rules' piece and op sums)
BLOCK_ROWS = 1 << 20


def factorize_in_blocks(values: Callable[[slice], np.ndarray], n: int,
                        block: int | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``pd.factorize(v, use_na_sentinel=False)`` of the ``n`` values ``v`` that
    ``values(rows)`` gives a slice of rows at a time: (a code per row, numbered in order of
    first appearance, in row_dtype(n); the distinct values in that order, NaN among them).
    ``block`` rows are factorized at a time and their distinct values found among those of
    the blocks before: no int64 codes (or values made for the purpose) of the whole length
    (a 10M-row column: 76 MB, a size later arrays of another length could not reuse).
    ``block``: default BLOCK_ROWS."""
    block = block or BLOCK_ROWS
    codes = np.empty(n, dtype=row_dtype(n))
    seen: pd.Index | None = None  # (the distinct values so far, in order of appearance)
    parts: list[np.ndarray] = []
    for start in range(0, n, block):
        rows = slice(start, min(start + block, n))
        local, distinct = pd.factorize(values(rows), use_na_sentinel=False)
        if seen is None:
            where = np.arange(len(distinct))
        else:
            where = seen.get_indexer(distinct)
            new = where < 0
            where[new] = len(seen) + np.arange(int(new.sum()))
            distinct = distinct[new]
        if len(distinct):
            parts.append(distinct)
            seen = pd.Index(np.concatenate(parts))
        codes[rows] = where[local]
    if seen is None:
        return codes, pd.factorize(values(slice(0, 0)), use_na_sentinel=False)[1]
    return codes, np.concatenate(parts)


def used_codes(codes: np.ndarray, count: int, block: int = BLOCK_ROWS) -> np.ndarray:
    """The codes of 0 .. ``count`` - 1 that ``codes`` holds (-1, a missing text, left out),
    ascending; ``block`` codes at a time (no whole-column temporary: an index array of
    int32 codes is widened to int64 where it indexes)."""
    seen = np.zeros(count + 1, dtype=bool)  # (the last: -1)
    for b in range(0, len(codes), block):
        seen[codes[b : b + block]] = True
    return np.flatnonzero(seen[:count])


def first_max_rows(group: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Per group id (0..n-1, each present): the row position of its largest ``score``, the
    first such row on ties (``groupby(group).idxmax()`` over a default index); ``score``
    without NaN."""
    best = np.full(int(group.max()) + 1, -np.inf)
    np.maximum.at(best, group, score)
    # each group's maxima, in row order (compared a block of rows at a time: no gathered
    # copy of the scores' length)
    rows = np.concatenate([
        start + np.flatnonzero(score[start : start + BLOCK_ROWS]
                               == best[group[start : start + BLOCK_ROWS]])
        for start in range(0, len(group), BLOCK_ROWS)
    ] or [np.zeros(0, dtype=np.int64)])  # fmt: skip
    return rows[first_rows(group[rows])]
