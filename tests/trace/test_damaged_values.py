"""Values of the wrong type or shape in each reader: the classes of damage the reader fuzz
(tests/fuzz/fuzz_readers.py) found ending in an internal error (exit 3), each now read as
missing (and told) or refused with AdvisorInputError. The same damage as whole files is in
the bad-input corpus (tests/bad_inputs/make_corpus.py, ``_fuzz_found_cases``)."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import H200_2GPU, SAMPLES
from rocpd_db import RocpdWriter, write_hand

from advisor.errors import AdvisorInputError
from advisor.trace import nsys, rocpd, rocprof
from advisor.trace.gpus import agent_spec, cdna_spec, device_index, fact
from advisor.trace.load import load_trace
from advisor.trace.model import Trace, empty_table

SMALL = SAMPLES / "h200_gemm_evidence.sqlite"


def _copy(tmp_path, *sql: str, source=SMALL):
    path = tmp_path / "t.sqlite"
    shutil.copyfile(source, path)
    with closing(sqlite3.connect(path)) as db:
        for s in sql:
            db.execute(s)
        db.commit()
    return path


# --- GPU facts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [(132, 132.0), ("132", 132.0), (0, None), (-4, None), ("x", None), (b"\x00", None),
     (float("inf"), None), (1e300, None), (True, None), (None, None), ([1], None)],
)  # fmt: skip
def test_a_gpu_fact_is_a_positive_number_within_its_limit(value, expected):
    assert fact(value, 4096) == expected


@pytest.mark.parametrize(
    "value, expected",
    [(0, 0), (3, 3), ("2", 2), (2.0, 2), (2.5, None), (-1, None), (2**31, None), ("x", None),
     (None, None), (float("nan"), None)],
)  # fmt: skip
def test_a_device_index_is_a_whole_number_below_2_31(value, expected):
    assert device_index(value) == expected


def test_an_agent_record_without_a_usable_cu_count_gives_no_spec():
    assert cdna_spec("MI300X", "90402", "many", 4, 8, 64, 64, "t") is None
    assert agent_spec({"cu_count": [304]}, "MI300X", "t") is None
    spec = agent_spec({"cu_count": 304, "gfx_target_version": "-0.001", "simd_per_cu": "x",
                       "wave_front_size": 1e9}, "AMD Instinct MI300X", "t")  # fmt: skip
    assert spec.sm_count == 304 and spec.simds_per_cu == 4 and spec.warp_size == 64
    assert spec.compute_capability == "gfx?"  # (the target is not known)


def test_devices_leave_out_ids_that_cannot_be_one():
    kernels = empty_table("kernels")
    copies = pd.DataFrame({"device": [np.nan, 1.8446744073709552e19, -1, 0.5, 1.0, "x"]})
    trace = Trace(path="t", format="t", producer_version="t", kernels=kernels)
    trace.memcpy = copies
    assert trace.devices == [1]


# --- Nsight Systems -------------------------------------------------------------------------


def test_text_in_gpu_facts_is_used_as_if_absent_and_said(tmp_path):
    path = _copy(tmp_path, "UPDATE TARGET_INFO_GPU SET maxBlocksPerSm = 'x', clockRate = "
                 "'back\\slash', computeMinor = 'y', maxRegistersPerSm = -5")  # fmt: skip
    trace = nsys.read_nsys(path)
    good = nsys.read_nsys(SMALL)
    spec, ref = trace.gpus[0], good.gpus[0]
    assert spec.max_blocks_per_sm == ref.max_blocks_per_sm  # (the built-in H200's)
    assert spec.clock_mhz is None and spec.registers_per_sm == ref.registers_per_sm
    assert spec.compute_capability == "9.0"
    assert any("maxBlocksPerSm, maxRegistersPerSm, clockRate cannot be GPU facts" in w
               for w in trace.warnings)  # fmt: skip


def test_a_gpu_row_without_a_usable_id_is_not_used(tmp_path):
    trace = nsys.read_nsys(_copy(tmp_path, "UPDATE TARGET_INFO_GPU SET id = 'zero'"))
    assert any("has no usable id" in w for w in trace.warnings)


def test_duplicate_string_ids_name_their_first_text(tmp_path):
    loose = ["CREATE TABLE _t AS SELECT * FROM StringIds", "DROP TABLE StringIds",
             "ALTER TABLE _t RENAME TO StringIds"]  # fmt: skip
    path = _copy(tmp_path, *loose, "INSERT INTO StringIds SELECT id, 'again' FROM StringIds")
    names = nsys.read_nsys(path).kernels["name"]
    assert "again" not in set(names)
    pd.testing.assert_series_equal(names, nsys.read_nsys(SMALL).kernels["name"])


@pytest.mark.parametrize(
    "value", ["x'b0ff'", "CAST(x'61b062' AS TEXT)"], ids=["blob", "text not UTF-8"]
)
def test_names_that_are_blobs_or_not_utf8_are_read(value, tmp_path):
    path = _copy(tmp_path, f"UPDATE StringIds SET value = {value}")
    trace = nsys.read_nsys(path)
    assert len(trace.kernels) == len(nsys.read_nsys(SMALL).kernels)
    assert all(isinstance(x, str) for x in trace.kernels["name"])
    assert trace.kernels["name"].iloc[0] in ("\ufffd\ufffd", "a\ufffdb")


def test_a_copy_on_a_device_past_int64_is_dropped_and_nothing_fails(tmp_path):
    path = _copy(tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET deviceId = "
                 "18446744073709551616 WHERE rowid % 2 = 0", source=H200_2GPU)  # fmt: skip
    trace = load_trace(path)
    assert set(trace.gpus) == {0, 1} and trace.devices == [0, 1]
    assert any("memory copies dropped" in w for w in trace.warnings)


class _Driver:
    """A stand-in ADBC driver whose every query raises ``error``."""

    class Error(Exception):
        pass

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def connect(self, uri: str):
        return self

    def cursor(self):
        return self

    def execute(self, sql: str):
        raise self.error

    def close(self) -> None:
        pass


class _Unknown(pa.ArrowException):
    """What pyarrow raises for the driver's "Unknown error" (a page it cannot decode)."""


@pytest.mark.parametrize("error", [_Unknown("Wrapping x failed"), OSError("x")])
def test_a_query_the_driver_cannot_do_is_read_with_sqlite3(error, monkeypatch):
    expected = nsys.read_nsys(SMALL)
    driver = _Driver(error)
    monkeypatch.setattr(nsys, "adbc_sqlite", lambda: (driver, (_Driver.Error, *nsys.ARROW_ERRORS)))
    trace = nsys.read_nsys(SMALL)
    for name in ("kernels", "api", "sync"):
        pd.testing.assert_frame_equal(getattr(trace, name), getattr(expected, name),
                                      check_dtype=False)  # fmt: skip


def test_the_driver_running_out_of_memory_is_raised(monkeypatch):
    driver = _Driver(pa.ArrowMemoryError("out of memory"))
    monkeypatch.setattr(nsys, "adbc_sqlite", lambda: (driver, (_Driver.Error, *nsys.ARROW_ERRORS)))
    with pytest.raises(MemoryError):
        nsys.read_nsys(SMALL)


# --- rocpd ----------------------------------------------------------------------------------


def _rocpd(tmp_path, *sql: str, views: bool = True):
    path = tmp_path / "t.db"
    with closing(sqlite3.connect(path)) as db:
        write_hand(RocpdWriter(db, "ab12_cd34", views=views))
        for s in sql:
            db.execute(s)
        db.commit()
    return path


def test_rocpd_without_timestamp_rows_is_refused(tmp_path):
    with pytest.raises(AdvisorInputError, match="no kernel dispatches with their timestamps"):
        rocpd.read_rocpd(_rocpd(tmp_path, "DELETE FROM rocpd_timestamp_ab12_cd34"))


def test_rocpd_text_where_ids_and_times_belong_is_missing(tmp_path):
    path = _rocpd(
        tmp_path,
        "UPDATE rocpd_timestamp_ab12_cd34 SET value = '0x10' WHERE id = 9",
        "UPDATE rocpd_kernel_dispatch_ab12_cd34 SET grid_size_y = 'abc'",
        "UPDATE rocpd_track_ab12_cd34 SET pid = 'x' WHERE id = 1",
        "UPDATE rocpd_info_agent_ab12_cd34 SET logical_index = 'x' WHERE type = 'CPU'",
    )
    trace = rocpd.read_rocpd(path)
    assert len(trace.kernels) == 2  # (the first GEMM's start is no integer)
    assert "3 kernel dispatches have a non-numeric 'grid_y'" in " ".join(trace.warnings)
    assert trace.api.empty and trace.nvtx.empty  # (the host track's pid is no number)
    assert set(trace.gpus) == {2}


@pytest.mark.parametrize("value", ["'-inf'", "9e999"], ids=["text", "real"])
def test_rocpd_infinite_grids_and_pids_are_missing(value, tmp_path):
    path = _rocpd(tmp_path, f"UPDATE rocpd_kernel_dispatch_ab12_cd34 SET grid_size_x = {value}",
                  f"UPDATE rocpd_track_ab12_cd34 SET pid = {value}")  # fmt: skip
    trace = rocpd.read_rocpd(path)
    assert (trace.kernels["grid_x"] == 0).all() and (trace.kernels["pid"] == 0).all()
    assert "3 kernel dispatches have a non-numeric 'grid_x'" in " ".join(trace.warnings)


def test_rocpd_duplicate_symbols_and_no_string_table(tmp_path):
    t = "rocpd_info_kernel_symbol_ab12_cd34"
    path = _rocpd(tmp_path, f"CREATE TABLE _t AS SELECT * FROM {t}", f"DROP TABLE {t}",
                  f"ALTER TABLE _t RENAME TO {t}", f"INSERT INTO {t} SELECT * FROM {t}",
                  "DROP TABLE rocpd_string_ab12_cd34", views=False)  # fmt: skip
    trace = rocpd.read_rocpd(path)
    assert len(trace.kernels) == 3 and trace.kernels["name"].nunique() == 2
    assert any("no HIP API regions" in w for w in trace.warnings)


def test_rocpd_columns_spelt_in_another_case_and_names_not_utf8(tmp_path):
    # SQLite matches columns whatever their case and names results as the schema spells
    # them (a damaged schema: logical_iNdex); a name's bytes that are not UTF-8 are replaced
    path = _rocpd(
        tmp_path,
        "ALTER TABLE rocpd_info_agent_ab12_cd34 RENAME COLUMN logical_index TO logical_iNdex",
        "ALTER TABLE rocpd_track_ab12_cd34 RENAME COLUMN tid TO TID",
        "UPDATE rocpd_string_ab12_cd34 SET string = CAST(x'68b0' AS TEXT) || string "
        "WHERE string GLOB 'hip*'",
    )
    trace = rocpd.read_rocpd(path)
    assert set(trace.gpus) == {2} and len(trace.kernels) == 3
    assert trace.api["name"].str.startswith("h\ufffd").all()


def _schema_not_text(tmp_path):
    """A rocpd database whose schema holds a byte that is not UTF-8 where SQLite cannot parse
    it: SQLite's message quotes the byte, which sqlite3 cannot decode (UnicodeDecodeError)."""
    path = _rocpd(tmp_path)
    data = path.read_bytes()
    table = b'"rocpd_info_agent_ab12_cd34" (id INTEGER PRIMARY KEY'
    path.write_bytes(data.replace(table, table[:-3] + b"\xccEY", 1))
    return path


def test_a_schema_sqlite_cannot_quote_is_refused_with_one_line(tmp_path):
    path = _schema_not_text(tmp_path)
    assert not rocpd.is_rocpd(path)
    with pytest.raises(AdvisorInputError, match="its schema is damaged"):
        load_trace(path)
    with pytest.raises(AdvisorInputError, match="its schema is damaged"):
        rocpd.read_rocpd(path)


def test_rocpd_lookups_of_an_empty_table_find_nothing():
    empty = rocpd._ById(pd.DataFrame({"id": [], "value": []}), "g")
    values, found = empty.get_int("g", pd.Series([1, 2]), "value")
    assert not found.any()
    assert np.isnan(empty.get("g", pd.Series([1]), "value")).all()


@pytest.mark.parametrize(
    "value, expected",
    [(5, 5), (5.0, 5), (" 7 ", 7), ("0x10", None), ("1e3", None), (2.5, None), (True, None),
     (float("inf"), None), (2**63, None), (None, None), (b"1", None)],
)  # fmt: skip
def test_rocpd_integer_cells(value, expected):
    assert rocpd._whole(value) == expected


# --- rocprof ------------------------------------------------------------------------------


def test_rocprof_infinite_numbers_are_refused():
    text = pd.Series(["1", "-1e309", "inf"])
    with pytest.raises(AdvisorInputError, match="data row 2: '-1e309' is not a finite number"):
        rocprof.numbers(text, text, "Start_Timestamp", "t.csv")


def test_rocprof_json_fields_of_another_type_are_refused():
    values = pd.Series([1, None, 3.5, "4", [1], True])
    with pytest.raises(AdvisorInputError, match="grid of record 4 is not a number"):
        rocprof._json_numbers(values, "grid", "t.json")
    ok = rocprof._json_numbers(pd.Series([1, None, "4"]), "grid", "t.json")
    assert ok.tolist()[0] == 1 and np.isnan(ok.tolist()[1]) and ok.tolist()[2] == 4


def test_rocprof_sibling_rows_without_a_thread_are_dropped_and_said(tmp_path):
    trace = Trace(path="t", format="t", producer_version="t", kernels=empty_table("kernels"))
    table = pd.DataFrame({"pid": [1, np.nan, 1], "tid": [2, 2, np.nan]})
    kept = rocprof._whole_rows(table, ("pid", "tid"), tmp_path / "x_hip_trace.csv", trace)
    assert len(kept) == 1
    assert trace.warnings == ["2 of 3 rows of x_hip_trace.csv dropped: no pid or tid "
                              "(a damaged file)"]  # fmt: skip


# --- every reader ---------------------------------------------------------------------------


def test_launch_fields_no_launch_has_are_missing_and_the_launch_flagged():
    from advisor.trace.quality import drop_impossible_rows, impossible_launches

    kernels = pd.DataFrame({
        "device": [0, 0], "stream": [7, 7], "start": [0, 10], "end": [5, 15],
        "name": ["a", "b"], "demangled": ["a", "b"], "grid_x": [-1e308, 4.0],
        "grid_y": [1.0, np.inf], "grid_z": [1.0, 1.0], "block_x": [128.0, 128.0],
        "block_y": [1.0, 1.0], "block_z": [1.0, 1.0], "registers": [32.0, 2.0**60],
        "static_smem": [0.0, 0.0], "dynamic_smem": [0.0, 0.0]})  # fmt: skip
    trace = Trace(path="t", format="t", producer_version="t", kernels=kernels)
    drop_impossible_rows(trace)
    k = trace.kernels
    assert np.isnan(k.loc[0, "grid_x"]) and np.isnan(k.loc[1, "grid_y"])
    assert np.isnan(k.loc[1, "registers"]) and k.loc[1, "grid_x"] == 4
    assert impossible_launches(k).tolist() == [True, True]


def test_damaged_amd_agents_are_said(tmp_path):
    path = _rocpd(
        tmp_path,
        """UPDATE rocpd_info_agent_ab12_cd34 SET extdata =
                  '{"cu_count": "lots"}' WHERE type = 'GPU'""",
    )
    trace = rocpd.read_rocpd(path)
    assert trace.gpus == {}
    assert "1 GPU agent(s) in rocpd_info_agent have no usable id or compute-unit count" in " ".join(
        trace.warnings
    )


def test_kineto_integers_past_the_float_range_are_missing_and_counted():
    from collections import Counter

    from advisor.trace import kineto

    bad: Counter = Counter()
    big = int("9" * 400)
    out = kineto._num([1, big, 2.5, -big], 4, bad, "k")
    assert out[0] == 1 and out[2] == 2.5 and np.isnan(out[[1, 3]]).all() and bad["k"] == 2
    xyz = kineto._xyz([[1, 2, 3], [big, 1, 1]], 2, bad, "g")
    assert xyz[0].tolist() == [1, 2, 3] and np.isnan(xyz[1, 0]) and bad["g"] == 1


def test_nsys_range_ends_that_are_blobs_are_missing(tmp_path):
    path = _copy(tmp_path, "UPDATE NVTX_EVENTS SET end = x'9bfea1b2' WHERE rowid % 3 = 0")
    ranges = nsys.read_nsys(path).nvtx
    assert 0 < len(ranges) < len(nsys.read_nsys(SMALL).nvtx)
    assert ranges["end"].dtype == np.int64


def test_nsys_thread_ids_that_are_infinite_are_missing(tmp_path):
    path = _copy(tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = '-inf' "
                 "WHERE rowid % 2 = 0", "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = "
                 "9e999 WHERE rowid % 3 = 0")  # fmt: skip
    pids = nsys._pid(pd.Series(["-inf", 9e999, None, 2**24 * 5]))
    assert pids.tolist() == [0, 0, 0, 5]
    trace = load_trace(path)
    assert trace.api["tid"].isna().any() and not np.isinf(trace.api["tid"]).any()
