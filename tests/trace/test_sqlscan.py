"""The compiled SQLite table scanner (advisor/trace/_sqlscan.c): the same columns as SQLite's
own read on every Nsight fixture, values worked out by hand on built databases, and a
decline (never a wrong table or a crash) wherever the layout is not one it reads."""

import os
import random
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import H200_2GPU, H200_GRAPHLEVEL, H200_SINGLE, public_nsys

from advisor.trace import nsys, sqlscan

if not sqlscan.available():
    if os.environ.get("ADVISOR_REQUIRE_SCANNER"):
        raise RuntimeError("advisor.trace._sqlscan was not built (ADVISOR_REQUIRE_SCANNER set)")
    pytest.skip("the compiled SQLite scanner was not built", allow_module_level=True)

from advisor.trace import _sqlscan  # noqa: E402


@pytest.fixture
def counted(monkeypatch):
    """Every scan the reader makes, and whether the scanner answered it."""
    calls: list[bool] = []
    scan = _sqlscan.scan

    def counting(*args):
        try:
            out = scan(*args)
        except _sqlscan.Unsupported:
            calls.append(False)
            raise
        calls.append(True)
        return out

    monkeypatch.setattr(_sqlscan, "scan", counting)
    return calls


@pytest.mark.parametrize(
    "path", [H200_SINGLE, H200_GRAPHLEVEL, H200_2GPU, *public_nsys()], ids=lambda p: p.name
)
def test_every_nsys_fixture_reads_as_sqlite_reads_it(path, counted, monkeypatch):
    scanned = nsys.read_nsys(path)  # (every table of any size through the scanner)
    assert counted and all(counted)  # (the kernels and the API calls: none declined)
    monkeypatch.setattr(nsys, "read_columns", lambda *a, **k: None)
    monkeypatch.setattr(nsys, "READ_THREADS", 1)  # one plain SQLite query per table
    whole = nsys.read_nsys(path)
    for name in ("kernels", "api"):
        pd.testing.assert_frame_equal(getattr(scanned, name), getattr(whole, name))


def build(path: Path, sql: list[str], page_size: int = 4096) -> None:
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA page_size = {page_size}")
        for s in sql:
            db.execute(s)


def read(
    path: Path,
    table: str,
    columns: dict,
    where_in=None,
    int32=(),
    float32=(),
    threads=2,
    rowids=None,
):
    with sqlite3.connect(path) as conn:
        if rowids is None:
            rowids = conn.execute(f"SELECT MIN(rowid), MAX(rowid) FROM {table}").fetchone()
        return sqlscan.read_columns(path, conn, table, columns, rowids, where_in, threads,
                                    int32, float32)  # fmt: skip


def test_values_of_every_storage_width_nulls_and_narrowing(tmp_path):
    # SQLite stores an integer in 0 (the constants 0 and 1), 1, 2, 3, 4, 6 or 8 bytes; each
    # width is read back as written, signs included
    values = [0, 1, -1, 127, -128, 32767, -32768, 2**23 - 1, -(2**23), 2**31 - 1, -(2**31) + 1,
              2**47 - 1, -(2**47), 2**62, -(2**63)]  # fmt: skip
    path = tmp_path / "t.sqlite"
    # (d: integer affinity holding fractions, which SQLite keeps as reals)
    build(path, ["CREATE TABLE t (a INTEGER, b INTEGER, c INTEGER, d INTEGER, e INTEGER)"])
    with sqlite3.connect(path) as db:
        rows = [(v, i if i % 3 else None, i, i + 0.5, i) for i, v in enumerate(values)]
        db.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)
    cols = {"a": "a", "b": "b", "c": "c", "d": "d", "e": "e", "f": None}
    df = read(path, "t", cols, int32=("b", "c"), float32=("e",))
    assert df["a"].dtype == np.int64 and df["a"].tolist() == values
    # NULLs: float64 with NaN (rows 0, 3, 6, 9, 12), narrowing asked or not
    assert df["b"].dtype == np.float64
    assert df["b"].isna().tolist() == [i % 3 == 0 for i in range(15)]
    assert df["b"][1] == 1 and df["b"][14] == 14
    assert df["c"].dtype == np.int32 and df["c"].tolist() == list(range(15))
    assert df["d"].dtype == np.float64 and df["d"].tolist() == [i + 0.5 for i in range(15)]
    assert df["e"].dtype == np.float32 and df["e"][14] == np.float32(14)
    assert df["f"].dtype == np.float64 and df["f"].isna().all()


def test_an_int32_column_keeps_64_bits_where_a_value_needs_them(tmp_path):
    path = tmp_path / "t.sqlite"
    build(path, ["CREATE TABLE t (a INTEGER, b INTEGER, c INTEGER)"])
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO t VALUES (?, ?, ?)",
                       [(1, 1, 1), (2**40, -(2**31), 2), (3, 3, None)])  # fmt: skip
    df = read(path, "t", {"a": "a", "b": "b", "c": "c"}, int32=("a", "b", "c"))
    # 2**40 does not fit int32; -2**31 fits, but is the scanner's NULL there: both are read
    # again at 64 bits
    assert df["a"].dtype == np.int64 and df["a"].tolist() == [1, 2**40, 3]
    assert df["b"].dtype == np.int32 and df["b"].tolist() == [1, -(2**31), 3]
    assert df["c"].dtype == np.float64 and df["c"].isna().tolist() == [False, False, True]


def test_a_filter_keeps_the_rows_sql_in_keeps(tmp_path):
    path = tmp_path / "t.sqlite"
    build(path, ["CREATE TABLE t (k INTEGER, v INTEGER)"])
    rows = [(i % 7 if i % 11 else None, i) for i in range(5000)]
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO t VALUES (?, ?)", rows)
    df = read(path, "t", {"k": "k", "v": "v"}, where_in=("k", [5, 2, 2, 9]), threads=3)
    expected = [v for k, v in rows if k in (2, 5)]  # (NULL is never IN a list)
    # by hand: 714 values of i below 5000 each with i % 7 == 2 and == 5, less the 65 + 65 of
    # them with i % 11 == 0 (i % 77 == 44 and == 33): 1298
    assert df["v"].tolist() == expected and len(expected) == 1298
    assert read(path, "t", {"v": "v"}, where_in=("k", [])) is None  # (no row: SQLite reads it)


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_a_filter_in_one_pass_or_two_keeps_the_same_rows(threads, tmp_path):
    # rowids with holes (rows deleted, a run of them at the start), kept rows spread over
    # every thread's pages: one pass (a slot per rowid, the threads' runs moved together
    # afterwards, the arrays cut to them) and two passes (counted first) give SQL's rows
    path = tmp_path / "t.sqlite"
    build(path, ["CREATE TABLE t (k INTEGER, v INTEGER, w INTEGER)"], page_size=512)
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO t VALUES (?, ?, ?)",
                       ((i % 5, i, -3 * i) for i in range(20_000)))  # fmt: skip
        db.execute("DELETE FROM t WHERE v < 700 OR v % 13 = 0")
        lo, hi = db.execute("SELECT MIN(rowid), MAX(rowid) FROM t").fetchone()
        expected = db.execute("SELECT v, w FROM t WHERE k IN (1, 4) ORDER BY rowid").fetchall()
    # by hand: v in 700..19999 (19300 values, 3860 cycles of 5) with v % 5 in (1, 4): 7720,
    # less those with v % 13 == 0 too (v % 65 in (26, 39): 741..19981 and 754..19994, 297
    # each): 7126
    assert (lo, hi) == (701, 20_000) and len(expected) == 7720 - 594
    ids = np.array([1, 4], dtype=np.int64).tobytes()
    for span in (hi - lo + 1, 0):
        arrays, _, rows = _sqlscan.scan(str(path), 2, (1, 2), b"qi", 0, ids, lo, span, threads)
        got = zip(np.frombuffer(arrays[0], np.int64).tolist(),
                  np.frombuffer(arrays[1], np.int32).tolist(), strict=True)  # fmt: skip
        assert rows == len(expected) and list(got) == expected, span


@pytest.mark.parametrize("threads", [1, 2, 3])  # (3: a leaf a thread)
def test_leaves_out_of_rowid_order_are_declined_by_a_one_pass_filter(threads, tmp_path):
    # three leaves under the root; its first child and its right-most child swapped: the
    # leaves come in an order whose rowids fall (within one thread's run, or from one run to
    # the next); a one-pass filter, which places rows by rowid, declines the table (SQLite
    # then reads it)
    path = tmp_path / "t.sqlite"
    build(path, ["CREATE TABLE t (k INTEGER, v INTEGER)"], page_size=512)
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO t VALUES (?, ?)", ((1, i) for i in range(150)))
        assert db.execute("SELECT rootpage FROM sqlite_master WHERE name = 't'").fetchone() == (2,)
    data = bytearray(path.read_bytes())
    root = 512  # (page 2)
    assert data[root] == 0x05 and int.from_bytes(data[root + 3 : root + 5], "big") == 2
    first_cell = int.from_bytes(data[root + 12 : root + 14], "big")
    left, right = root + first_cell, root + 8
    data[left : left + 4], data[right : right + 4] = data[right : right + 4], data[left : left + 4]
    path.write_bytes(bytes(data))
    ids = np.array([1], dtype=np.int64).tobytes()
    with pytest.raises(_sqlscan.Unsupported, match="rowids out of order"):
        _sqlscan.scan(str(path), 2, (1,), b"q", 0, ids, 1, 150, threads)


def test_a_filter_over_rowids_wider_than_the_file_counts_first(tmp_path):
    # rowids 1 and 2**40: a slot per rowid would be terabytes (rowids_fit fails), so the
    # filtered read counts its rows first; without a filter the table is declined
    path = tmp_path / "t.sqlite"
    build(path, ["CREATE TABLE t (k INTEGER, v INTEGER)"])
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO t (rowid, k, v) VALUES (?, ?, ?)",
                       [(1, 3, 10), (2, 4, 20), (2**40, 3, 30)])  # fmt: skip
    assert not sqlscan.rowids_fit(path, 1, 2**40)
    df = read(path, "t", {"v": "v"}, where_in=("k", [3]))
    assert df["v"].tolist() == [10, 30]
    assert read(path, "t", {"v": "v"}) is None


def test_a_deep_b_tree_on_small_and_large_pages(tmp_path):
    for page_size in (512, 65536):
        path = tmp_path / f"t{page_size}.sqlite"
        build(path, ["CREATE TABLE t (a INTEGER, b INTEGER)"], page_size=page_size)
        with sqlite3.connect(path) as db:
            db.executemany("INSERT INTO t VALUES (?, ?)", ((i, i * i) for i in range(60_000)))
        df = read(path, "t", {"b": "b", "a": "a"}, threads=4)
        assert df["a"].tolist() == list(range(60_000))
        assert df["b"].tolist() == [i * i for i in range(60_000)]


def test_columns_added_later_and_the_primary_key(tmp_path):
    path = tmp_path / "t.sqlite"
    build(path, ["CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER)",
                 "INSERT INTO t (id, a) VALUES (10, 1), (11, 2)",
                 "ALTER TABLE t ADD COLUMN late INTEGER",
                 "INSERT INTO t VALUES (12, 3, 30)"])  # fmt: skip
    df = read(path, "t", {"a": "a", "late": "late"})
    assert df["a"].tolist() == [1, 2, 3]
    assert df["late"].isna().tolist() == [True, True, False] and df["late"][2] == 30
    # (the INTEGER PRIMARY KEY is the rowid: its record value is NULL; SQLite reads it)
    assert read(path, "t", {"id": "id", "a": "a"}) is None


DECLINED = ("text", "mixed", "overflow", "holes", "sparse", "without_rowid", "default",
            "real_affinity", "wal", "wide_table")  # fmt: skip


@pytest.mark.parametrize("case", DECLINED)
def test_layouts_it_does_not_read_are_declined(case, tmp_path):
    path = tmp_path / "t.sqlite"
    schema = {
        "without_rowid": "CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER) WITHOUT ROWID",
        "real_affinity": "CREATE TABLE t (a INTEGER, b REAL)",
        # (b the 301st column: further into the record than the scanner reads)
        "wide_table": "CREATE TABLE t (a INTEGER, "
        + "".join(f"c{i} INTEGER, " for i in range(299))
        + "b INTEGER)",
    }.get(case, "CREATE TABLE t (a INTEGER, b INTEGER, blob BLOB)")
    build(path, [schema])
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO t (a, b) VALUES (?, ?)", [(i, i) for i in range(100)])
        if case == "text":
            db.execute("UPDATE t SET b = 'x' WHERE a = 50")
        elif case == "mixed":
            db.execute("UPDATE t SET b = 0.5 WHERE a = 50")
        elif case == "overflow":  # (a record larger than a page spills onto overflow pages)
            db.execute("UPDATE t SET blob = zeroblob(10000) WHERE a = 50")
        elif case == "holes":
            db.execute("DELETE FROM t WHERE a = 50")
        elif case == "sparse":  # (rowids far apart: no array is made for the span between)
            db.execute("INSERT INTO t (rowid, a, b) VALUES (?, 1, 1), (?, 2, 2)",
                       (-(2**63), 2**63 - 1))  # fmt: skip
        elif case == "default":
            db.execute("ALTER TABLE t ADD COLUMN c INTEGER DEFAULT 7")
    if case == "wal":
        Path(f"{path}-wal").write_bytes(b"x")
    columns = {"a": "a", "b": "b", **({"c": "c"} if case == "default" else {})}
    assert read(path, "t", columns, rowids=(0, 99) if case == "without_rowid" else None) is None


def test_names_types_and_connections_as_sql_resolves_them(tmp_path):
    # found by an independent review: each case read as SQL reads it, or declined
    fill = "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 9) "
    path = tmp_path / "names.sqlite"
    build(path, ['CREATE TABLE t ("Ä" INTEGER, "ä" INTEGER, k INTEGER, "\u212a" INTEGER, '
                 '"a""b" INTEGER, r "REAL \u0131nt")',
                 fill + "INSERT INTO t SELECT i, -i, i, 100 + i, i, i FROM n"])  # fmt: skip
    with sqlite3.connect(path) as conn:
        sql = {c: [r[0] for r in conn.execute(f'SELECT "{c}" FROM t ORDER BY rowid')]
               for c in ("Ä", "k")}  # fmt: skip
    # SQLite folds ASCII letters only: "Ä" and "ä", "k" and the Kelvin sign are two columns
    # each (Python's lower() folds them): here told apart as SQLite does, or declined
    for column in ("Ä", "k"):
        df = read(path, "t", {"x": column})
        assert df is None or df["x"].tolist() == sql[column]
    # "REAL ınt" (dotless i) has REAL affinity for SQLite: not read as integers
    assert read(path, "t", {"x": "r"}) is None
    # one column under two aliases, a quote in a column name: declined or read
    assert read(path, "t", {"x": "k", "y": "k"}) is None
    assert read(path, "t", {"x": 'a"b'})["x"].tolist() == list(range(10))


def test_what_the_connection_sees_beyond_the_file_is_left_to_sql(tmp_path):
    path = tmp_path / "t.sqlite"
    build(path, ["CREATE TABLE t (a INTEGER, b INTEGER)",
                 "INSERT INTO t VALUES (1, 2), (3, 4)"])  # fmt: skip
    with sqlite3.connect(path) as conn:  # a temporary table of the same name: SQL reads it
        conn.execute("CREATE TEMP TABLE t (b INTEGER, a INTEGER)")
        assert sqlscan.read_columns(path, conn, "t", {"a": "a"}, (1, 2)) is None
    conn = sqlite3.connect(path)  # a change not committed on the connection
    conn.execute("UPDATE t SET a = a + 1000")
    assert sqlscan.read_columns(path, conn, "t", {"a": "a"}, (1, 2)) is None
    conn.rollback()
    conn.close()
    wal = tmp_path / "w.sqlite"  # a write-ahead log with content, the file read by a link
    writer = sqlite3.connect(wal)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (a INTEGER)")
    writer.execute("INSERT INTO t VALUES (1), (2)")
    writer.commit()
    link = tmp_path / "link.sqlite"
    link.symlink_to(wal)
    with sqlite3.connect(link) as conn:
        assert sqlscan.read_columns(link, conn, "t", {"a": "a"}, (1, 2)) is None
    writer.close()
    with sqlite3.connect(path) as conn:  # an empty table's rowids; ids that are no int64
        assert sqlscan.read_columns(path, conn, "t", {"a": "a"}, (None, None)) is None
        for ids in ([1.5, 3.0], [2**63, 3]):
            assert sqlscan.read_columns(path, conn, "t", {"a": "a"}, (1, 2), ("a", ids)) is None


def test_a_float32_column_rounds_as_sqlites_read_does(tmp_path):
    # above 2^53, int -> float64 -> float32 (SQLite's read where the column has NULLs) may
    # differ from int -> float32 by one unit in the last place: such columns are read again
    big = 2**54 + 2**30 + 1
    path = tmp_path / "t.sqlite"
    build(path, ["CREATE TABLE t (a INTEGER, b INTEGER)",
                 f"INSERT INTO t VALUES ({big}, {big}), (NULL, 1)"])  # fmt: skip
    df = read(path, "t", {"a": "a", "b": "b"}, float32=("a", "b"))
    direct = np.array([big], dtype=np.int64).astype(np.float32)[0]  # (int64 -> float32)
    assert df["a"][0] == np.float32(np.float64(big)) and np.isnan(df["a"][1])
    assert df["b"][0] == direct and df["b"][1] == 1  # (no NULL: int64 -> float32)
    assert np.float32(np.float64(big)) != direct  # (the case is a real one)


def test_damaged_files_are_declined_never_misread(tmp_path):
    # random bytes overwritten in the pages of a small table (page 1, the schema, left
    # alone: the reader reads the schema through SQLite first): where SQLite calls the table
    # malformed the scanner declines it (it checks pages and records as SQLite does), and
    # where SQLite reads it the scanner reads the same rows or declines
    clean = tmp_path / "clean.sqlite"
    build(clean, ["CREATE TABLE t (a INTEGER, b INTEGER)"], page_size=512)
    with sqlite3.connect(clean) as db:
        db.executemany("INSERT INTO t VALUES (?, ?)", ((i, -i) for i in range(3000)))
        assert db.execute("SELECT rootpage FROM sqlite_master WHERE name = 't'").fetchone() == (2,)
    data = clean.read_bytes()
    rng = random.Random(33)
    outcomes = {"declined": 0, "read": 0, "malformed": 0}
    for trial in range(300):
        damaged = bytearray(data)
        for _ in range(rng.choice([1, 4, 16])):
            damaged[rng.randrange(512, len(damaged))] = rng.randrange(256)
        path = tmp_path / f"d{trial}.sqlite"
        path.write_bytes(bytes(damaged))
        try:
            with sqlite3.connect(path) as conn:
                reference = conn.execute("SELECT a, b FROM t ORDER BY rowid").fetchall()
        except sqlite3.DatabaseError:
            reference = None
            outcomes["malformed"] += 1
        try:
            arrays, _, rows = _sqlscan.scan(str(path), 2, (0, 1), b"qq", -1, b"", 1, 3000, 2)
        except _sqlscan.Unsupported:
            outcomes["declined"] += 1
            continue
        outcomes["read"] += 1
        assert reference is not None, f"trial {trial}: SQLite calls it malformed, it was read"
        a = np.frombuffer(arrays[0], np.int64)
        b = np.frombuffer(arrays[1], np.int64)
        assert list(zip(a.tolist(), b.tolist(), strict=True)) == reference
        # a filter, in one pass (a slot per rowid) and in two: SQL's rows or declined
        ids = np.arange(0, 3000, 3, dtype=np.int64).tobytes()
        kept = [(x, y) for x, y in reference if isinstance(x, int) and x % 3 == 0
                and 0 <= x < 3000]  # fmt: skip
        for span in (3000, 0):
            try:
                arrays, _, rows = _sqlscan.scan(str(path), 2, (0, 1), b"qq", 0, ids, 1, span, 3)
            except _sqlscan.Unsupported:
                continue
            a = np.frombuffer(arrays[0], np.int64)
            b = np.frombuffer(arrays[1], np.int64)
            assert list(zip(a.tolist(), b.tolist(), strict=True)) == kept, (trial, span)
    assert min(outcomes.values()) > 0, outcomes


@pytest.mark.parametrize(
    "args",
    [
        ((), b"", -1, b"", 1, 1, 1),  # no column
        ((0,), b"x", -1, b"", 1, 1, 1),  # unknown kind
        ((0,), b"q", -1, b"", 1, 1, 0),  # no thread
        ((0,), b"q", -1, b"abc", 1, 1, 1),  # ids not int64
        ((0, 0), b"qq", -1, b"", 1, 1, 1),  # one column twice
        ((300,), b"q", -1, b"", 1, 1, 1),  # beyond a record's columns
        ((-1,), b"q", -1, b"", 1, 1, 1),  # no such column
    ],
)
def test_bad_arguments_raise(args, tmp_path):
    path = tmp_path / "t.sqlite"
    shutil.copy(H200_GRAPHLEVEL, path)
    with pytest.raises(ValueError):
        _sqlscan.scan(str(path), 2, *args)
