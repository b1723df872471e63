"""Group ids for rows of many key columns, exactly and without hashing whole rows.

Grouping ten million launches by a dozen launch-configuration columns with ``groupby``
factorizes every column into int64 codes and then the tuples of codes; hashing whole rows
(pandas' ``hash_pandas_object``) and checking each group against its first row took 1.5-1.7 s
there. Here each column's values are numbered on their own (few distinct values each: a
hash table that stays in cache) and the numbers packed into one int64 key per row
(metrics/keys.pack_one), numbered again whenever the next column would overflow the key:
0.6 s, exact by construction (docs/scaling.md, "Issue 33, twenty-third pass").
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

from advisor.metrics.keys import (
    factorize_in_blocks,
    first_rows,
    int_dtype,
    pack_bounds,
    pack_one,
    packed_rows,
)


def row_groups(df: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """Group id per row (0.. in order of first appearance) of equal values in ``cols``
    (NaN equals NaN), as ``groupby(cols, dropna=False, sort=False, observed=True).ngroup()``
    (int64)."""
    if df.empty:
        return np.zeros(0, dtype=np.int64)
    # (a constant column splits no group)
    numbers = [_value_numbers(df[c]) for c in cols if not _constant(df[c])]
    return _groups(numbers, len(df)).astype(np.int64, copy=False)


def groups_and_firsts(df: pd.DataFrame, cols: list[str], taken: Collection[str] = ()
                      ) -> tuple[np.ndarray, pd.DataFrame]:  # fmt: skip
    """(row_groups(df, cols) in keys.row_dtype; ``df``'s first row of each group, in group
    order, index reset: ``df.iloc[first_rows(groups)]``). The numeric columns of ``taken``
    are the caller's to give away: each is taken out of ``df`` once numbered and its first
    rows made from its distinct values, so that a table's columns (at 10M launches 40 MB
    each) are not all held beside their numbers; ``df`` is left without them."""
    if df.empty:
        return np.zeros(0, dtype=np.int32), df.iloc[:0].reset_index(drop=True)
    columns = list(df.columns)
    numbers: list[np.ndarray] = []
    made: dict[str, tuple[np.ndarray | None, np.ndarray]] = {}  # (numbers, distinct values)
    for c in cols:
        if c not in taken or df[c].dtype.kind not in "iuf":
            if not _constant(df[c]):
                numbers.append(_value_numbers(df[c]))
            continue
        constant = _constant(df[c])
        values = df.pop(c).to_numpy()
        if constant:  # (splits no group: every first row holds its one value)
            made[c] = (None, values[:1].copy())
            continue
        value_codes, distinct = _factorized(values)
        del values
        numbers.append(_smallest(value_codes))
        made[c] = (numbers[-1], distinct)
    groups = _groups(numbers, len(df))
    first = first_rows(groups)
    firsts = df.iloc[first].reset_index(drop=True)
    for c, (codes, distinct) in made.items():
        firsts[c] = distinct[codes[first]] if codes is not None else np.repeat(distinct, len(first))
    return groups, firsts[[c for c in columns if c in firsts]]


def _groups(numbers: list[np.ndarray], n: int) -> np.ndarray:
    """row_groups of ``n`` rows from their columns' numbers (_value_numbers), in
    keys.row_dtype(n): the rows' packed keys numbered a block of rows at a time where they
    pack (no key column of the whole length)."""
    if not numbers:
        return np.zeros(n, dtype=np.int32)
    bounds = pack_bounds(numbers)
    if bounds is not None:
        lows, radices = bounds
        return factorize_in_blocks(lambda rows: packed_rows(numbers, lows, radices, rows), n)[0]
    # (the product of the columns' ranges reached the key's limit: one column at a time,
    # the key numbered again first where it would not fit)
    key = numbers[0]
    for more in numbers[1:]:
        packed = pack_one(key, more, fallback=None)
        key = packed if packed is not None else pack_one(_factorized(key)[0], more)
    return _factorized(key)[0]


def _factorized(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values, use_na_sentinel=False)``, the codes in keys.row_dtype (made a
    block of rows at a time: keys.factorize_in_blocks)."""
    return factorize_in_blocks(values.__getitem__, len(values))


def _value_numbers(values: pd.Series) -> np.ndarray:
    """Integers per row, equal where the values are (a missing value one more): a
    categorical's codes, else the values numbered by pd.factorize, in the smallest integer
    type that holds them (ten columns of ten million rows: 10 MB each, not 80)."""
    numbers = _comparable(values)
    if isinstance(values.dtype, pd.CategoricalDtype):
        return numbers
    return _smallest(_factorized(numbers)[0])


def _smallest(numbers: np.ndarray) -> np.ndarray:
    """Non-negative integers in the smallest integer type that holds them."""
    top = int(numbers.max()) if len(numbers) else 0
    return numbers.astype(int_dtype(0, top), copy=False)


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
        return False  # (objects: numbered like the others)
    return bool(v.min() == v.max())
