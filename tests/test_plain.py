"""Column-wise plain values (plain_list, plain_int_list) against plain / plain_int of each
value, on hand-made columns covering each dtype and missing-value spelling."""

import math

import numpy as np
import pandas as pd
import pytest

from advisor.plain import plain, plain_int, plain_int_list, plain_list

COLUMNS = {
    "int64": pd.Series([0, -3, 2**40], dtype=np.int64),
    "int32": pd.Series([7, 0, -1], dtype=np.int32),
    "bool": pd.Series([True, False, True]),
    "float with NaN": pd.Series([1.5, np.nan, -0.25]),
    "float32": pd.Series([2.0, np.nan, 3.5], dtype=np.float32),
    "whole floats": pd.Series([1024.0, np.nan, 3.0]),
    "objects": pd.Series(["a", None, np.nan], dtype=object),
    "categorical": pd.Series(pd.Categorical(["x", None, "y"])),
    "NA": pd.Series([1, pd.NA, 3], dtype="Int64"),
}


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert type(g) is type(w) and (g == w or (g is None and w is None)), (g, w)


@pytest.mark.parametrize("name", list(COLUMNS))
def test_plain_list_is_plain_of_each_value(name):
    column = COLUMNS[name]
    _same(plain_list(column), [plain(v) for v in column.to_numpy()])


@pytest.mark.parametrize("name", ["int64", "int32", "float with NaN", "whole floats"])
def test_plain_int_list_is_plain_int_of_each_value(name):
    column = COLUMNS[name]
    _same(plain_int_list(column), [plain_int(v) for v in column.to_numpy()])


def test_plain_int_list_keeps_big_and_odd_values_exact():
    # beyond a float's 53 bits, and None among objects: each value on its own, as plain_int
    big = pd.Series([float(2**60), 1.0])
    assert plain_int_list(big) == [2**60, 1]
    objects = pd.Series([4, None, 5.0], dtype=object)
    assert plain_int_list(objects) == [4, None, 5]
    # a float is truncated toward zero (int()), missing values are None
    assert plain_int_list(pd.Series([-2.7, 2.7, math.nan])) == [-2, 2, None]
