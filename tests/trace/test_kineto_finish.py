"""The Kineto reader's integer columns (finish.tidy's conversion), on hand-picked values."""

import numpy as np
import pandas as pd
import pytest

from advisor.trace.kineto.finish import _as_int

INT32 = np.dtype("int32")


@pytest.mark.parametrize(
    "values",
    [[1.0, np.nan], [1.5, 2.0], [np.inf], [2.0**31], [-(2.0**31) - 1], ["a", "b"]],
)
def test_a_value_that_would_change_keeps_the_column(values):
    # missing, fractional, infinite, one past int32's range either side, not a number
    assert _as_int(pd.Series(values), INT32) is None


def test_integers_in_range_become_the_dtype():
    got = _as_int(pd.Series([-(2.0**31), -0.0, 7.0, 2.0**31 - 1]), INT32)
    assert got.dtype == INT32 and got.tolist() == [-(2**31), 0, 7, 2**31 - 1]
    assert _as_int(pd.Series([3, 4], dtype="int64"), INT32).tolist() == [3, 4]
    assert _as_int(pd.Series([2**40], dtype="int64"), INT32) is None  # (out of int32's range)
    assert _as_int(pd.Series([2**40], dtype="int64"), np.dtype("int64")).tolist() == [2**40]
    # a nullable column: converted where nothing is missing, kept where a value is
    assert _as_int(pd.Series([1, 2], dtype="Int64"), INT32).tolist() == [1, 2]
    assert _as_int(pd.Series([1, None], dtype="Int64"), INT32) is None
