"""numpy/pandas values -> plain Python values (for JSON and message templates)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def plain(value):
    """numpy/pandas scalars -> plain Python, recursively through dicts, lists and tuples;
    NaN, NA and None -> None."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return None if math.isnan(f) else f
    if isinstance(value, np.bool_):
        return bool(value)
    if value is pd.NA or value is None:
        return None
    return value


def plain_int(value) -> int | None:
    """An integer field: None where there is no (valid) value (None or NaN)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


def plain_list(values) -> list:
    """A column's values as ``plain`` gives each (NaN, NA and None -> None), numbers
    converted in one pass (a document of many rows: ``plain`` per value is the slow part)."""
    array = np.asarray(values)
    if array.dtype.kind in "iub":
        return array.tolist()
    if array.dtype.kind == "f":
        return _none_where(array.tolist(), np.isnan(array))
    return [v if type(v) is str else plain(v) for v in array.tolist()]  # (text as it is)


def plain_int_list(values) -> list:
    """A column's values as ``plain_int`` gives each (int; None where missing), converted
    in one pass."""
    array = np.asarray(values)
    if array.dtype.kind in "iu":
        return array.tolist()
    try:
        f = array.astype(np.float64)
    except (TypeError, ValueError):  # (objects a float cannot hold: each on its own)
        return [plain_int(v) for v in array.tolist()]
    missing = np.isnan(f)
    if array.dtype.kind != "f" or np.abs(f[~missing]).max(initial=0) >= 2**53:
        return [plain_int(v) for v in array.tolist()]  # (exact ints, beyond a float's)
    return _none_where(np.where(missing, 0, f).astype(np.int64).tolist(), missing)


def rounded_int_list(values) -> list:
    """A column of times or counts as ints, rounded half to even (like ``round``), in one
    pass (no value may be missing)."""
    return np.round(np.asarray(values, dtype=np.float64)).astype(np.int64).tolist()


def integer_times(value):
    """``value`` (plain: dicts, lists, numbers) with the float value of every ``*_ns`` key
    as an int, rounded half to even like ``round`` (a median of an even count lies half a
    nanosecond between two; docs/json.md promises integer times); the rest as it is."""
    if isinstance(value, dict):
        return {k: round(v) if k.endswith("_ns") and isinstance(v, float) else integer_times(v)
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, list):
        return [integer_times(v) for v in value]
    return value


def _none_where(values: list, missing: np.ndarray) -> list:
    for i in np.flatnonzero(missing).tolist():
        values[i] = None
    return values


def plain_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its categorical columns as plain object columns (for small result tables,
    so string operations and comparisons behave as on ordinary text)."""
    cats = [c for c, t in df.dtypes.items() if isinstance(t, pd.CategoricalDtype)]
    return df.astype({c: object for c in cats}) if cats else df


def plain_array(values):
    """A column's values for a table built from a dict of arrays, typed as plain_columns
    and column assignment type them: a categorical's values, and an extension array of
    objects (a column taken from a frame), as an object Series (pandas 3 infers its ``str``
    dtype for text given bare in a dict); a numpy array as it is (inferred as an assigned
    array is)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return pd.Series(np.asarray(values, dtype=object), dtype=object, copy=False)
    if not isinstance(values, np.ndarray) and pd.api.types.is_object_dtype(values):
        return pd.Series(values, dtype=object, copy=False)  # (an extension array of objects)
    return values
