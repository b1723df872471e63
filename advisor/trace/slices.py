"""Numeric columns assembled from concurrently read row slices, each copied once.

A large table is read as rowid slices [a, b) by several connections. Every slice is copied
from its Arrow batches straight into its place in one preallocated numpy array per column
(narrowed to int32/float32 where asked), so the table exists once, not as Arrow buffers,
per-slice arrays and a concatenated copy. Rows land at ``a - first rowid``: when rowids
have no holes (an export's tables have none) the arrays are complete as written; holes leave
space between slices that one compaction removes. A filtered read (WHERE) keeps few of the
rows of each slice, so there each slice gets arrays of its own size, joined at the end
(preallocating for every rowid would touch memory for the rows filtered out).

A slice whose integer column holds NULLs, or values that do not fit the narrowed type, is
kept aside as float64/int64 and the column is widened at the end, so nothing is truncated.
"""

from __future__ import annotations

import threading
from itertools import accumulate

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

_I32 = np.iinfo(np.int32)


class SliceColumns:
    """Collects slices, or batches of them (``put``), into numeric columns; ``frame``
    gives the table."""

    def __init__(self, capacity: int, int32=(), float32=(), filtered: bool = False) -> None:
        self.capacity = capacity  # rows between the first and the last rowid
        self.filtered = filtered  # a WHERE clause drops rows: one array per slice
        self.int32, self.float32 = set(int32), set(float32)
        self.columns: dict[str, np.ndarray] = {}
        self.aside: dict[tuple[str, int], np.ndarray] = {}  # (column, offset) -> values
        self.placed: dict[int, int] = {}  # offset of each slice or batch -> rows
        self.names: list[str] | None = None
        self._lock = threading.Lock()

    def put(self, offset: int, table: pa.Table) -> bool:
        """Copy one slice or batch (rows from row ``offset`` on); False when a column is
        not numeric (the caller then reads the table another way)."""
        with self._lock:
            if self.names is None:
                self.names = table.column_names
        for name in self.names:
            column = table.column(name)
            dtype = self._dtype(name, column.type)
            if dtype is None:
                return False  # text in a numeric column
            dest = self._column(name, dtype, len(column))
            values = self._aside(column, dest.dtype)
            if values is None:
                at = 0 if self.filtered else offset
                for chunk in column.chunks:
                    if pa.types.is_null(chunk.type):
                        dest[at : at + len(chunk)] = np.nan
                    else:
                        dest[at : at + len(chunk)] = chunk.to_numpy(zero_copy_only=False)
                    at += len(chunk)
                if not self.filtered:
                    continue
                values = dest  # (a filtered read keeps each slice's own arrays)
            with self._lock:
                self.aside[(name, offset)] = values
        with self._lock:
            self.placed[offset] = table.num_rows
        return True

    def _column(self, name: str, dtype: np.dtype, rows: int) -> np.ndarray:
        """The destination array of ``name``: one for the table (allocated by the first
        slice that has the column) or, for a filtered read, one for this slice's ``rows``."""
        if self.filtered:
            return np.empty(rows, dtype=dtype)
        with self._lock:
            if name not in self.columns:
                self.columns[name] = np.empty(self.capacity, dtype=dtype)
            return self.columns[name]

    def _dtype(self, name: str, kind: pa.DataType) -> np.dtype | None:
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)):
            return None
        if name in self.float32:
            return np.dtype(np.float32)
        if pa.types.is_integer(kind):
            return np.dtype(np.int32 if name in self.int32 else np.int64)
        return np.dtype(np.float64)

    @staticmethod
    def _aside(column: pa.ChunkedArray, dtype: np.dtype) -> np.ndarray | None:
        """The slice's values when they cannot go into an integer ``dtype`` column as they
        are (NULLs or fractions: float64 with NaN; values beyond int32: int64); None when
        they can."""
        if dtype.kind != "i":
            return None
        if not pa.types.is_integer(column.type) or column.null_count:
            return column.to_numpy().astype(np.float64)  # (an all-NULL slice: NaN)
        if dtype == np.int32 and len(column):
            lo, hi = pc.min_max(column).values()
            if lo.as_py() < _I32.min or hi.as_py() > _I32.max:
                return column.to_numpy().astype(np.int64)
        return None

    def frame(self) -> pd.DataFrame:
        """The table: slices in rowid order, holes removed, widened columns merged."""
        if self.names is None:
            return pd.DataFrame()
        offsets = sorted(self.placed)
        rows = [self.placed[o] for o in offsets]
        packed = offsets == [0, *accumulate(rows)][:-1]  # no holes between
        out: dict[str, np.ndarray] = {}
        for name in self.names:
            if self.filtered:  # every slice has its own arrays (dtypes promote)
                out[name] = np.concatenate([self.aside.pop((name, o)) for o in offsets])
                continue
            kept = [self.aside.pop((name, o), None) for o in offsets]
            column = self.columns.pop(name)
            if any(k is not None for k in kept):
                column = _widened(column, offsets, rows, kept)
            elif not packed or sum(rows) != len(column):
                column = np.concatenate(
                    [column[o : o + n] for o, n in zip(offsets, rows, strict=True)]
                )
            out[name] = column
        return pd.DataFrame(out, copy=False)


def _widened(column: np.ndarray, offsets, rows, kept) -> np.ndarray:
    """One column from slices where some were kept aside (float64 with NaN, or int64)."""
    wide = np.result_type(column.dtype, *[k.dtype for k in kept if k is not None])
    parts = [k if k is not None else column[o : o + n]
             for o, n, k in zip(offsets, rows, kept, strict=True)]  # fmt: skip
    return np.concatenate(parts).astype(wide, copy=False)
