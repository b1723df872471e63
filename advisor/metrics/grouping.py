"""Group ids for rows of many key columns, without pandas' per-column factorization.

Grouping a million launches by a dozen launch-configuration columns with ``groupby``
factorizes every column into its own int64 codes (memory and time per column:
docs/scaling.md).
Hashing the rows gives one uint64 per row instead; the grouping is then checked exactly
against each group's first row, so a hash collision can never merge two configurations
(on a mismatch the exact groupby is used).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.metrics.keys import first_rows, pack_one


def row_groups(df: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """Group id per row (0.. in order of first appearance) of equal values in ``cols``
    (NaN equals NaN), as ``groupby(cols, dropna=False, sort=False).ngroup()``."""
    if df.empty:
        return np.zeros(0, dtype=np.int64)
    cols = [c for c in cols if not _constant(df[c])]  # (they split no group)
    if not cols:
        return np.zeros(len(df), dtype=np.int64)
    hashed = pd.util.hash_pandas_object(df[cols], index=False).to_numpy()
    ids, _ = pd.factorize(hashed)
    first = first_rows(ids)
    for col in cols:
        values = _comparable(df[col])
        rep = values[first][ids]
        same = values == rep
        if not same.all() and not (same | (pd.isna(values) & pd.isna(rep))).all():
            return df.groupby(cols, dropna=False, sort=False, observed=True).ngroup().to_numpy()
    return ids


def few_row_groups(df: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """``row_groups`` for a table of a few rows (a rule's hits): each column's exact codes
    (NaN one value) packed into one key per row, numbered in order of first appearance;
    no hashing of whole rows and no check against collisions (a hundred times faster
    than row_groups on a dozen rows, slower on millions)."""
    if df.empty:
        return np.zeros(0, dtype=np.int64)
    codes = [pd.factorize(_comparable(df[c]), use_na_sentinel=False)[0] for c in cols]
    return pd.factorize(pack_one(*codes))[0].astype(np.int64)


def rows_by_value(values: np.ndarray) -> dict:
    """Row positions per distinct value, keys in ascending order (as
    ``groupby(values).indices``); a column holding one value (one device, the common case)
    without hashing it."""
    values = np.asarray(values)
    if len(values) and (values == values[0]).all():
        return {values[0]: np.arange(len(values))}
    return pd.Series(values, copy=False).groupby(values).indices


def _comparable(values: pd.Series) -> np.ndarray:
    """The column as an array whose equal items are the rows' equal values: a categorical's
    codes (-1 for missing), not its values (which pandas would build as a million strings)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.codes.to_numpy()
    return values.to_numpy()


def _constant(values: pd.Series) -> bool:
    """True when every value is the same (NaN counting as one value)."""
    v = _comparable(values)
    if v.dtype.kind == "f":
        missing = np.isnan(v)
        if missing.any():
            return bool(missing.all())
    elif v.dtype.kind not in "iub":
        return False  # (objects: left to the hash)
    return bool(v.min() == v.max())
