"""Columns given to a table without a copy (metrics/columns.py)."""

import numpy as np
import pandas as pd

from advisor.metrics.columns import column


def test_column_is_held_without_a_copy_on_any_index():
    t = pd.DataFrame({"x": [1, 2, 3]}, index=[10, 5, 7])  # (not a range index)
    values = np.array([0.5, 1.5, 2.5])
    codes = pd.Categorical.from_codes(np.array([1, 0, 1], dtype=np.int8), ["a", "b"])
    t["v"] = column(t, values)
    t["c"] = column(t, codes)
    u = t.assign(w=column(t, values))
    assert np.shares_memory(t["v"].to_numpy(), values)  # (a plain assignment copies)
    assert np.shares_memory(t["c"].array.codes, codes.codes)
    assert np.shares_memory(u["w"].to_numpy(), values)
    assert t["v"].tolist() == [0.5, 1.5, 2.5] and t["c"].tolist() == ["b", "a", "b"]
    assert t.index.tolist() == [10, 5, 7] and t["x"].tolist() == [1, 2, 3]
