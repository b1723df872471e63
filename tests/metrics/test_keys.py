"""metrics/keys.py: packed composite keys, both ways (arithmetic packing and the fallback),
against the key tuples themselves; and the gap metrics that sort within runs by them."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.metrics import gaps
from advisor.metrics.keys import (
    DENSE_BINS,
    PACK_LIMIT,
    TextColumn,
    group_sums,
    integer_group_sums,
    pack,
    pack_one,
    row_dtype,
    slot_sums,
    sort_runs,
    text_categorical,
)

SETTINGS = settings(max_examples=200, deadline=None)
# small values pack arithmetically; with 2**40 and -2**40 in a column the ranges' product
# of three columns passes 2**62 and the fallback numbers the tuples
VALUES = st.sampled_from([-3, 0, 1, 2, 7, 2**31, 2**40, -(2**40)])
ROWS = st.lists(st.tuples(VALUES, VALUES, VALUES), min_size=1, max_size=25)


def test_by_hand():
    # column 0 in [0, 1] (radix 2), column 1 in [5, 7] (radix 3): key = c0 * 3 + (c1 - 5)
    p = pack((np.array([0, 1, 1]), np.array([5, 7, 6])))
    assert p.lows == (0, 5) and p.radices == (2, 3)
    assert p.keys[0].tolist() == [0, 5, 4]
    assert p.column(0, p.keys[0]).tolist() == [0, 1, 1]
    assert p.column(1, p.keys[0]).tolist() == [5, 7, 6]


def test_two_tables_share_one_packing():
    # ops (device, stream) looked up among windows: the ranges are taken over both tables
    ops = (np.array([0, 3]), np.array([10, 12]))
    windows = (np.array([3, 1]), np.array([12, 11]))
    a, b = pack(ops, windows).keys
    assert a[1] == b[0] and len(set(a) | set(b)) == 3


def test_overflow_takes_the_fallback_or_returns_none():
    big = (np.array([0, 2**40]), np.array([0, 2**40]), np.array([0, 1]))
    assert pack_one(*big, fallback=None) is None  # (2**40+1)^2 * 2 >= 2**62
    p = pack(big)
    assert p.radices is None and p.keys[0].tolist() == [0, 1]
    with pytest.raises(ValueError):
        p.column(0, p.keys[0])
    assert pack_one(np.array([0, 2**61])) is not None and PACK_LIMIT == 2**62


def test_group_sums_by_hand():
    # rows (a, b, ns): (1, -1, 10) (0, 5, 3) (1, -1, 4) (0, 5, 1) (2, 5, 7): groups in order
    # of first appearance (1, -1) 14 ns over 2 rows, (0, 5) 4 over 2, (2, 5) 7 over 1
    a, b = np.array([1, 0, 1, 0, 2], np.int8), np.array([-1, 5, -1, 5, 5])
    got = group_sums({"a": a, "b": b}, {"ns": np.array([10, 3, 4, 1, 7]),
                                        "n": np.ones(5, dtype=np.int64)})  # fmt: skip
    assert got.to_dict("list") == {"a": [1, 0, 2], "b": [-1, 5, 5], "ns": [14, 4, 7],
                                   "n": [2, 2, 1]}  # fmt: skip
    assert (got.dtypes[["a", "b"]] == np.int64).all()


@SETTINGS
@given(ROWS)
def test_group_sums_are_pandas_groupby_either_way(rows):
    # packed (small values) or not (the 2**40 values overflow the packing): the same table
    # as pandas' own groupby on the columns
    cols = {k: np.array([r[i] for r in rows], dtype=np.int64) for i, k in enumerate("xyz")}
    ns = np.arange(len(rows), dtype=np.int64) * 7 + 1
    want = pd.DataFrame({**cols, "ns": ns}).groupby(list("xyz"), sort=False, as_index=False).sum()
    pd.testing.assert_frame_equal(group_sums(cols, {"ns": ns}), want)


def test_integer_group_sums_by_hand():
    # the rows of test_group_sums_by_hand: groups in ascending key order now, (0, 5) 4 ns
    # over 2 rows, (1, -1) 14 over 2, (2, 5) 7 over 1; sums as float64 (bools count)
    a, b = np.array([1, 0, 1, 0, 2], np.int8), np.array([-1, 5, -1, 5, 5])
    got = integer_group_sums({"a": a, "b": b}, {"ns": np.array([10, 3, 4, 1, 7]),
                                                "n": np.ones(5, dtype=bool)})  # fmt: skip
    assert got.to_dict("list") == {"a": [0, 1, 2], "b": [5, -1, 5], "ns": [4.0, 14.0, 7.0],
                                   "n": [2.0, 2.0, 1.0]}  # fmt: skip
    assert (got.dtypes == [np.int64, np.int64, np.float64, np.float64]).all()
    empty = integer_group_sums({"a": a[:0], "b": b[:0]}, {"ns": np.zeros(0)})
    assert empty.empty and list(empty.columns) == ["a", "b", "ns"]


def test_slot_sums_by_hand():
    # slots 0..3 (slot 2 empty): booleans counted in int64, integers summed in int64, floats
    # as float64 weights; an empty slot sums to 0
    key = np.array([3, 0, 3, 1, 0])
    counts = np.bincount(key, minlength=4)
    some = slot_sums(key, np.array([True, False, True, True, True]), counts)
    every = slot_sums(key, np.ones(5, dtype=bool), counts)
    ints = slot_sums(key, np.array([5, 1, 7, 2, 3], dtype=np.int32), counts)
    floats = slot_sums(key, np.array([0.5, 1.0, 0.25, 2.0, 3.0]), counts)
    assert some.tolist() == [1, 1, 0, 2] and some.dtype == np.int64
    assert every.tolist() == [2, 1, 0, 2] == counts.tolist()
    assert ints.tolist() == [4, 2, 0, 12] and ints.dtype == np.int64
    assert floats.tolist() == [4.0, 2.0, 0.0, 0.75] and floats.dtype == np.float64


def test_integer_group_sums_of_each_kind_of_value():
    # one slot per key 0..2: booleans counted where true (rows 1 and 3 of slot 0, row 4 of
    # slot 2), integers added in int64 (2**53 + 1 + 1 stays exact: float64 sums would
    # round each step back to 2**53), whole-number floats as weights
    k = np.array([0, 0, 1, 0, 2])
    got = integer_group_sums({"k": k}, {
        "some": np.array([False, True, True, True, False]),
        "big": np.array([2**53, 1, 0, 1, 0], dtype=np.int64),
        "f": np.array([1.0, 2.0, 3.0, 4.0, 5.0]),
    })  # fmt: skip
    assert got["some"].tolist() == [2.0, 1.0, 0.0]
    assert got["big"].tolist() == [float(2**53 + 2), 0.0, 0.0]
    assert got["f"].tolist() == [7.0, 3.0, 5.0]
    assert (got.dtypes[1:] == np.float64).all()


@SETTINGS
@given(ROWS)
def test_integer_group_sums_are_pandas_groupby_dense_or_not(rows):
    # whole numbers: the same sums as pandas' sorted groupby, counted into an array (small
    # key ranges) or through group_sums (the 2**40 values: a range past DENSE_BINS)
    cols = {k: np.array([r[i] for r in rows], dtype=np.int64) for i, k in enumerate("xyz")}
    ns = np.arange(len(rows), dtype=np.int64) * 7 + 1
    want = pd.DataFrame({**cols, "ns": ns.astype(float)}).groupby(list("xyz"), as_index=False)
    pd.testing.assert_frame_equal(integer_group_sums(cols, {"ns": ns}), want.sum())
    assert DENSE_BINS < 2**40


TEXTS = st.sampled_from(["", "b", "a", "aten::mm", "cudaMalloc (in aten::empty)", None])


@SETTINGS
@given(st.integers(0, 12), st.lists(st.tuples(st.lists(st.integers(0, 11)), st.data())))
def test_a_text_column_is_the_categorical_of_its_texts(n, puts):
    # texts put part by part (later puts overwrite earlier ones, rows may repeat within
    # one put: the last wins, as numpy assignment does) end as text_categorical of an
    # object array given the same assignments
    column, plain = TextColumn(n), np.full(n, "", dtype=object)
    for rows, data in puts:
        rows = np.array([r for r in rows if r < n], dtype=np.int64)
        texts = np.array(data.draw(st.lists(TEXTS, min_size=len(rows), max_size=len(rows))),
                         dtype=object)  # fmt: skip
        column.put(rows, texts)
        plain[rows] = texts
    got, want = column.categorical(), text_categorical(plain)
    assert list(got.categories) == list(want.categories)
    assert got.codes.tolist() == want.codes.tolist()


@SETTINGS
@given(ROWS, st.integers(0, 25))
def test_keys_equal_and_sort_as_the_tuples(rows, cut):
    cut = min(cut, len(rows))
    cols = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(3)]
    tables = [tuple(c[:cut] for c in cols), tuple(c[cut:] for c in cols)]
    keys = np.concatenate(pack(*tables).keys)
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert (keys[i] == keys[j]) == (rows[i] == rows[j])
            assert (keys[i] < keys[j]) == (rows[i] < rows[j])


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 3), VALUES), min_size=1, max_size=25))
def test_sorted_and_distinct_within_runs_against_brute_force(rows):
    # runs 0..R-1 ascending; values and keys that pack and that do not (2**40 spans)
    rows = sorted(rows, key=lambda r: r[0])
    run = np.array([r[0] for r in rows], dtype=np.int64)
    _, run = np.unique(run, return_inverse=True)  # contiguous run ids 0, 1, ...
    values = np.array([r[1] for r in rows], dtype=np.float64)
    first = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    want_sorted = np.concatenate([np.sort(values[run == r]) for r in range(run.max() + 1)])
    assert np.array_equal(gaps._sorted_in_runs(run, values), want_sorted)
    keys = np.where(values < 0, -1, np.abs(values)).astype(np.int64)  # -1: no launch key
    got = gaps._distinct_per_run(run, keys, first)
    for r in range(run.max() + 1):
        mine = keys[run == r]
        assert got[r] == len(set(mine[mine >= 0].tolist())) + int((mine < 0).sum())


@pytest.mark.parametrize(
    "values",
    [
        np.array([5, 3, 5, -1, 3, 7], dtype=np.int64),
        np.array([2.0, np.nan, 1.0, np.nan, 2.0]),
        np.array([2**63 + 5, 3, 2**63 + 5], dtype=np.uint64),
        np.array([], dtype=np.int64),
        np.random.default_rng(1).integers(0, 50, 10_000).astype(np.int32),
    ],
)
def test_distinct_and_first_rows_are_numpys_unique(values):
    # np.unique is the specification: sorted distinct values, and the first row of each
    from advisor.metrics.keys import distinct, first_rows

    want, first = np.unique(values, return_index=True)
    np.testing.assert_array_equal(distinct(values), want)
    np.testing.assert_array_equal(first_rows(values), first)


def test_first_rows_by_hand():
    from advisor.metrics.keys import first_rows

    # values 5 (rows 0, 2), 3 (rows 1, 4), -1 (row 3): by value -1, 3, 5
    assert first_rows(np.array([5, 3, 5, -1, 3])).tolist() == [3, 1, 0]


def test_first_rows_of_codes_numbered_by_appearance_by_hand():
    from advisor.metrics.keys import first_rows

    # codes in order of first appearance 0 0 1 0 2 1 2 3: code 0 starts at row 0, 1 at 2,
    # 2 at 4, 3 at 7 (first_appearance_codes' first rows where it hashes)
    assert first_rows(np.array([0, 0, 1, 0, 2, 1, 2, 3])).tolist() == [0, 2, 4, 7]
    assert first_rows(np.zeros(0, dtype=np.int64)).tolist() == []


def test_first_appearance_codes_by_hand():
    from advisor.metrics.keys import first_appearance_codes

    # values 7 7 -2 7 5 -2: 7 first (code 0, row 0), -2 next (1, row 2), 5 last (2, row 4)
    codes, first = first_appearance_codes(np.array([7, 7, -2, 7, 5, -2]))
    assert codes.tolist() == [0, 0, 1, 0, 2, 1] and first.tolist() == [0, 2, 4]
    # a range too wide for an array per value (2**40): hashed, the same answer
    codes, first = first_appearance_codes(np.array([2**40, 3, 2**40, 0]))
    assert codes.tolist() == [0, 1, 0, 2] and first.tolist() == [0, 1, 3]
    codes, first = first_appearance_codes(np.zeros(0, dtype=np.int64))
    assert codes.tolist() == [] and first.tolist() == []


def test_few_value_codes_by_hand():
    from advisor.metrics.keys import few_value_codes

    # 9 fills rows 0, 1, 3 (code 0, found by one comparison); 4 (row 2) and 2**50 (row 4)
    # are hashed: codes 1 and 2 in order of appearance
    codes, values = few_value_codes(np.array([9, 9, 4, 9, 2**50, 4]))
    assert codes.tolist() == [0, 0, 1, 0, 2, 1] and values.tolist() == [9, 4, 2**50]
    assert codes.dtype == np.int32
    # NaN is no value (-1), first or not
    nan = np.nan
    codes, values = few_value_codes(np.array([1.5, nan, 1.5, 7.0]))
    assert codes.tolist() == [0, -1, 0, 1] and values.tolist() == [1.5, 7.0]
    codes, values = few_value_codes(np.array([nan, 7.0, nan, 1.5, 7.0]))
    assert codes.tolist() == [-1, 0, -1, 1, 0] and values.tolist() == [7.0, 1.5]
    codes, values = few_value_codes(np.zeros(0, dtype=np.int64))
    assert codes.tolist() == [] and values.tolist() == []


@SETTINGS
@given(st.lists(st.sampled_from([3.0, -1.0, 2.0**40, np.nan]), min_size=1, max_size=30))
def test_few_value_codes_name_the_values_as_a_categorical(values):
    from advisor.metrics.keys import few_value_codes

    values = np.array(values)
    codes, distinct = few_value_codes(values)
    got = pd.Categorical.from_codes(codes, distinct)
    want = pd.Categorical(values)  # (NaN as NaN: assert_array_equal takes them as equal)
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float64), np.asarray(want, np.float64))


@SETTINGS
@given(
    st.lists(st.one_of(st.integers(-5, 9), st.integers(-(2**40), 2**40)), min_size=1,
             max_size=80),
    st.sampled_from([1, 3, 1 << 20]),
)  # fmt: skip
def test_first_appearance_codes_are_pandas_factorize(values, block_rows):
    from unittest import mock

    from advisor.metrics import keys
    from advisor.metrics.keys import first_appearance_codes, first_rows

    values = np.array(values, dtype=np.int64)
    with mock.patch.object(keys, "BLOCK_ROWS", block_rows):  # (blocks of 1 or 3 rows too)
        codes, first = first_appearance_codes(values)
    want = pd.factorize(values)[0]
    assert codes.tolist() == want.tolist() and first.tolist() == first_rows(want).tolist()


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**20)), min_size=1, max_size=40),
    st.sampled_from([0, 1 << 20]),
)
def test_sort_runs_is_a_sort_with_either_kind(rows, max_mean):
    # keys packed (run first, runs ascending): a mean run above the limit takes quicksort,
    # at or below it the merge sort; both give np.sort's answer
    import advisor.metrics.keys as keys_module

    rows = sorted(rows, key=lambda r: r[0])
    keys = np.array([(run << 21) | value for run, value in rows], dtype=np.int64)
    want = np.sort(keys)
    saved = keys_module.RUN_SORT_MAX_MEAN
    keys_module.RUN_SORT_MAX_MEAN = max_mean
    try:
        sort_runs(keys, len({r[0] for r in rows}))
    finally:
        keys_module.RUN_SORT_MAX_MEAN = saved
    np.testing.assert_array_equal(keys, want)


def test_most_frequent_by_hand():
    # group 0: b a b a (a tie: the alphabetically first, a); group 1: c c a (c);
    # group 2: one name, b
    names = pd.Categorical(list("babacca") + ["b"])
    groups = np.array([0, 0, 0, 0, 1, 1, 1, 2], dtype=np.int32)
    assert gaps._most_frequent(groups, names).tolist() == ["a", "c", "b"]


@SETTINGS
@given(st.lists(st.lists(st.sampled_from(["k2", "k10", "gemm", "a"]), min_size=1, max_size=8),
                min_size=1, max_size=8))  # fmt: skip
def test_most_frequent_against_brute_force(groups_of_names):
    from collections import Counter

    names = pd.Categorical([n for group in groups_of_names for n in group])
    groups = np.repeat(np.arange(len(groups_of_names), dtype=np.int32),
                       [len(g) for g in groups_of_names])  # fmt: skip
    want = []
    for group in groups_of_names:
        counts = Counter(group)
        top = max(counts.values())
        want.append(min(n for n, c in counts.items() if c == top))  # (ties: alphabetical)
    assert gaps._most_frequent(groups, names).tolist() == want


def test_text_column_put_coded_as_put_of_the_words():
    words = np.array(["aten::mm", "step", "aten::mm", ""], dtype=object)  # (a text twice)
    coded, plain = TextColumn(6), TextColumn(6)
    plain.put(np.array([0, 1]), np.array(["step", "x"], dtype=object))
    coded.put(np.array([0, 1]), np.array(["step", "x"], dtype=object))
    codes = np.array([2, 0, -1, 1])  # (-1: the last word, '')
    rows = np.array([5, 3, 2, 1])
    coded.put_coded(rows, codes, words)
    plain.put(rows, words[codes])
    got, want = coded.categorical(), plain.categorical()
    # by hand: rows 0..5 = step, step, '', aten::mm, '', aten::mm
    assert list(got) == ["step", "step", "", "aten::mm", "", "aten::mm"]
    assert list(got) == list(want) and list(got.categories) == list(want.categories)
    assert list(got.categories) == ["", "aten::mm", "step"]


def test_text_column_on_a_shared_vocabulary_by_hand():
    # the pieces' vocabulary holds more words than the column uses ('x' only there): the
    # column coded into it by codes gives the texts put, its categories those present only
    from advisor.metrics.keys import vocabulary_codes

    vocab: dict[object, int] = {"": 0}
    shared = vocabulary_codes(np.array(["x", "step", "aten::mm", "step"], dtype=object), vocab)
    column = TextColumn(4, vocab)
    column.put_codes(np.array([3, 1]), shared[[1, 2]])  # step, aten::mm
    got = column.categorical()
    assert list(got) == ["", "aten::mm", "", "step"]
    assert list(got.categories) == ["", "aten::mm", "step"]
    assert vocab == {"": 0, "x": 1, "step": 2, "aten::mm": 3}


def test_text_column_outgrowing_int16_codes_keeps_every_text():
    # the codes start as int16: a vocabulary of 40,000 texts (shared, grown by another
    # column; or grown by the column's own puts past 32,767) widens them before the
    # codes past int16 are put, and the texts put before stay (a code of 39,999 in int16
    # would wrap to -25,537)
    from advisor.metrics.keys import vocabulary_codes

    vocab: dict[object, int] = {"": 0}
    column = TextColumn(3, vocab)
    column.put(np.array([0]), np.array(["first"], dtype=object))  # (code 1, as int16)
    words = np.array([f"w{i}" for i in range(40_000)], dtype=object)
    codes = vocabulary_codes(words, vocab)  # (another column's texts: codes 2 .. 40,001)
    column.put_codes(np.array([2]), codes[-1:])
    assert list(column.categorical()) == ["first", "", "w39999"]
    own = TextColumn(40_000)
    own.put(np.arange(40_000), words)  # (its own vocabulary grows to 40,001 in one put)
    own.put(np.array([0]), np.array(["w39999"], dtype=object))
    got = own.categorical()
    assert got[0] == "w39999" and got[39_999] == "w39999" and got[32_767] == "w32767"


def test_group_medians_by_hand():
    # group 0: 5 1 3 (odd: 3); group 1: 4 10 (even: 7.0); group 2: none (NaN); group 3:
    # -2 2**40 (a wide value, negative: (2**40 - 2) / 2); floats go through pandas: the same
    from advisor.metrics.keys import group_medians

    group = np.array([0, 1, 0, 3, 1, 0, 3])
    values = np.array([5, 4, 1, -2, 10, 3, 2**40], dtype=np.int64)
    got = group_medians(group, values, 4)
    assert got[[0, 1, 3]].tolist() == [3.0, 7.0, (2**40 - 2) / 2] and np.isnan(got[2])
    floats = group_medians(group, values.astype(np.float64), 4)
    np.testing.assert_array_equal(floats, got)
    # no values at all: every group's is NaN
    none = group_medians(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 3)
    assert none.shape == (3,) and np.isnan(none).all()


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 6), st.one_of(st.integers(-9, 9), VALUES)),
                min_size=1, max_size=60))  # fmt: skip
def test_group_medians_are_pandas_groupby_median(rows):
    from advisor.metrics.keys import group_medians

    group = np.array([g for g, _ in rows])
    values = np.array([v for _, v in rows], dtype=np.int64)
    want = pd.Series(values).groupby(group).median().reindex(range(8)).to_numpy()
    np.testing.assert_array_equal(group_medians(group, values, 8), want)


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0.0, 1.5, 2.0, -3.0, 2.0**50])),
             min_size=1, max_size=40),
    st.sampled_from([1, 3, 1 << 20]),
)  # fmt: skip
def test_first_max_rows_is_idxmax_in_blocks_of_any_size(rows, block_rows):
    from unittest import mock

    from advisor.metrics import keys
    from advisor.metrics.keys import first_max_rows

    ids = np.unique([g for g, _ in rows], return_inverse=True)[1]  # (each id present)
    score = np.array([s for _, s in rows])
    with mock.patch.object(keys, "BLOCK_ROWS", block_rows):  # (blocks of 1 or 3 rows too)
        got = first_max_rows(ids, score)
    want = pd.Series(score).groupby(ids).idxmax().to_numpy()
    assert got.tolist() == want.tolist()


def test_sorted_codes_by_hand():
    # values 7 -2 7 40: distinct in ascending order -2 7 40, codes 1 0 1 2
    from advisor.metrics.keys import sorted_codes

    codes, values = sorted_codes(np.array([7, -2, 7, 40], dtype=np.int64))
    assert codes.tolist() == [1, 0, 1, 2] and values.tolist() == [-2, 7, 40]
    codes, values = sorted_codes(np.zeros(0, dtype=np.int64))
    assert codes.tolist() == [] and values.tolist() == []


@SETTINGS
@given(st.lists(st.one_of(st.integers(-5, 9), st.integers(-(2**40), 2**40)), min_size=1,
                max_size=60), st.sampled_from([4, 1 << 22]))  # fmt: skip
def test_sorted_codes_are_a_sorted_factorize(values, dense_bins):
    from unittest import mock

    from advisor.metrics import keys
    from advisor.metrics.keys import sorted_codes

    values = np.array(values, dtype=np.int64)
    with mock.patch.object(keys, "DENSE_BINS", dense_bins):  # (the array path and the hash)
        codes, distinct_values = sorted_codes(values)
    want_codes, want_values = pd.factorize(values, sort=True)
    assert codes.tolist() == want_codes.tolist()
    assert distinct_values.tolist() == want_values.tolist()


def test_row_positions_are_int32_below_two_to_the_31_rows():
    # below 2**31 rows every position (0 .. 2**31 - 2), -1 for none and the count itself
    # fit int32 (largest 2**31 - 1); from 2**31 rows on, int64
    assert row_dtype(0) is np.int32 and row_dtype(2**31 - 1) is np.int32
    assert row_dtype(2**31) is np.int64 and row_dtype(2**40) is np.int64


def test_used_codes_by_hand_in_blocks():
    # codes [3, -1, 0, 3, 5] of 6: present 0, 3, 5 (-1, missing, left out); the same in
    # blocks of 2 and of 1
    from advisor.metrics.keys import used_codes

    codes = np.array([3, -1, 0, 3, 5], dtype=np.int32)
    for block in (1 << 20, 2, 1):
        assert used_codes(codes, 6, block).tolist() == [0, 3, 5]
    assert used_codes(np.zeros(0, dtype=np.int32), 4).tolist() == []


def test_factorize_in_blocks_by_hand():
    from advisor.metrics.keys import factorize_in_blocks

    values = np.array([5.0, 3.0, np.nan, 5.0, 7.0, np.nan, 3.0, 9.0])
    # blocks of 3: [5, 3, nan] -> 0 1 2; [5, 7, nan] -> 0 3 2 (7 new); [3, 9] -> 1 4 (9 new)
    codes, distinct = factorize_in_blocks(values.__getitem__, len(values), block=3)
    assert codes.dtype == np.int32 and codes.tolist() == [0, 1, 2, 0, 3, 2, 1, 4]
    assert distinct[:2].tolist() == [5.0, 3.0] and np.isnan(distinct[2])
    assert distinct[3:].tolist() == [7.0, 9.0]
    empty, none = factorize_in_blocks(values.__getitem__, 0, block=3)
    assert len(empty) == 0 and len(none) == 0 and none.dtype == np.float64


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 4), max_size=40),
    st.sampled_from(["int32", "float32", "float64", "bool", "object"]),
    st.integers(1, 7),
)
def test_factorize_in_blocks_is_pandas_factorize(picks, kind, block):
    from advisor.metrics.keys import factorize_in_blocks

    pool = {"int32": [-2, 0, 7, 1 << 30, 3], "float32": [0.5, np.nan, 2.0, -1.0, 3.0],
            "float64": [np.nan, 1e18, 0.0, 2.5, -7.0], "bool": [True, False] * 3,
            "object": ["a", None, "b", "c", "a"]}[kind]  # fmt: skip
    values = np.array([pool[p] for p in picks], dtype=kind)
    codes, distinct = factorize_in_blocks(values.__getitem__, len(values), block=block)
    want_codes, want_distinct = pd.factorize(values, use_na_sentinel=False)
    assert codes.tolist() == want_codes.tolist()
    assert distinct.dtype == want_distinct.dtype
    assert pd.Index(distinct).equals(pd.Index(want_distinct))


def test_packed_rows_of_any_rows_are_packs_keys():
    from advisor.metrics.keys import pack, pack_bounds, packed_rows

    a, b = np.array([3, -1, 3, 0], dtype=np.int32), np.array([2, 2, 5, 4], dtype=np.int8)
    c = np.array([1, 1], dtype=np.int64), np.array([9, 2], dtype=np.int64)
    # a spans -1..3 (radix 5), b 2..9 over both tables (radix 8): key = (a + 1) * 8 + b - 2
    assert pack_bounds([a, b, *c], 2) == ((-1, 2), (5, 8))
    lows, radices = pack_bounds([a, b, *c], 2)
    assert packed_rows([a, b], lows, radices).tolist() == [32, 0, 35, 10]
    assert packed_rows([a, b], lows, radices, slice(1, 3)).tolist() == [0, 35]
    narrow = packed_rows([a, b], lows, radices, dtype=np.int32)
    assert narrow.dtype == np.int32 and narrow.tolist() == [32, 0, 35, 10]
    wide = np.array([0, 2**40], dtype=np.int64)  # (a product past int32: int64 after all)
    assert packed_rows([wide], (0,), (2**40 + 1,), dtype=np.int32).dtype == np.int64
    assert pack((a, b), c).keys[0].tolist() == [32, 0, 35, 10]
    assert pack_bounds([a, np.full(4, 2**40)], 2) == ((-1, 2**40), (5, 1))
    assert pack_bounds([a.astype(np.int64) * 2**61, b], 2) is None
