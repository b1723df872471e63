"""Sliced concurrent reads: each slice copied into place, narrowed only where values fit."""

import shutil
import sqlite3

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import H200_SINGLE

from advisor.trace import nsys
from advisor.trace.slices import SliceColumns


def table(**columns) -> pa.Table:
    return pa.table({k: pa.array(v) for k, v in columns.items()})


def test_slices_land_in_rowid_order_whatever_order_they_arrive():
    sink = SliceColumns(6, int32=("a",))
    assert sink.put(3, table(a=[4, 5, 6], b=[0.5, None, 2.5]))
    assert sink.put(0, table(a=[1, 2, 3], b=[1.0, 2.0, 3.0]))
    df = sink.frame()
    assert df["a"].tolist() == [1, 2, 3, 4, 5, 6] and df["a"].dtype == np.int32
    assert df["b"].dtype == np.float64 and np.isnan(df["b"][4]) and df["b"][5] == 2.5


def test_holes_between_slices_are_removed():
    # rowids 0..9 with 3 and 7..8 missing: slices [0,5) and [5,10) return 4 and 3 rows
    sink = SliceColumns(10)
    sink.put(5, table(a=[5, 6, 9]))
    sink.put(0, table(a=[0, 1, 2, 4]))
    assert sink.frame()["a"].tolist() == [0, 1, 2, 4, 5, 6, 9]


def test_nulls_and_wide_values_widen_the_column_instead_of_truncating():
    sink = SliceColumns(6, int32=("a", "b"), float32=("c",))
    sink.put(0, table(a=[1, 2, 3], b=[1, 2, 3], c=[7, None, 9]))
    sink.put(3, table(a=[4, None, 6], b=[4, 2**40, 6], c=[1, 2, 3]))
    df = sink.frame()
    assert df["a"].dtype == np.float64 and df["a"].isna().tolist() == [0, 0, 0, 0, 1, 0]
    assert df["a"][5] == 6
    assert df["b"].dtype == np.int64 and df["b"].tolist() == [1, 2, 3, 4, 2**40, 6]
    assert df["c"].dtype == np.float32 and np.isnan(df["c"][1]) and df["c"][2] == 9


def test_all_null_slice_of_an_integer_column_reads_as_missing():
    sink = SliceColumns(4, int32=("a",))
    sink.put(0, table(a=[1, 2]))
    sink.put(2, pa.table({"a": pa.nulls(2)}))
    df = sink.frame()
    assert df["a"].tolist()[:2] == [1.0, 2.0] and df["a"].isna().tolist() == [0, 0, 1, 1]


def test_a_filtered_read_joins_each_slices_own_arrays():
    sink = SliceColumns(1_000_000, int32=("a",), filtered=True)  # (nothing that large made)
    sink.put(500_000, table(a=[7, None], b=[3, 4]))
    sink.put(0, table(a=[1, 2, 3], b=[1, 2, 2**40]))
    df = sink.frame()
    assert df["a"].dtype == np.float64 and df["a"].tolist()[:4] == [1, 2, 3, 7]
    assert np.isnan(df["a"][4]) and df["b"].tolist() == [1, 2, 2**40, 3, 4]


def test_text_in_a_column_is_refused():
    sink = SliceColumns(4)
    assert sink.put(0, table(a=[1, 2]))
    assert not sink.put(2, table(a=["x", "y"]))


@pytest.fixture
def damaged_copy(tmp_path):
    """The H200 sample with holes in the kernel rowids, NULL grids, a registers value
    beyond int32 and a NULL launch id (what real exports may hold after damage)."""
    path = tmp_path / "sample.sqlite"
    shutil.copy(H200_SINGLE, path)
    with sqlite3.connect(path) as db:
        k = "CUPTI_ACTIVITY_KIND_KERNEL"  # rebuilt without its NOT NULL constraints
        db.execute(f"CREATE TABLE loose AS SELECT * FROM {k}")
        db.execute(f"DROP TABLE {k}")
        db.execute(f"ALTER TABLE loose RENAME TO {k}")
        db.execute(f"DELETE FROM {k} WHERE rowid % 97 = 5 OR rowid BETWEEN 300 AND 340")
        db.execute(f"UPDATE {k} SET gridX = NULL WHERE rowid % 101 = 7")
        db.execute(f"UPDATE {k} SET registersPerThread = 5000000000 WHERE rowid = 900")
        db.execute(f"UPDATE {k} SET correlationId = NULL WHERE rowid = 1000")
    return path


@pytest.mark.parametrize("damaged", [False, True])
def test_sliced_read_equals_one_whole_query(damaged, damaged_copy, monkeypatch):
    path = damaged_copy if damaged else H200_SINGLE
    monkeypatch.setattr(nsys, "read_columns", lambda *a, **k: None)  # (SQLite's reads only)
    monkeypatch.setattr(nsys, "SLICE_MIN_ROWS", 0)
    monkeypatch.setattr(nsys, "READ_THREADS", 1)  # one plain query
    whole = nsys.read_nsys(path)
    monkeypatch.setattr(nsys, "READ_THREADS", 3)
    monkeypatch.setattr(nsys, "SLICE_ROWS", 128)  # about a dozen slices per table
    monkeypatch.setattr(nsys, "BATCH_ROWS", 50)  # of several batches each (34 slices: 75 batches)
    calls = []
    put = SliceColumns.put
    monkeypatch.setattr(SliceColumns, "put", lambda s, *a: calls.append(1) or put(s, *a))
    sliced = nsys.read_nsys(path)
    assert len(calls) > 60
    for name in ("kernels", "api"):
        pd.testing.assert_frame_equal(getattr(sliced, name), getattr(whole, name))
    if damaged:
        assert sliced.kernels["grid_x"].isna().sum() > 0
        assert sliced.kernels["registers"].max() == 5_000_000_000


def test_a_column_the_driver_cannot_type_is_read_another_way(damaged_copy, monkeypatch):
    # text among the integers past the first batches: the driver's Arrow stream raises
    # OSError (a type mismatch), and the table is read with sqlite3 instead
    with sqlite3.connect(damaged_copy) as db:
        k = "CUPTI_ACTIVITY_KIND_KERNEL"
        db.execute(f"UPDATE {k} SET registersPerThread = 'x' "
                   f"WHERE rowid = (SELECT MAX(rowid) FROM {k})")  # fmt: skip
    monkeypatch.setattr(nsys, "read_columns", lambda *a, **k: None)  # (SQLite's reads only)
    monkeypatch.setattr(nsys, "SLICE_MIN_ROWS", 0)
    monkeypatch.setattr(nsys, "SLICE_ROWS", 128)
    monkeypatch.setattr(nsys, "BATCH_ROWS", 50)
    registers = nsys.read_nsys(damaged_copy).kernels["registers"]
    assert registers.tolist().count("x") == 1 and 5_000_000_000 in registers.tolist()


@pytest.mark.parametrize("error", [RuntimeError("a bug"), MemoryError()])
def test_a_bug_or_no_memory_in_a_sliced_read_is_raised_not_read_again(error, monkeypatch):
    monkeypatch.setattr(nsys, "read_columns", lambda *a, **k: None)  # (SQLite's reads only)
    monkeypatch.setattr(nsys, "SLICE_MIN_ROWS", 0)
    monkeypatch.setattr(nsys, "READ_THREADS", 3)

    def put(self, offset, table):
        raise error

    monkeypatch.setattr(SliceColumns, "put", put)
    with pytest.raises(type(error)):
        nsys.read_nsys(H200_SINGLE)


def test_rowids_far_apart_are_read_in_one_query(tmp_path, monkeypatch):
    # a kernel's rowid moved to 2^62: slices (or an array) per rowid of that span would need
    # terabytes; the table is read in one query instead, every kernel kept
    path = tmp_path / "far.sqlite"
    shutil.copy(H200_SINGLE, path)
    with sqlite3.connect(path) as db:
        k = "CUPTI_ACTIVITY_KIND_KERNEL"
        n = db.execute(f"SELECT COUNT(*) FROM {k}").fetchone()[0]
        db.execute(f"UPDATE {k} SET rowid = {2**62} WHERE rowid = (SELECT MAX(rowid) FROM {k})")
    for scanner in (True, False):
        if not scanner:
            monkeypatch.setattr(nsys, "read_columns", lambda *a, **k: None)
        assert len(nsys.read_nsys(path).kernels) == n
