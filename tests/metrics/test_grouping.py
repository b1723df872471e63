"""row_groups (hashed) and few_row_groups (exact codes): both equal pandas' groupby ngroup."""

import numpy as np
import pandas as pd

from advisor.metrics.grouping import few_row_groups, row_groups, rows_by_value


def test_same_ids_as_groupby_with_nan_and_categoricals():
    df = pd.DataFrame(
        {
            "a": [1, 1, 2, 1, 2, 3],
            "b": [0.5, 0.5, np.nan, 0.5, np.nan, np.nan],
            "name": pd.Categorical(["x", "x", "y", "z", "y", "x"]),
        }
    )
    # rows 0,1 equal; 2,4 equal (NaN == NaN); 3 differs from 0 by name; 5 alone
    assert row_groups(df, ["a", "b", "name"]).tolist() == [0, 0, 1, 2, 1, 3]
    expected = df.groupby(["a", "b", "name"], dropna=False, sort=False, observed=True).ngroup()
    assert row_groups(df, ["a", "b", "name"]).tolist() == expected.tolist()


def test_a_hash_collision_falls_back_to_exact_grouping(monkeypatch):
    df = pd.DataFrame({"a": [1, 2, 1, 3]})
    # every row hashes alike: only the exact check can tell them apart
    monkeypatch.setattr(
        pd.util, "hash_pandas_object", lambda d, index: pd.Series(np.zeros(len(d), np.uint64))
    )
    assert row_groups(df, ["a"]).tolist() == [0, 1, 0, 2]


def test_empty():
    assert row_groups(pd.DataFrame({"a": []}), ["a"]).tolist() == []


def test_constant_columns_split_nothing():
    df = pd.DataFrame(
        {
            "one": [7, 7, 7, 7],
            "all_nan": [np.nan] * 4,
            "some_nan": [1.0, np.nan, 1.0, 1.0],  # not constant: NaN is its own value
            "cat": pd.Categorical(["k", "k", "k", "k"]),
            "a": [1, 2, 1, 2],
        }
    )
    cols = list(df.columns)
    expected = df.groupby(cols, dropna=False, sort=False, observed=True).ngroup().tolist()
    assert row_groups(df, cols).tolist() == expected == [0, 1, 0, 2]
    assert row_groups(df, ["one", "all_nan", "cat"]).tolist() == [0, 0, 0, 0]


def test_few_row_groups_number_locations_as_groupby_does():
    df = pd.DataFrame(
        {
            "name": pd.Categorical(["k", "g", "k", "k", "g", None]),
            "region": ["step", "step", "", "step", "step", "step"],
            "device": [0, 0, 0, 1, 0, 0],
            "waves": [1.5, np.nan, 1.5, 1.5, np.nan, 2.0],
        }
    )
    # rows 1 and 4 equal (NaN == NaN), the rest each alone; ids in order of first appearance
    cols = ["name", "region", "device", "waves"]
    expected = df.groupby(cols, dropna=False, sort=False, observed=True).ngroup().tolist()
    assert few_row_groups(df, cols).tolist() == expected == [0, 1, 2, 3, 1, 4]
    assert few_row_groups(df, ["region"]).tolist() == [0, 0, 1, 0, 0, 0]
    assert few_row_groups(df.iloc[:0], cols).tolist() == []


def test_rows_by_value_as_groupby_indices():
    devices = np.array([3, 1, 3, 0, 1, 3])
    got = rows_by_value(devices)
    want = pd.Series(devices).groupby(devices).indices
    assert list(got) == [0, 1, 3]  # keys ascending
    assert {k: v.tolist() for k, v in got.items()} == {0: [3], 1: [1, 4], 3: [0, 2, 5]}
    assert {k: v.tolist() for k, v in got.items()} == {k: v.tolist() for k, v in want.items()}
    one = rows_by_value(np.array([2, 2, 2]))  # one value: every row, no hashing
    assert list(one) == [2] and one[2].tolist() == [0, 1, 2]
    assert rows_by_value(np.array([], dtype=np.int64)) == {}
