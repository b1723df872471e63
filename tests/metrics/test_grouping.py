"""row_groups (each column numbered, the numbers packed into one key): pandas' groupby ngroup."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.metrics import keys
from advisor.metrics.grouping import row_groups, rows_by_value


def _ngroup(df: pd.DataFrame, cols: list[str]) -> list[int]:
    return df.groupby(cols, dropna=False, sort=False, observed=True).ngroup().tolist()


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


def test_a_key_that_would_overflow_is_numbered_again(monkeypatch):
    # each column numbered alone: a and b 4 values each, c 2. With a key limit of 20, a and b
    # pack into 4 * 4 = 16 keys, but 16 * 2 = 32 would not fit: the (a, b) key is numbered
    # again first (4 pairs seen: 0..3), then 4 * 2 = 8 keys fit
    df = pd.DataFrame({"a": [0, 1, 2, 3, 0, 1], "b": [5, 6, 7, 8, 5, 6], "c": [9, 9, 9, 9, 8, 9]})
    # rows 0 and 4 differ in c; rows 1 and 5 are alike
    monkeypatch.setattr(keys, "PACK_LIMIT", 20)
    calls = []
    real = pd.factorize
    monkeypatch.setattr(pd, "factorize", lambda v, **k: calls.append(type(v)) or real(v, **k))
    got = row_groups(df, ["a", "b", "c"]).tolist()
    # a, b, c numbered, the (a, b) key numbered again, the last key numbered: arrays only
    # (no tuples of columns numbered through a MultiIndex: keys.number_tuples)
    assert calls == [np.ndarray] * 5
    monkeypatch.setattr(pd, "factorize", real)
    assert got == [0, 1, 2, 3, 4, 1] == _ngroup(df, ["a", "b", "c"])


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(-3, 3),
            st.sampled_from([0.5, 2.0, np.nan]),
            st.sampled_from(["x", "y", None]),
            st.integers(0, 1 << 40),
        ),
        max_size=30,
    ),
    limit=st.sampled_from([4, 64, keys.PACK_LIMIT]),
    block=st.sampled_from([1, 3, 1 << 20]),
)
def test_same_ids_as_groupby_for_any_columns(rows, limit, block):
    df = pd.DataFrame(rows, columns=["i", "f", "o", "big"])
    df["cat"] = pd.Categorical(df["o"])
    cols = ["i", "f", "cat", "o", "big"]
    original = keys.PACK_LIMIT, keys.BLOCK_ROWS
    keys.PACK_LIMIT = limit  # (small limits force the key to be numbered again)
    keys.BLOCK_ROWS = block  # (the columns and the key numbered a few rows at a time)
    try:
        got = row_groups(df, cols).tolist()
    finally:
        keys.PACK_LIMIT, keys.BLOCK_ROWS = original
    assert got == (_ngroup(df, cols) if len(df) else [])


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


def test_locations_numbered_as_groupby_does():
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
    assert row_groups(df, cols).tolist() == expected == [0, 1, 2, 3, 1, 4]
    assert row_groups(df, ["region"]).tolist() == [0, 0, 1, 0, 0, 0]
    assert row_groups(df.iloc[:0], cols).tolist() == []


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


def test_many_distinct_values_stay_distinct():
    # 300 and 70,000 distinct values: numbered in int16 and int32 (an int8 would wrap 256
    # onto 0, an int16 65,536 onto 0): rows i and i + n are alike, no other two
    for n in (300, 70_000):
        df = pd.DataFrame({"x": np.tile(np.arange(n) * 10, 2), "y": np.tile([1.5, 2.5], n)})
        assert row_groups(df, ["x", "y"]).tolist() == [*range(n), *range(n)]


def test_groups_and_first_rows_with_the_numeric_columns_taken_out():
    # rows 0,1,3 alike; 2,4 alike (NaN == NaN); 5 alone: groups 0,0,1,0,1,2, first rows 0,2,5.
    # "k" is constant (splits nothing), "name" categorical (never taken), "x" not a key
    from advisor.metrics.grouping import groups_and_firsts

    def table():
        return pd.DataFrame({
            "a": np.array([1, 1, 2, 1, 2, 3], dtype=np.int32),
            "b": np.array([0.5, 0.5, np.nan, 0.5, np.nan, np.nan], dtype=np.float32),
            "k": np.array([7, 7, 7, 7, 7, 7], dtype=np.int16),
            "name": pd.Categorical(["x", "x", "y", "x", "y", "x"]),
            "x": [10, 11, 12, 13, 14, 15]})  # fmt: skip

    cols = ["a", "b", "k", "name"]
    want = table().iloc[[0, 2, 5]].reset_index(drop=True)
    for taken in ((), ("a", "b", "k", "name")):
        df = table()
        groups, firsts = groups_and_firsts(df, cols, taken)
        assert groups.tolist() == [0, 0, 1, 0, 1, 2] == row_groups(table(), cols).tolist()
        pd.testing.assert_frame_equal(firsts, want)  # (values, dtypes, column order)
        # the numeric columns taken are gone from the caller's table, the others stay
        kept = ["name", "x"] if taken else list(want.columns)
        assert list(df.columns) == kept
    groups, firsts = groups_and_firsts(table().iloc[:0], cols, ("a", "b"))  # (no rows)
    assert len(groups) == 0 and list(firsts.columns) == list(want.columns) and firsts.empty


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.0, 1.5, np.nan]),
                          st.integers(0, 1)), min_size=1, max_size=30))  # fmt: skip
def test_groups_and_firsts_taken_or_not_agree(rows):
    from unittest import mock

    from advisor.metrics.grouping import groups_and_firsts

    def table():
        return pd.DataFrame({"a": np.array([r[0] for r in rows], dtype=np.int32),
                             "b": np.array([r[1] for r in rows], dtype=np.float32),
                             "c": np.array([r[2] for r in rows], dtype=np.int8)})  # fmt: skip

    groups, firsts = groups_and_firsts(table(), ["a", "b", "c"])
    with mock.patch.object(keys, "BLOCK_ROWS", 2):  # (numbered two rows at a time)
        taken_groups, taken_firsts = groups_and_firsts(table(), ["a", "b", "c"], ("a", "b", "c"))
    assert groups.tolist() == taken_groups.tolist() == _ngroup(table(), ["a", "b", "c"])
    pd.testing.assert_frame_equal(taken_firsts, firsts)
