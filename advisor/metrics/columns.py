"""Columns given to a table as they are: pandas 3 copies a numpy array or Categorical
assigned to a column (``t[name] = array``, ``t.assign``, ``t.insert``: its Copy-on-Write
keeps the caller's array apart), not a Series on the table's own index. At ten million
rows each copy is 10-80 MB more memory at once and a pass over it."""

from __future__ import annotations

import numpy as np
import pandas as pd


def column(t: pd.DataFrame, values) -> pd.Series:
    """``values`` (an array or Categorical of ``t``'s length) as a column for ``t``
    (``t[name] = column(t, values)``, ``t.assign(name=column(t, values))``) that the table
    holds without a copy. The caller gives the array away: nothing may change it
    afterwards."""
    return pd.Series(values, index=t.index, copy=False)


def int32_where_fits(values: np.ndarray) -> np.ndarray:
    """Integer ``values`` as int32 where every one fits (10M rows: 40 MB less than int64),
    else as they are (nothing is truncated). numpy adds int32 into int64 (sum, cumsum,
    add.reduceat), and int32 with int64 gives int64."""
    if values.dtype.kind not in "iu" or values.itemsize <= 4 or not len(values):
        return values
    low, high = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    return values.astype(np.int32) if low <= values.min() and values.max() <= high else values
